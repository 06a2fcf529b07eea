"""The collection's argument checks: ids, JSON metadata, filters, search modes.

Built from the shared helpers in :mod:`vxmem.core.checks` (``TypeError`` for a wrong type,
``ValueError`` for a bad value, the argument named). Every verb checks all of its
arguments before it takes the lock, so bad input never changes anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.checks import check_choice, check_int, check_number, check_positive, check_text
from ..core.keys import KINDS, OUTCOMES, RESERVED_PREFIX, RESERVED_TYPES, TS_RANGE, TURN_LIMIT
from ..ranking.blend import BLEND_BOUNDS

SEARCH_MODES = ("dense", "lexical", "hybrid")
MAX_JSON_DEPTH = 32
TOKEN_LIMIT = 2**40  # a text's token count stays below this, so sums over a collection fit an int64

FilterValues = dict[str, list[Any]]  # a checked filter: key -> the values any of which matches


def check_id(value: Any, name: str = "id") -> str:
    """A non-empty ``str`` id."""
    check_text(value, name)
    if not value:
        raise ValueError(f"{name} must not be empty")
    return value


def check_ids(ids: Any, name: str = "ids") -> list[str]:
    """One id or a list (tuple, set) of them, as a list."""
    if isinstance(ids, str):
        return [check_id(ids, name)]
    if not isinstance(ids, (Sequence, set, frozenset)):
        raise TypeError(f"{name} must be a str or a list of str, not {type(ids).__name__}")
    return [check_id(i, f"{name}[]") for i in ids]


def check_json(value: Any, name: str = "metadata", _depth: int = 0) -> None:
    """Refuse (TypeError / ValueError) anything that does not round-trip through JSON unchanged."""
    if _depth > MAX_JSON_DEPTH:
        raise ValueError(f"{name} is nested more than {MAX_JSON_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, str):
        check_text(value, name)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{name} holds a non-finite float ({value!r}); JSON has no NaN or infinity")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_json(v, f"{name}[{i}]", _depth + 1)
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{name} keys must be str, got {type(k).__name__} {k!r}")
            check_text(k, f"{name} key")
            check_json(v, f"{name}[{k!r}]", _depth + 1)
        return
    raise TypeError(f"{name} must hold only JSON values (str, int, float, bool, None, list, dict), "
                    f"not {type(value).__name__}")


def json_copy(value: Any) -> Any:
    """A deep copy through JSON: what the database will hold, shared with no caller."""
    return json.loads(json.dumps(value))


def check_metadata(metadata: Any, n: int) -> list[dict[str, Any]]:
    """``add()``'s metadata: None, one dict for every text, or one dict (or None) per text."""
    if metadata is None:
        return [{} for _ in range(n)]
    if isinstance(metadata, Mapping):
        check_json(metadata)
        check_reserved(metadata)
        return [json_copy(metadata) for _ in range(n)]
    if not isinstance(metadata, Sequence) or isinstance(metadata, str):
        raise TypeError("metadata must be a dict or a list of dicts")
    if len(metadata) != n:
        raise ValueError(f"got {len(metadata)} metadata dicts for {n} texts")
    out = []
    for i, m in enumerate(metadata):
        if m is None:
            m = {}
        if not isinstance(m, Mapping):
            raise TypeError(f"metadata[{i}] must be a dict, not {type(m).__name__}")
        check_json(m, f"metadata[{i}]")
        check_reserved(m, f"metadata[{i}]")
        out.append(json_copy(m))
    return out


def _check_str_list(value: Any, name: str) -> None:
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list of str, not {type(value).__name__}")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise TypeError(f"{name}[{i}] must be a str, not {type(v).__name__}")


def _check_reserved_value(kind: str, value: Any, name: str) -> None:
    if kind == "kind":
        check_choice(value, name, KINDS)
    elif kind == "str":
        check_text(value, name)
    elif kind == "str|None":
        if value is not None:
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
    elif kind == "turn":
        check_int(value, name, minimum=0, below=TURN_LIMIT)
    elif kind == "time":
        check_number(value, name, *TS_RANGE)
    elif kind == "number":
        check_number(value, name)
    elif kind == "list[str]":
        _check_str_list(value, name)
    elif kind == "dict":
        if not isinstance(value, Mapping):
            raise TypeError(f"{name} must be a dict, not {type(value).__name__}")
    elif kind == "feedback":
        if not isinstance(value, list):
            raise TypeError(f"{name} must be a list of [outcome, time] pairs, not {type(value).__name__}")
        for i, ev in enumerate(value):
            if not isinstance(ev, list) or len(ev) != 2:
                raise TypeError(f"{name}[{i}] must be an [outcome, time] pair")
            check_choice(ev[0], f"{name}[{i}] outcome", OUTCOMES)
            check_number(ev[1], f"{name}[{i}] time", *TS_RANGE)
    elif kind == "folded":
        _check_folded(value, name)
    else:  # pragma: no cover - a type name keys.RESERVED_TYPES uses but this function does not know
        raise AssertionError(kind)


def _check_folded(value: Any, name: str) -> None:
    """Folded feedback: ``sum``, ``ts``, ``half_life_days``, ``events`` and ``log``, every
    folded event (as many as ``events``; a fold written without a log stays valid)."""
    keys = {"sum", "ts", "half_life_days", "events"}
    if not isinstance(value, Mapping) or not keys <= set(value) <= keys | {"log"}:
        raise TypeError(f"{name} must be a dict with keys sum, ts, half_life_days, events (and log)")
    check_number(value["sum"], f"{name}['sum']")
    check_number(value["ts"], f"{name}['ts']", *TS_RANGE)
    check_positive(value["half_life_days"], f"{name}['half_life_days']")
    check_int(value["events"], f"{name}['events']", minimum=1)
    if "log" in value:
        _check_reserved_value("feedback", value["log"], f"{name}['log']")
        if len(value["log"]) != value["events"]:
            raise ValueError(f"{name}['log'] must hold the {value['events']} events folded")


def check_reserved(meta: Mapping[str, Any], name: str = "metadata") -> None:
    """Refuse reserved ``_vx_*`` keys that are unknown or hold the wrong type of value.

    The types are :data:`vxmem.core.keys.RESERVED_TYPES`: a session is a str or None, a turn an
    int, a time a finite number, and so on. A plain document may carry them (a memory
    written through the collection), but never one the memory layer cannot read back.
    """
    for k, v in meta.items():
        if not k.startswith(RESERVED_PREFIX):
            continue
        kind = RESERVED_TYPES.get(k)
        if kind is None:
            raise ValueError(f"{name} key {k!r} is reserved: keys starting with {RESERVED_PREFIX!r} belong to "
                             f"vxmem, which knows {', '.join(sorted(RESERVED_TYPES))}")
        _check_reserved_value(kind, v, f"{name}[{k!r}]")


def check_token_count(value: Any, text: str) -> int:
    """What a token counter returned for ``text``: an int (not a bool) in [0, 2**40)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"token_counter must return an int, got {type(value).__name__} {value!r} "
                        f"for {text[:40]!r}")
    if not 0 <= value < TOKEN_LIMIT:
        raise ValueError(f"token_counter must return an int in [0, 2**40), got {value!r} for {text[:40]!r}")
    return int(value)


def check_filter(filter: Any) -> FilterValues | None:
    """``{key: value or [values]}`` with JSON scalar values, as key -> list of values."""
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise TypeError(f"filter must be a dict of metadata key -> value, not {type(filter).__name__}")
    out = {}
    for k, v in filter.items():
        if not isinstance(k, str):
            raise TypeError(f"filter keys must be non-empty str, got {k!r}")
        if not k:
            raise ValueError("filter keys must be non-empty str, got ''")
        values = list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v]
        for x in values:
            if not (x is None or isinstance(x, (str, int, float, bool))):
                raise TypeError(f"filter value for {k!r} must be a JSON scalar or a list of them, "
                                f"not {type(x).__name__}")
        out[k] = values
    return out


def check_mode(mode: Any) -> str:
    """A search mode; None means dense."""
    return "dense" if mode is None else check_choice(mode, "mode", SEARCH_MODES)


def check_hybrid_weight(weight: Any) -> float:
    """The dense share of hybrid relevance (``fuse_relevance``'s weight), in [0, 1]: the
    bounds a :class:`~vxmem.ranking.blend.Blend` checks it against."""
    low, low_open, high, high_open = BLEND_BOUNDS["hybrid_weight"]
    return check_number(weight, "hybrid_weight", low, high, low_open=low_open, high_open=high_open)
