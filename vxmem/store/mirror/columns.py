"""A document's metadata as the mirror's columns, and the metadata themselves by position.

The reserved keys a memory writes (kind, time, expiry, supersession, turn, session) become
numpy column values, read one document at a time (:func:`columns_of`, as writes come) or
a whole database at once (:func:`columns_of_all`, with the same values: :func:`fill` fills
an empty mirror so as an open reads the rows). Any other key a filter hits becomes a
:class:`ValueColumn`. :class:`Metas` holds the metadata dicts, parsing those a mirror file
holds only as they are read.
"""

from __future__ import annotations

import functools
import json
import math
from collections import defaultdict
from typing import Any, NamedTuple

import numpy as np

from ...core.keys import (
    K_EXPIRES,
    K_FEEDBACK,
    K_FEEDBACK_FOLDED,
    K_KIND,
    K_SESSION,
    K_SUPERSEDED_AT,
    K_SUPERSEDED_BY,
    K_TS,
    K_TURN,
    K_USER,
    KIND_CODES,
    NO_KIND,
    TS_RANGE,
)
from ..sqlite.jsonio import dumps, loads, loads_plain


def columns_of(meta: dict[str, Any]) -> tuple[int, float, float, bool, float, str | None]:
    """A document's reserved columns from its metadata: (kind code, ts, expires, superseded,
    turn, session key or None for no session)."""
    kind = meta.get(K_KIND)
    code = KIND_CODES.get(kind, NO_KIND) if isinstance(kind, str) else NO_KIND
    ts = _number(meta.get(K_TS), math.nan)
    if not TS_RANGE[0] <= ts <= TS_RANGE[1]:  # a time the clock can turn into a date; NaN fails
        code = NO_KIND  # a kind without a usable time is a plain document, not a memory
    turn = meta.get(K_TURN)
    return (code, ts, _number(meta.get(K_EXPIRES), math.inf), meta.get(K_SUPERSEDED_BY) is not None,
            float(turn) if isinstance(turn, int) and not isinstance(turn, bool) else math.nan,
            meta_session_key(meta) if code != NO_KIND or K_SESSION in meta else None)


class UserSession(NamedTuple):
    """One user's session: what a session argument names once a call names a user too.

    A session belongs to its user: two users who name a session alike have two sessions
    (two transcripts, two turn counters, two sets of facts a contradiction may replace).
    """

    user: str
    session: str | None


def _key(session: Any, user: Any) -> str:
    return json.dumps(session) if user is None else json.dumps([user, session])


_str_key = functools.lru_cache(maxsize=4096)(_key)  # a remember() names a session it named before


def session_key(session: Any, user: Any = None) -> str:
    """A session's key in the mirror: its JSON text, or for a user's session (``user``, or a
    :class:`UserSession`) the JSON list ``[user, session]``, which no session's text can be
    (a session is a str or None). Cached for a str or None."""
    if type(session) is UserSession:
        user, session = session
    if session is None or type(session) is str:
        return _str_key(session, user if type(user) is str else None)
    return _key(session, user if type(user) is str else None)


def meta_session_key(meta: dict[str, Any]) -> str:
    """The key of the session a document's metadata name (with its user's, when it has one)."""
    return session_key(meta.get(K_SESSION), meta.get(K_USER))


def session_of_key(key: str) -> Any:
    """The session (``remember(session=...)``'s value) of the session whose key is ``key``."""
    value = json.loads(key)
    return value[1] if type(value) is list else value


def codes_named(keys: list[str], session: Any) -> list[int]:
    """The codes (indexes into ``keys``, by code) of every session named ``session``, whoever's:
    a filter on the session's name matches each user's session of that name and the one of no user."""
    key = session_key(session)
    return [c for c, k in enumerate(keys) if k == key or (k.startswith("[") and session_key(session_of_key(k)) == key)]


def session_name(session: Any) -> Any:
    """The session as its caller named it (a :class:`UserSession`'s name, else ``session``)."""
    return session.session if type(session) is UserSession else session


def in_session(session: Any, user: str | None) -> Any:
    """The session argument a store read takes for ``user``'s ``session`` (the session itself
    for no user; a :class:`UserSession` otherwise; ``ANY_SESSION`` and friends unchanged)."""
    if user is None or not (session is None or type(session) is str):
        return session
    return UserSession(user, session)


def _numbers(values: list[Any], default: float, ints_only: bool = False) -> np.ndarray:
    """``_number`` of each value (``float(v)`` of an int only, with ``ints_only``) as one
    float64 column; a list of plain numbers and Nones (the usual one) converts in one go."""
    kinds = set(map(type, values))
    if kinds <= ({int, type(None)} if ints_only else {int, float, type(None)}):
        return np.array([default if v is None else v for v in values], dtype=np.float64)
    if ints_only:
        return np.array([float(v) if isinstance(v, int) and not isinstance(v, bool) else default for v in values],
                        dtype=np.float64)
    return np.array([_number(v, default) for v in values], dtype=np.float64)


def columns_of_all(metas: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bool],
                                                         np.ndarray, list[str | None]]:
    """:func:`columns_of` of every document, column by column (the same values)."""
    kinds = [m.get(K_KIND) for m in metas]
    code = np.array([KIND_CODES.get(k, NO_KIND) if isinstance(k, str) else NO_KIND for k in kinds], dtype=np.int8)
    ts = _numbers([m.get(K_TS) for m in metas], math.nan)
    with np.errstate(invalid="ignore"):
        code[~((ts >= TS_RANGE[0]) & (ts <= TS_RANGE[1]))] = NO_KIND  # NaN fails both
    expires = _numbers([m.get(K_EXPIRES) for m in metas], math.inf)
    superseded = [m.get(K_SUPERSEDED_BY) is not None for m in metas]
    turn = _numbers([m.get(K_TURN) for m in metas], math.nan, ints_only=True)
    keys: dict[Any, str] = {}  # a session's key, made once per distinct (session, user) of str

    def key(session: Any, user: Any) -> str:
        if type(session) is not str or not (user is None or type(user) is str):
            return session_key(session, user)
        got = keys.get((session, user))
        if got is None:
            got = keys[(session, user)] = _key(session, user)
        return got

    sessions = [key(m.get(K_SESSION), m.get(K_USER)) if c != NO_KIND or K_SESSION in m else None
                for m, c in zip(metas, code.tolist())]
    return code, ts, expires, superseded, turn, sessions


def superseded_at(meta: dict[str, Any], superseded: bool) -> float:
    """When a superseded document was superseded (-inf for a superseded one with no usable
    time, so it counts as superseded at every moment); inf for a live one."""
    return _number(meta.get(K_SUPERSEDED_AT), -np.inf) if superseded else np.inf


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _number(value: Any, default: float) -> float:
    """A metadata value as a float column entry (``default`` for anything not a real number)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _value_key(value: Any) -> Any:
    """``value`` as a dict key that is equal exactly when the values are JSON-equal (True is
    not 1, 1 is 1.0); None for a list or an object, which no filter value equals."""
    if isinstance(value, bool):
        return ("bool", value)
    if value is None or isinstance(value, (str, int, float)):
        return ("value", value)
    return None


class ValueColumn:
    """One metadata key as a column of small codes, one per distinct value, so a filter on it
    is one ``np.isin`` over the selected positions instead of a read of every dict."""

    def __init__(self, key: str, size: int, live: list[tuple[int, dict[str, Any]]]):
        """``key``'s column over ``size`` positions, from the ``(position, metadata)`` of the
        live documents."""
        self.key = key
        self.table: dict[Any, int] = {}
        self.codes = np.full(max(size, 1), -1, dtype=np.int64)
        for p, meta in live:
            self.codes[p] = self.code(meta.get(key))

    def code(self, value: Any) -> int:
        k = _value_key(value)
        return -1 if k is None else self.table.setdefault(k, len(self.table))

    def set(self, p: int, meta: dict[str, Any] | None) -> None:
        if p >= len(self.codes):
            self.codes = np.concatenate([self.codes, np.full(max(p + 1, len(self.codes)), -1, dtype=np.int64)])
        self.codes[p] = -1 if meta is None else self.code(meta.get(self.key))

    def matching(self, pos: np.ndarray, values: list[Any]) -> np.ndarray:
        """A mask over ``pos``: whose value equals one of ``values``."""
        codes = self.codes[pos]
        mask = np.zeros(pos.size, dtype=bool)
        for k in map(_value_key, values):  # a few compares beat np.isin's set-up on a handful of values
            if k in self.table:
                mask |= codes == self.table[k]
        return mask


VALUE_COLUMNS = 16  # the most metadata keys kept as columns at once (the least recently made go first)


def latest_feedback(meta: dict[str, Any]) -> float:
    """The time of the newest feedback event recorded in ``meta`` (-inf for none)."""
    events = meta.get(K_FEEDBACK)
    times = [_number(e[1], -np.inf) for e in events if isinstance(e, (list, tuple)) and len(e) == 2] \
        if isinstance(events, list) else []
    folded = meta.get(K_FEEDBACK_FOLDED)
    if isinstance(folded, dict):
        times.append(_number(folded.get("ts"), -np.inf))
    return max(times, default=-np.inf)



class Metas:
    """The metadata dicts by position. Those a mirror file holds stay its UTF-8 JSON bytes
    until first read (an open parses none of them); each is parsed once, then kept."""

    __slots__ = ("_dicts", "_raw", "_at", "_long")

    def __init__(self, dicts: list[dict[str, Any] | None] | None = None):
        self._dicts: list[dict[str, Any] | None] = [] if dicts is None else dicts
        self._raw: memoryview | None = None
        self._at: list[int] = []
        self._long: frozenset[int] = frozenset()

    @classmethod
    def of_bytes(cls, raw: memoryview, at: list[int], long: frozenset[int] = frozenset()) -> Metas:
        """The metadata whose JSON texts are ``raw[at[p]:at[p + 1]]`` (UTF-8), still to be
        parsed; those at ``long`` hold a run of 19 digits, which only json reads exactly."""
        got = cls([None] * (len(at) - 1))
        got._raw, got._at, got._long = raw, at, long
        return got

    def __len__(self) -> int:
        return len(self._dicts)

    def __getitem__(self, p: int) -> dict[str, Any]:
        got = self._dicts[p]
        if got is None:
            assert self._raw is not None
            data = self._raw[self._at[p]:self._at[p + 1]]
            got = loads(bytes(data).decode()) if p in self._long else loads_plain(data)
            if not isinstance(got, dict):
                raise ValueError(f"the metadata at position {p} is not a JSON object")
            self._dicts[p] = got
        return got

    def __setitem__(self, p: int, meta: dict[str, Any]) -> None:
        self._dicts[p] = meta

    def append(self, meta: dict[str, Any]) -> None:
        self._dicts.append(meta)

    def text(self, p: int) -> str:
        """The stored JSON text of the metadata at ``p`` (made again if it was parsed)."""
        got = self._dicts[p]
        if got is not None or self._raw is None:
            return dumps(self[p])
        return bytes(self._raw[self._at[p]:self._at[p + 1]]).decode()


def session_per_user(meta: dict[str, Any]) -> dict[str, Any] | None:
    """A document's metadata as a session belonging to its user has them, or None if they are
    unchanged: before sessions belonged to users, the servers kept a user's session ``s`` as
    the session ``user/s`` (of that user), which is now the user's session ``s``."""
    user, session = meta.get(K_USER), meta.get(K_SESSION)
    if type(user) is str and type(session) is str and session.startswith(user + "/"):
        return {**meta, K_SESSION: session[len(user) + 1:]}
    return None


class SessionMoves:
    """What sessions belonging to their users make of documents written before: each user's
    memory moves to a session of the user's own (:func:`session_per_user`), and each turn
    counter a session name had goes on as the counter of every user's session it numbered,
    from where it stood (so no turn number is given twice). The file's migration, the
    database's and a restore of an older export all move documents through one of these."""

    def __init__(self) -> None:
        self.moved: dict[str, set[str]] = defaultdict(set)  # a session key before -> the users' sessions' keys

    def take(self, meta: Any) -> dict[str, Any] | None:
        """The metadata a user's memory keeps, its session its user's own (``meta`` itself when
        unchanged); None for a document that is no user's memory, which nothing moves."""
        if not isinstance(meta, dict) or type(meta.get(K_USER)) is not str or (
                K_SESSION not in meta and K_KIND not in meta):
            return None
        new = session_per_user(meta) or meta
        self.moved[session_key(meta.get(K_SESSION))].add(meta_session_key(new))
        return new

    def old_counters(self) -> list[str]:
        """The turn counters of the session names users' memories moved from."""
        return ["turn:" + key for key in self.moved]

    def counters(self, name: str) -> list[str]:
        """The turn counters that go on from the counter ``name`` (none for another counter)."""
        return ["turn:" + key for key in sorted(self.moved.get(name[5:], ()))] if name.startswith("turn:") else []
