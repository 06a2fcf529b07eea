"""The memory's own argument checks, built from :mod:`vxmem.core.checks` and :mod:`vxmem.store.arguments`.

TTLs per kind, the judge's verdicts, ``min_relevance``, ``user``, a filter on the caller's
own metadata, and the caller's metadata itself (no ``_vx_`` key). As everywhere, a wrong
type is a ``TypeError`` and a bad value a ``ValueError`` naming the argument.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..core.checks import check_number, check_positive, check_session, check_text
from ..core.keys import KINDS, RESERVED_PREFIX
from ..store.seam import ANY_SESSION, FilterValues, check_filter, check_json, json_copy


def check_ttl_map(ttl_days: Any) -> dict[str, float | None]:
    if ttl_days is None:
        return {}
    if not isinstance(ttl_days, dict):
        raise TypeError("ttl_days must be a dict of kind -> days, e.g. {'turn': 30}")
    out: dict[str, float | None] = {}
    for k, v in ttl_days.items():
        if k not in KINDS:
            raise ValueError(f"ttl_days has unknown kind {k!r}; expected some of {KINDS}")
        out[k] = None if v is None else check_positive(v, f"ttl_days[{k!r}]", allow_inf=True)
    return out


def check_verdicts(verdicts: Any, n: int) -> list[bool]:
    if isinstance(verdicts, (str, bytes)) or not isinstance(verdicts, Iterable):
        raise TypeError(f"judge must return a sequence of bools, got {type(verdicts).__name__}")
    verdicts = list(verdicts)
    if len(verdicts) != n:
        raise ValueError(f"judge returned {len(verdicts)} verdicts for {n} candidates")
    if not all(isinstance(v, (bool, np.bool_)) for v in verdicts):
        raise TypeError("judge must return one bool per candidate")
    return [bool(v) for v in verdicts]


def check_min_relevance(value: Any) -> float | None:
    return None if value is None else check_number(value, "min_relevance")



def check_user(user: Any) -> str | None:
    """A user's name (a non-empty ``str``), or None for no user in particular."""
    if user is None:
        return None
    if not isinstance(user, str):
        raise TypeError(f"user must be a str or None, not {type(user).__name__}")
    if not check_text(user, "user").strip():
        raise ValueError("user must be a non-empty str")
    return user


def check_memory_filter(filter: Any) -> FilterValues | None:
    """A filter on the caller's own metadata, in the collection's syntax (``{key: value}``
    or ``{key: [values]}``); the reserved keys have arguments of their own."""
    flt = check_filter(filter)
    for key in flt or ():
        if key.startswith(RESERVED_PREFIX):
            raise ValueError(f"filter key {key!r} is reserved; narrow with session=, user= or kinds= instead")
    return flt


def any_if_none(session: str | None) -> Any:
    """``session=None`` in recall, forget and context means every session."""
    return ANY_SESSION if session is None else session


def check_scope(session: Any) -> str | None:
    """The ``session`` of recall, forget or context: a name, or None for every session
    (:data:`~vxmem.core.sentinels.ANY_SESSION`, the explicit spelling, is made None)."""
    return None if session is ANY_SESSION else check_session(session)


def check_caller_metadata(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict, not {type(metadata).__name__}")
    check_json(metadata)
    reserved = [k for k in metadata if k.startswith(RESERVED_PREFIX)]
    if reserved:
        raise ValueError(f"metadata key {reserved[0]!r} is reserved: keys starting with "
                         f"{RESERVED_PREFIX!r} belong to vxmem")
    return dict(json_copy(metadata))
