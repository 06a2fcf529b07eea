"""Argument checks: one named helper per check, shared by every layer.

The rule (DESIGN rule 7): a value of the wrong type is a ``TypeError``, a value of the
right type that is out of range or unknown is a ``ValueError``, and the message names the
argument and what was expected. Each helper returns the value in its canonical form (an
``int``, a ``float``, the ``str``), so a caller checks and converts in one line before it
writes anything.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np

from .keys import KINDS

_REAL = (int, float, np.integer, np.floating)


def _type_name(value: Any) -> str:
    return type(value).__name__


def check_text(value: Any, name: str = "text") -> str:
    """A ``str`` that encodes to UTF-8 (no lone surrogates): SQLite and JSON store it as is."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_type_name(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} is not valid Unicode (it holds a lone surrogate at {exc.start})") from None
    return value


def check_bool(value: Any, name: str) -> bool:
    """``True`` or ``False`` (numpy's bool too); 0 and 1 are not bools here."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, not {_type_name(value)}")
    return bool(value)


def check_int(value: Any, name: str, minimum: int | None = None, below: int | None = None) -> int:
    """An ``int`` (numpy's too, never a bool) of at least ``minimum`` and under ``below``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {_type_name(value)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    if below is not None and value >= below:
        raise ValueError(f"{name} must be an int below {below}, got {value!r}")
    return int(value)


def check_limit(value: Any, name: str = "limit") -> int:
    """A positive ``int``: a limit, a budget, a batch size."""
    if value.__class__ is int and value >= 1:  # the common case, checked on every recall
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int, not {_type_name(value)}")
    return check_int(value, name, minimum=1)


def check_number(value: Any, name: str, low: float = -math.inf, high: float = math.inf, *,
                 low_open: bool = False, high_open: bool = False, allow_inf: bool = False) -> float:
    """A real number (never a bool) in the interval from ``low`` to ``high``, as a float.

    ``low_open`` / ``high_open`` leave an end out; NaN is always refused and infinity
    unless ``allow_inf``. The message writes the interval the way it is checked,
    e.g. ``half_life_days must be in (0, inf), got -1``.
    """
    if value.__class__ is not float and (isinstance(value, bool) or not isinstance(value, _REAL)):
        raise TypeError(f"{name} must be a number, not {_type_name(value)}")
    v = float(value)
    # Every comparison with NaN is False, so NaN falls through to the error.
    if (v > low if low_open else v >= low) and (v < high if high_open else v <= high) and (
            allow_inf or math.isfinite(v)):
        return v
    lb, rb = "(" if low_open else "[", ")" if high_open else "]"
    raise ValueError(f"{name} must be in {lb}{low:g}, {high:g}{rb}, got {value!r}")


def check_positive(value: Any, name: str, allow_inf: bool = False) -> float:
    """A number above 0: a half-life, a time to live (``allow_inf``: forever)."""
    return check_number(value, name, 0.0, math.inf, low_open=True, high_open=not allow_inf, allow_inf=allow_inf)


def check_weight(value: Any, name: str) -> float:
    """A finite number of at least 0: a blend weight, a score gap."""
    return check_number(value, name, 0.0, math.inf, high_open=True)


def check_choice(value: Any, name: str, choices: Collection[str]) -> str:
    """One of the named ``choices``: a mode, a kind, an outcome, a policy."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {tuple(choices)}, not {_type_name(value)}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {tuple(choices)}")
    return value


def check_session(value: Any, name: str = "session") -> str | None:
    """A session name (``str``) or None, the session of memories with no name."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, not {_type_name(value)}")
    return None if value is None else check_text(value, name)


def check_kinds(kinds: Any, name: str = "kinds") -> tuple[str, ...]:
    """A kind or a sequence of kinds from :data:`~vxmem.core.keys.KINDS`, each once, in order."""
    if isinstance(kinds, str):
        kinds = (kinds,)
    try:
        kinds = tuple(kinds)
    except TypeError:
        raise TypeError(f"{name} must be a kind or a sequence of kinds from {KINDS}") from None
    if not kinds:
        raise ValueError(f"{name} must name at least one of {KINDS}")
    for k in kinds:
        check_choice(k, "kind", KINDS)
    return tuple(dict.fromkeys(kinds))
