"""The in-memory mirror of the database: columns by position, filters, and selection.

The process keeps a copy of every live document: a matrix of the vectors (float32, or
float16 at half the memory: see :data:`VECTOR_DTYPES`), the ids, texts and metadata
dicts, and numpy columns for the reserved keys that filters hit most (kind, session,
time, expiry, superseded, turn). A filtered search is then an exact scan of just the
selected rows, and the memory layer selects its candidates with a few vectorised
compares instead of reading JSON.

Positions are append-only within a process: a deleted document leaves a hole
(``alive`` False) until :meth:`Mirror.compacted` drops the holes. Positions are therefore
valid only while the collection's lock is held (see ``Engine.locked``).
"""

from __future__ import annotations

import functools
import json
import math
from types import EllipsisType
from typing import Any

import numpy as np
import numpy.ma  # noqa: F401 - np.unique imports it at its first call (7 ms): with vxmem, not in a first recall

from ..core.keys import (
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
from .checks import FilterValues
from .jsonio import dumps, loads, loads_plain
from .results import Result

# ``session=ANY_SESSION`` selects every session (None is a session of its own: the one
# with no name).
ANY_SESSION: EllipsisType = ...
SessionArg = Any  # a session name, None, or ANY_SESSION

_JSON_SCALARS = (str, int, float, bool, type(None))
_FILL = {"kind": NO_KIND, "session": -1, "user": -1, "ts": np.nan, "expires": np.inf, "superseded_at": np.inf,
         "turn": np.nan}
_COLUMNS = ("heap", "slot", "rowid", "alive", "kind", "session", "user", "ts", "expires", "superseded",
            "superseded_at", "tokens", "turn", "feedback")
_NO_POSITIONS = np.zeros(0, dtype=np.int64)
_UNSEEN = object()


# The dtypes the mirror can hold its vectors in (``vector_dtype=``). SQLite always keeps
# float32: float16 is a copy at half the memory whose dot products are off by about 1e-4
# (it rounds each component to 11 bits); a float32 open of a float16 mirror file reads the rows.
VECTOR_DTYPES: dict[str, np.dtype] = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}


def check_vector_dtype(value: Any) -> np.dtype:
    """The numpy dtype of ``vector_dtype=`` (a name of :data:`VECTOR_DTYPES`)."""
    dtype = VECTOR_DTYPES.get(value) if isinstance(value, str) else None
    if dtype is None:
        raise ValueError(f"vector_dtype must be one of {', '.join(map(repr, VECTOR_DTYPES))}, not {value!r}")
    return dtype


_numkong: Any = None


def float16_kernels() -> Any:
    """NumKong, whose kernels scan float16 rows (imported once: a float32 process never
    loads it); a clear ``ImportError`` when it is missing."""
    global _numkong
    if _numkong is None:
        try:
            import numkong
        except ImportError as exc:
            raise ImportError(f"vector_dtype='float16' needs NumKong: pip install 'numkong>=7.5' ({exc})") from None
        _numkong = numkong
    return _numkong


def rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products on this thread (float32), each row's the same whatever the batch.

    Not ``@``: BLAS runs a matrix-vector product of a few thousand rows on worker threads
    that keep spinning afterwards, and on a busy machine the whole recall then waits for a
    scheduler time slice (measured with one core loaded: 8 ms per recall instead of 0.4).
    float16 rows go to NumKong's kernels (usearch's own SIMD library, installed with it;
    numpy has no float16 arithmetic of its own and converts every component, 15-30x
    slower), with ``b`` rounded to float16 too. (Not the older SimSIMD package: once usearch
    has loaded NumKong, SimSIMD's own symbols resolve to NumKong's and it refuses float16.)
    """
    if a.dtype == np.float16:
        if a.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        # float64 out, then float32: NumKong's float32 out is 2.5-4x slower (2.2 against 0.51 ms for 20,000 rows)
        dots = float16_kernels().cdist(np.asarray(b, dtype=np.float16)[None], a, metric="dot")
        return np.asarray(dots)[0].astype(np.float32)
    vecdot = getattr(np, "vecdot", None)
    return vecdot(a, b) if vecdot is not None else np.einsum("ij,j->i", a, b)


def spread_sample(n: int, spread: int, newest: int) -> np.ndarray:
    """Indices into ``n`` items, ascending and each once: up to ``spread`` spread evenly over
    them, and the last ``newest`` (what the checks of a saved file compare)."""
    picks = set(np.linspace(0, n - 1, min(spread, n)).astype(np.int64).tolist()) if n else set()
    return np.array(sorted(picks | set(range(max(0, n - newest), n))), dtype=np.int64)


def _columns_of(meta: dict[str, Any]) -> tuple[int, float, float, bool, float, str | None]:
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
            session_key(meta.get(K_SESSION)) if code != NO_KIND or K_SESSION in meta else None)


_str_key = functools.lru_cache(maxsize=4096)(json.dumps)  # a remember() names a session it named before


def session_key(session: Any) -> str:
    """A session's key in the mirror: its JSON text (cached for a str or None)."""
    return _str_key(session) if session is None or type(session) is str else json.dumps(session)


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


def _columns_of_all(metas: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bool],
                                                          np.ndarray, list[str | None]]:
    """:func:`_columns_of` of every document, column by column (the same values)."""
    kinds = [m.get(K_KIND) for m in metas]
    code = np.array([KIND_CODES.get(k, NO_KIND) if isinstance(k, str) else NO_KIND for k in kinds], dtype=np.int8)
    ts = _numbers([m.get(K_TS) for m in metas], math.nan)
    with np.errstate(invalid="ignore"):
        code[~((ts >= TS_RANGE[0]) & (ts <= TS_RANGE[1]))] = NO_KIND  # NaN fails both
    expires = _numbers([m.get(K_EXPIRES) for m in metas], math.inf)
    superseded = [m.get(K_SUPERSEDED_BY) is not None for m in metas]
    turn = _numbers([m.get(K_TURN) for m in metas], math.nan, ints_only=True)
    keys: dict[Any, str] = {}  # a session's key, made once per distinct str

    def key(session: Any) -> str:
        if type(session) is not str:
            return json.dumps(session)
        got = keys.get(session)
        if got is None:
            got = keys[session] = json.dumps(session)
        return got

    sessions = [key(m.get(K_SESSION)) if c != NO_KIND or K_SESSION in m else None
                for m, c in zip(metas, code.tolist())]
    return code, ts, expires, superseded, turn, sessions


def _superseded_at(meta: dict[str, Any], superseded: bool) -> float:
    """When a superseded document was superseded (-inf for a superseded one with no usable
    time, so it counts as superseded at every moment); inf for a live one."""
    return _number(meta.get(K_SUPERSEDED_AT), -np.inf) if superseded else np.inf


def _same(a: Any, b: Any) -> bool:
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

    def __init__(self, key: str, mirror: Mirror):
        self.key = key
        self.table: dict[Any, int] = {}
        self.codes = np.full(max(len(mirror.rowid), 1), -1, dtype=np.int64)
        for p in mirror.live_positions().tolist():
            self.codes[p] = self.code(mirror.metas[p].get(key))

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


def _latest_feedback(meta: dict[str, Any]) -> float:
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


VIEW_MIN_ROWS = 64  # a run of a session's rows this long, together in the heap, is scanned in place


class SessionBlock:
    """A session's positions, ascending, and their vectors laid out together for a scan.

    Where the session's rows lie together in the mirror's heap (a mirror file keeps each
    session's rows together), runs of :data:`VIEW_MIN_ROWS` or more are views of the heap:
    no copy, and nothing to read at the session's first recall but the run's own pages.
    The other rows are gathered into copies, the last of which grows as rows come.
    """

    def __init__(self, pos: np.ndarray, heap: np.ndarray, slot: np.ndarray):
        """The block of the positions ``pos`` (ascending), whose vectors are the rows
        ``slot[pos]`` of ``heap``."""
        self.n = n = len(pos)
        self._pos = np.zeros(max(16, 2 * n), dtype=np.int64)
        self._pos[:n] = pos
        rows = slot[pos]
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        starts, ends = np.r_[0, breaks], np.r_[breaks, n]
        self._fixed: list[np.ndarray] = []  # views and copies of the first rows, in order
        self.views = 0  # how many of them are views of the heap
        short: list[np.ndarray] = []  # the rows of short runs not yet gathered
        for a, b in zip(starts.tolist(), ends.tolist()):
            if b - a >= VIEW_MIN_ROWS:
                if short:
                    self._fixed.append(heap[np.concatenate(short)])
                    short = []
                self._fixed.append(heap[rows[a]:rows[a] + (b - a)])
                self.views += 1
            elif b > a:
                short.append(rows[a:b])
        tail = np.concatenate(short) if short else _NO_POSITIONS
        self._tail_n = tail.size
        self._tail = np.empty((max(16, 2 * tail.size), heap.shape[1]), dtype=heap.dtype)  # written before read
        np.take(heap, tail, axis=0, out=self._tail[: tail.size])

    @property
    def positions(self) -> np.ndarray:
        """The session's positions, ascending."""
        return self._pos[: self.n]

    def dots(self, q: np.ndarray) -> np.ndarray:
        """Each row's dot product with ``q``, in the order of :attr:`positions`."""
        tail = rowdot(self._tail[: self._tail_n], q)
        if not self._fixed:
            return tail
        return np.concatenate([rowdot(part, q) for part in self._fixed] + [tail])

    def append(self, p: int, vec: np.ndarray) -> bool:
        """Add a row at the end; False when ``p`` would break the order (rebuild instead)."""
        if self.n and p <= self._pos[self.n - 1]:
            return False
        if self.n == len(self._pos):
            self._pos = np.concatenate([self._pos, np.zeros_like(self._pos)])
        if self._tail_n == len(self._tail):
            self._tail = np.concatenate([self._tail, np.zeros_like(self._tail)])
        self._pos[self.n] = p
        self._tail[self._tail_n] = vec
        self.n += 1
        self._tail_n += 1
        return True


class Mirror:
    """Every live document, by position.

    Columns (numpy arrays, read ``[: n]``): ``slot`` the row of each position's unit vector
    in ``heap`` (n, dim) of ``dtype`` (float32 or float16) (a permutation of the positions: a
    mirror file lays each session's rows out together; read vectors through :meth:`vector` and
    :meth:`vectors`), ``rowid`` the
    SQLite rowid, ``alive``, ``kind`` (a :data:`~vxmem.core.keys.KIND_CODES` code, ``NO_KIND``
    for a plain document), ``session`` (a code, -1 for none), ``user`` (a code of
    ``user_codes``, -1 for none), ``ts`` and ``expires``
    (epoch seconds; NaN and inf when absent), ``superseded`` and ``superseded_at`` (inf
    when not superseded, -inf when superseded at no recorded time), ``tokens`` (the token
    counter's count of the text), ``turn`` (NaN for none), ``feedback`` (whether the
    metadata holds feedback events).
    Lists by position: ``ids``, ``texts``, ``metas`` (the stored metadata: read, never
    change them; :meth:`result` hands out copies). Maps: ``pos_of_id``, ``pos_of_rowid``
    and the array ``rowid_pos`` (rowid -> position, -1 for none). ``n_alive`` counts the
    live documents. ``latest`` bounds the times live memories record (their creation, their
    supersession, their feedback events) from above: a read as of a moment at or after it
    sees the mirror as it is, so it skips the as-of checks.
    """

    def __init__(self, dim: int | None, dtype: np.dtype | type = np.float32):
        self.dim = dim
        self.n = 0
        cap = 64
        self.heap = np.zeros((cap, dim or 1), dtype=dtype)
        self.slot = np.zeros(cap, dtype=np.int64)
        self.rowid = np.zeros(cap, dtype=np.int64)
        self.alive = np.zeros(cap, dtype=bool)
        self.kind = np.full(cap, NO_KIND, dtype=np.int8)
        self.session = np.full(cap, -1, dtype=np.int64)
        self.user = np.full(cap, -1, dtype=np.int64)
        self.ts = np.full(cap, np.nan)
        self.expires = np.full(cap, np.inf)
        self.superseded = np.zeros(cap, dtype=bool)
        self.superseded_at = np.full(cap, np.inf)
        self.tokens = np.zeros(cap, dtype=np.int64)
        self.turn = np.full(cap, np.nan)
        self.feedback = np.zeros(cap, dtype=bool)
        self.rowid_pos = np.full(64, -1, dtype=np.int64)
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.metas = Metas()
        self.pos_of_id: dict[str, int] = {}
        self.pos_of_rowid: dict[int, int] = {}
        self.session_codes: dict[str, int] = {}
        self.session_keys: list[str] = []  # by code: the inverse of session_codes
        self._session_values: dict[int, Any] = {}  # code -> the session's JSON value, made on first use
        self._value_columns: dict[str, ValueColumn] = {}
        self.user_codes: dict[str, int] = {}
        self._session_pos: dict[int, list[int]] = {}
        self._blocks: dict[int, SessionBlock] = {}
        self._live: np.ndarray | None = None  # live_positions(), until a document comes or goes
        self.n_alive = 0
        self.latest = -np.inf

    # ------------------------------------------------------------------ growing and changing

    def reserve(self, need: int) -> None:
        """Room for ``need`` positions without growing again."""
        cap = len(self.rowid)
        if need <= cap:
            return
        new = max(need, cap * 2)
        for name in _COLUMNS:
            old = getattr(self, name)
            fill = _FILL.get(name, 0)
            # np.zeros maps fresh zero pages that count towards RSS only once written, so
            # the headroom of the vector matrix (the big column) costs no memory until used.
            shape = (new,) + old.shape[1:]
            arr = np.zeros(shape, dtype=old.dtype) if fill == 0 else np.full(shape, fill, dtype=old.dtype)
            arr[: self.n] = old[: self.n]
            setattr(self, name, arr)
        self._blocks.clear()  # their views would keep the old heap alive

    @property
    def dtype(self) -> np.dtype:
        """The vectors' dtype (float32 or float16): the heap's."""
        return self.heap.dtype

    def set_dim(self, dim: int) -> None:
        """Fix the vector dimension (an empty mirror's, at the first vector)."""
        self.dim = dim
        self.heap = np.zeros((len(self.rowid), dim), dtype=self.dtype)

    def append(self, rowid: int, id: str, text: str, meta: dict[str, Any], vec: np.ndarray, tokens: int) -> None:
        """Add a committed document at the next position."""
        p = self.n
        self.reserve(p + 1)
        self.n = p + 1
        self.heap[p] = vec  # every position has a row of its own, so the next row is free
        self.slot[p] = p
        self.rowid[p] = rowid
        self.alive[p] = True
        self._live = None
        self.ids.append(id)
        self.texts.append(text)
        self.metas.append(meta)
        self.tokens[p] = tokens
        self.pos_of_id[id] = p
        self.pos_of_rowid[rowid] = p
        if rowid >= len(self.rowid_pos):
            grown = np.full(max(rowid + 1, 2 * len(self.rowid_pos)), -1, dtype=np.int64)
            grown[: len(self.rowid_pos)] = self.rowid_pos
            self.rowid_pos = grown
        self.rowid_pos[rowid] = p
        self.n_alive += 1
        self._set_columns(p, meta)

    def _set_columns(self, p: int, meta: dict[str, Any]) -> None:
        code, self.ts[p], self.expires[p], self.superseded[p], self.turn[p], key = _columns_of(meta)
        self.kind[p] = code
        self.feedback[p] = bool(meta.get(K_FEEDBACK))
        self.superseded_at[p] = _superseded_at(meta, self.superseded[p])
        self._note_times(p, meta)
        for col in self._value_columns.values():
            col.set(p, meta)
        self.user[p] = self._user_code(meta.get(K_USER))
        old = int(self.session[p])
        new = -1 if key is None else self._code_of_key(key)
        if old != new:
            if old >= 0:
                self._session_pos[old].remove(p)
                self._blocks.pop(old, None)
            if new >= 0:
                self._session_pos.setdefault(new, []).append(p)
                blk = self._blocks.get(new)
                if blk is not None and not blk.append(p, self.vector(p)):
                    del self._blocks[new]
            self.session[p] = new

    def _note_times(self, p: int, meta: dict[str, Any]) -> None:
        """Raise :attr:`latest` to the times this memory's metadata records."""
        if self.kind[p] == NO_KIND:
            return
        sup = self.superseded_at[p]
        latest = max(self.latest, float(self.ts[p]), float(sup) if np.isfinite(sup) else -np.inf)
        if K_FEEDBACK in meta or K_FEEDBACK_FOLDED in meta:
            latest = max(latest, _latest_feedback(meta))
        self.latest = latest

    def _user_code(self, user: Any) -> int:
        """The code of ``user`` (a str; -1 for no user), made on first sight."""
        return self.user_codes.setdefault(user, len(self.user_codes)) if isinstance(user, str) else -1

    def _code_of_key(self, key: str) -> int:
        code = self.session_codes.get(key)
        if code is None:
            code = len(self.session_codes)
            self.session_codes[key] = code
            self.session_keys.append(key)
        return code

    def fill(self, rowids: list[int], ids: list[str], texts: list[str], metas: list[dict[str, Any]],
             vectors: list[bytes]) -> None:
        """Fill an empty mirror with committed documents, as :meth:`append` would one by one
        but column by column (opening a large database is this loop), with room to double.
        ``vectors`` are the float32 blobs, each checked to hold ``dim`` values."""
        assert self.n == 0 and self.dim is not None
        n = len(ids)
        self.reserve(2 * n)
        if n == 0:
            return
        width = 4 * self.dim
        step = 4096  # joined a chunk at a time: no second copy of every vector at once
        for a in range(0, n, step):
            b = min(a + step, n)
            if set(map(len, vectors[a:b])) != {width}:  # some blob is not dim floats long: name the first
                i = next(i for i in range(a, b) if len(vectors[i]) != width)
                raise ValueError(f"document {ids[i]!r} has a {len(vectors[i]) // 4}-d vector, expected {self.dim}")
            self.heap[a:b] = np.frombuffer(b"".join(vectors[a:b]), dtype=np.float32).reshape(b - a, self.dim)
        self.slot[:n] = np.arange(n)
        self._index(np.asarray(rowids, dtype=np.int64), ids, texts, Metas(list(metas)))
        kind, ts, expires, superseded, turn, keys = _columns_of_all(metas)
        self.kind[:n] = kind
        self.ts[:n] = ts
        self.expires[:n] = expires
        self.superseded[:n] = superseded
        self.superseded_at[:n] = np.inf
        for p in np.flatnonzero(self.superseded[:n]).tolist():
            self.superseded_at[p] = _superseded_at(metas[p], True)
        self.turn[:n] = turn
        self.feedback[:n] = [bool(m.get(K_FEEDBACK)) for m in metas]
        self.user[:n] = [self._user_code(m.get(K_USER)) for m in metas]
        mem = self.kind[:n] != NO_KIND  # latest, as _note_times would raise it row by row
        sup = self.superseded_at[:n][mem]
        times = [float(np.nanmax(self.ts[:n][mem], initial=-np.inf)),
                 float(sup[np.isfinite(sup)].max(initial=-np.inf))]
        times += [_latest_feedback(m) for m, k in zip(metas, mem.tolist())
                  if k and (K_FEEDBACK in m or K_FEEDBACK_FOLDED in m)]
        self.latest = max(self.latest, *times)
        codes = np.array([-1 if key is None else self._code_of_key(key) for key in keys], dtype=np.int64)
        self.session[:n] = codes
        self._index_sessions()

    def _index(self, rowid: np.ndarray, ids: list[str], texts: list[str], metas: Metas) -> None:
        """Take ``len(ids)`` live documents at positions 0.. (an empty mirror, room reserved)
        and make the maps by id and rowid."""
        n = len(ids)
        self.rowid[:n] = rowid
        self.alive[:n] = True
        self._live = None
        self.ids, self.texts, self.metas = ids, texts, metas
        self.pos_of_id = dict(zip(ids, range(n)))
        self.pos_of_rowid = dict(zip(rowid.tolist(), range(n)))
        self.rowid_pos = np.full(max(64, 2 * (int(rowid.max(initial=0)) + 1)), -1, dtype=np.int64)
        self.rowid_pos[rowid] = np.arange(n)
        self.n = self.n_alive = n

    def _index_sessions(self) -> None:
        """Each session's positions, from the session column, ascending (in one sort)."""
        codes = self.session[: self.n]
        order = np.argsort(codes, kind="stable")
        sorted_codes = codes[order]
        starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        for a, b in zip(starts.tolist(), np.r_[starts[1:], self.n].tolist()):
            code = int(sorted_codes[a])
            if code >= 0:
                self._session_pos.setdefault(code, []).extend(order[a:b].tolist())

    def apply(self, ops: list[tuple[Any, ...]]) -> tuple[list[int], list[int]]:
        """Follow a committed transaction's ops (``("insert", rowid, id, text, meta, vec,
        tokens)``, ``("update", id, meta)``, ``("delete", [ids])``); the rowids added and removed."""
        added: list[int] = []
        removed: list[int] = []
        for op in ops:
            if op[0] == "insert":
                _, rowid, id, text, meta, vec, tokens = op
                self.append(rowid, id, text, meta, vec, tokens)
                added.append(rowid)
            elif op[0] == "update":
                _, id, meta = op
                self.update(self.pos_of_id[id], meta)
            elif op[0] == "delete":
                for id in op[1]:
                    p = self.pos_of_id.get(id)
                    if p is not None:
                        removed.append(int(self.rowid[p]))
                        self.remove(p)
        return added, removed

    def update(self, p: int, meta: dict[str, Any]) -> None:
        """Follow a committed metadata change of the document at ``p``."""
        self.metas[p] = meta
        self._set_columns(p, meta)

    def remove(self, p: int) -> None:
        """Follow a committed deletion: ``p`` becomes a hole."""
        self.alive[p] = False
        self._live = None
        self.n_alive -= 1
        del self.pos_of_id[self.ids[p]]
        del self.pos_of_rowid[int(self.rowid[p])]
        self.rowid_pos[int(self.rowid[p])] = -1
        code = int(self.session[p])
        if code >= 0:
            self._session_pos[code].remove(p)
            self._blocks.pop(code, None)
            self.session[p] = -1
        self.kind[p] = NO_KIND
        self.user[p] = -1
        self.feedback[p] = False
        for col in self._value_columns.values():
            col.set(p, None)
        self.texts[p] = ""
        self.metas[p] = {}

    def needs_compaction(self) -> bool:
        """More holes than live documents (and over 1,024 of them)."""
        dead = self.n - self.n_alive
        return dead > 1024 and dead > self.n_alive

    def compacted(self) -> Mirror:
        """A new mirror of the live documents only, positions renumbered."""
        new = Mirror(self.dim, self.dtype)
        if self.dim:
            new.set_dim(self.dim)
        new.reserve(self.n_alive)
        for p in np.flatnonzero(self.alive[: self.n]).tolist():
            new.append(int(self.rowid[p]), self.ids[p], self.texts[p], self.metas[p], self.vector(p),
                       int(self.tokens[p]))
        return new

    # ------------------------------------------------------------------ sessions

    def session_code(self, session: Any, create: bool = False) -> int:
        """The code of ``session`` (a JSON value); -2 for a session no document has."""
        key = json.dumps(session)
        if create:
            return self._code_of_key(key)
        return self.session_codes.get(key, -2)

    def session_value(self, code: int) -> Any:
        """The JSON value of the session with ``code`` (``remember(session=...)``'s value)."""
        got = self._session_values.get(code, _UNSEEN)
        if got is _UNSEEN:
            got = self._session_values[code] = json.loads(self.session_keys[code])
        return got

    def session_positions(self, code: int) -> np.ndarray:
        """A session's positions, ascending (see :meth:`session_block`)."""
        return self.session_block(code).positions

    def session_block(self, code: int) -> SessionBlock:
        """A session's positions (sorted) and their vectors laid out together.

        Written in one process, a session's rows lie scattered over the heap; scanning a
        copy laid out together is several times faster at 100k (measured 0.14 ms against
        0.59 ms for 2,000 rows). Opened from a mirror file, they lie together already, and
        the block is a view. New rows are appended in place; a removal or a growth of the
        heap drops the block, which is made again on next use.
        """
        blk = self._blocks.get(code)
        if blk is None:
            pos = np.sort(np.array(self._session_pos.get(code, ()), dtype=np.int64))
            blk = SessionBlock(pos, self.heap, self.slot)
            self._blocks[code] = blk
        return blk

    def _positions_of(self, session: SessionArg) -> np.ndarray:
        if session is ANY_SESSION:
            return self.live_positions()
        code = self.session_code(session)
        return self.session_positions(code) if code >= 0 else _NO_POSITIONS

    # ------------------------------------------------------------------ reading

    def vector(self, p: int) -> np.ndarray:
        """The unit vector of the document at ``p`` (a view: read it, never change it)."""
        return self.heap[self.slot[p]]

    def vectors(self, pos: np.ndarray) -> np.ndarray:
        """The unit vectors of the documents at ``pos``, in that order (a copy)."""
        return self.heap[self.slot[pos]]

    def live_positions(self) -> np.ndarray:
        """Every live document's position, in insertion order (read-only: kept until a
        document comes or goes, so a query across the collection makes no O(N) pass)."""
        live = self._live
        if live is None:
            live = self._live = np.flatnonzero(self.alive[: self.n])
            live.flags.writeable = False
        return live

    def matching(self, flt: FilterValues | None) -> np.ndarray:
        """Positions of live documents that match a checked filter (exactly), in insertion order."""
        if flt is None:
            return self.live_positions()
        rest = dict(flt)
        if K_SESSION in rest:
            codes = [self.session_code(v) for v in rest.pop(K_SESSION)]
            parts = [self.session_positions(c) for c in codes if c >= 0]
            pos = np.unique(np.concatenate(parts)) if parts else _NO_POSITIONS
        else:
            pos = self.live_positions()
        if K_KIND in rest and all(isinstance(v, str) for v in rest[K_KIND]):
            codes = [KIND_CODES[v] for v in rest.pop(K_KIND) if v in KIND_CODES]
            pos = pos[np.isin(self.kind[pos], codes)]
        if rest:
            items = list(rest.items())
            metas = self.metas
            keep = [p for p in pos.tolist()
                    if all(any(_same(metas[p].get(k), v) for v in vs) for k, vs in items)]
            pos = np.array(keep, dtype=np.int64)
        return pos

    def select(self, session: SessionArg = ANY_SESSION, kinds: tuple[str, ...] = (), live_at: float | None = None,
               include_superseded: bool = True, exclude_ids: tuple[str, ...] = (),
               as_of: float | None = None, user: str | None = None) -> np.ndarray:
        """Positions by the reserved columns alone, in position order: the memories of
        ``kinds`` in ``session`` (and of ``user`` when given), not expired at ``live_at``
        (None: expired too), not superseded unless ``include_superseded``, minus ``exclude_ids``.

        ``as_of`` reads the collection as it stood at that moment: memories created after
        it are left out, and one superseded after it counts as not superseded. This is how
        the memory layer picks candidates: a few compares over numpy columns, no metadata read.
        """
        n = self.n
        pos: np.ndarray | None = None
        if session is ANY_SESSION and user is None:  # whole columns: contiguous compares, no gather
            kind = self.kind[:n]
        else:
            pos = self._positions_of(session)
            if user is not None:
                pos = self._of_user(pos, user, every=session is ANY_SESSION)
            kind = self.kind[pos]

        def col(c: np.ndarray) -> np.ndarray:
            return c[:n] if pos is None else c[pos]
        mask = np.zeros(kind.shape, dtype=bool)
        for c in (KIND_CODES[k] for k in kinds):  # a few compares beat np.isin's set-up on a handful of codes
            mask |= kind == c  # a hole's kind is NO_KIND: never selected
        if live_at is not None:
            mask &= col(self.expires) > live_at
        past = as_of is not None and self.is_past(as_of)
        if past:
            mask &= col(self.ts) <= as_of
        if not include_superseded:
            mask &= ~(col(self.superseded) & (col(self.superseded_at) <= as_of)) if past else ~col(self.superseded)
        pos = np.flatnonzero(mask) if pos is None else pos[mask]
        if exclude_ids:
            drop = {self.pos_of_id[i] for i in exclude_ids if i in self.pos_of_id}
            if drop:
                pos = pos[~np.isin(pos, list(drop))]
        return pos

    def _of_user(self, pos: np.ndarray, user: str, every: bool) -> np.ndarray:
        """Those of ``pos`` that belong to ``user`` (``every``: ``pos`` is every live position)."""
        code = self.user_codes.get(user)
        if code is None:
            return _NO_POSITIONS
        if every:  # one compare over the column beats gathering it at every live position
            return np.flatnonzero(self.user[: self.n] == code)
        return pos[self.user[pos] == code]

    def keep_matching(self, pos: np.ndarray, flt: FilterValues | None) -> np.ndarray:
        """Those of ``pos`` whose metadata match a checked filter (exactly), in their order.

        Each key filtered on becomes a :class:`ValueColumn` (read once, then kept in step
        with every write), so a filtered recall costs a few array compares."""
        if not flt or pos.size == 0:
            return pos
        mask = np.ones(pos.size, dtype=bool)
        for key, values in flt.items():
            mask &= self.value_column(key).matching(pos, values)
        return pos[mask]

    def value_column(self, key: str) -> ValueColumn:
        """The column of metadata key ``key`` (made on first use)."""
        col = self._value_columns.get(key)
        if col is None:
            if len(self._value_columns) >= VALUE_COLUMNS:
                del self._value_columns[next(iter(self._value_columns))]
            col = self._value_columns[key] = ValueColumn(key, self)
        return col

    def is_past(self, as_of: float) -> bool:
        """Whether reading as of ``as_of`` may differ from reading the mirror as it is."""
        return bool(as_of < self.latest)

    def superseded_as_of(self, p: int, as_of: float | None) -> bool:
        """Whether the memory at ``p`` was superseded at ``as_of`` (None: now, as it is)."""
        return bool(self.superseded[p] and (as_of is None or self.superseded_at[p] <= as_of))

    def in_turn_order(self, pos: np.ndarray) -> list[int]:
        """``pos`` in turn order (then time, then insertion): a session's transcript."""
        turn = np.nan_to_num(self.turn[pos], nan=0.0)
        return pos[np.lexsort((pos, self.ts[pos], turn))].tolist()

    def memory_position(self, id: str) -> int | None:
        """The position of the memory ``id``; None when there is no such document or it is
        not a well-formed memory (a plain document, or reserved keys without a usable time)."""
        p = self.pos_of_id.get(id)
        return None if p is None or self.kind[p] == NO_KIND else p

    def result(self, p: int, score: float | None = None) -> Result:
        """The document at ``p`` as a :class:`Result` the caller may change freely."""
        # Scalars are immutable and shared; only nested values take the (slower) JSON round trip.
        meta = {k: v if type(v) in _JSON_SCALARS else json.loads(json.dumps(v)) for k, v in self.metas[p].items()}
        return Result(self.ids[p], self.texts[p], score, meta)
