"""The in-memory mirror of the database: columns by position, filters, and selection.

The process keeps a copy of every live document: a matrix of the vectors (float32, or
float16 at half the memory: see :data:`~vxmem.store.vector.vectors.VECTOR_DTYPES`), the ids, texts and metadata
dicts, and numpy columns for the reserved keys that filters hit most (kind, session,
time, expiry, superseded, turn). A filtered search is then an exact scan of just the
selected rows, and the memory layer selects its candidates with a few vectorised
compares instead of reading JSON.

Positions are append-only within a process: a deleted document leaves a hole
(``alive`` False) until :meth:`Mirror.compacted` drops the holes. Positions are therefore
valid only while the collection's lock is held (see ``Engine.locked``).

What the metadata give the columns, and a whole database read into them at once, is
:mod:`~vxmem.store.mirror.columns`; a session's vectors laid out together, :mod:`~vxmem.store.mirror.session_blocks`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.ma  # noqa: F401 - np.unique imports it at its first call (7 ms): with vxmem, not in a first recall

from ...core.keys import K_FEEDBACK, K_FEEDBACK_FOLDED, K_KIND, K_SESSION, K_USER, KIND_CODES, NO_KIND
from ...core.sentinels import ANY_SESSION
from ..arguments import FilterValues
from ..results import Result
from .columns import (
    VALUE_COLUMNS,
    Metas,
    ValueColumn,
    codes_named,
    columns_of,
    latest_feedback,
    same_json,
    session_key,
    session_of_key,
    superseded_at,
)
from .rowids import RowidMap
from .session_blocks import SessionBlock
from .turn_index import TurnIndex

# session_key is columns.py's, handed on: the memory layer imports it from here.
__all__ = ["ANY_SESSION", "COLUMNS", "Mirror", "SessionArg", "session_key"]

# ``session=ANY_SESSION`` selects every session (None is a session of its own: the one
# with no name). The value is the core's, the one the public API hands out.
SessionArg = Any  # a session name, None, a UserSession (one user's session), or ANY_SESSION

_JSON_SCALARS = (str, int, float, bool, type(None))
_FILL = {"kind": NO_KIND, "session": -1, "user": -1, "ts": np.nan, "expires": np.inf, "superseded_at": np.inf,
         "turn": np.nan}
# The numpy columns by position (see Mirror), each as long as the mirror's room.
COLUMNS = ("heap", "slot", "rowid", "alive", "kind", "session", "user", "ts", "expires", "superseded",
           "superseded_at", "tokens", "turn", "feedback")
_NO_POSITIONS = np.zeros(0, dtype=np.int64)
_UNSEEN = object()


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
    and ``rowid_pos`` (a :class:`~vxmem.store.mirror.rowids.RowidMap`: rowid -> position, -1
    for none, sized by the rows held, not by the largest rowid). ``n_alive`` counts the
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
        self.rowid_pos = RowidMap(-1)
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
        self._turns = TurnIndex()
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
        for name in COLUMNS:
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
        self.rowid_pos.set(rowid, p)
        self.n_alive += 1
        self._set_columns(p, meta)

    def _set_columns(self, p: int, meta: dict[str, Any]) -> None:
        turn_was = float(self.turn[p])
        code, self.ts[p], self.expires[p], self.superseded[p], self.turn[p], key = columns_of(meta)
        self.kind[p] = code
        self.feedback[p] = bool(meta.get(K_FEEDBACK))
        self.superseded_at[p] = superseded_at(meta, self.superseded[p])
        self._note_times(p, meta)
        for col in self._value_columns.values():
            col.set(p, meta)
        self.user[p] = self.user_code(meta.get(K_USER))
        old = int(self.session[p])
        new = -1 if key is None else self.session_code_of_key(key)
        if old != new:
            if old >= 0:
                self._session_pos[old].remove(p)
                self._blocks.pop(old, None)
                self._turns.dropped(old)
            if new >= 0:
                self._session_pos.setdefault(new, []).append(p)
                blk = self._blocks.get(new)
                if blk is not None and not blk.append(p, self.vector(p)):
                    del self._blocks[new]
                self._turns.added(new, float(self.turn[p]), p)
            self.session[p] = new
        elif new >= 0 and turn_was != self.turn[p] and not (np.isnan(turn_was) and np.isnan(self.turn[p])):
            self._turns.dropped(new)

    def _note_times(self, p: int, meta: dict[str, Any]) -> None:
        """Raise :attr:`latest` to the times this memory's metadata records."""
        if self.kind[p] == NO_KIND:
            return
        sup = self.superseded_at[p]
        latest = max(self.latest, float(self.ts[p]), float(sup) if np.isfinite(sup) else -np.inf)
        if K_FEEDBACK in meta or K_FEEDBACK_FOLDED in meta:
            latest = max(latest, latest_feedback(meta))
        self.latest = latest

    def user_code(self, user: Any) -> int:
        """The code of ``user`` (a str; -1 for no user), made on first sight."""
        return self.user_codes.setdefault(user, len(self.user_codes)) if isinstance(user, str) else -1

    def session_code_of_key(self, key: str) -> int:
        """The code of the session whose key is ``key`` (see :func:`session_key`), made on first sight."""
        code = self.session_codes.get(key)
        if code is None:
            code = len(self.session_codes)
            self.session_codes[key] = code
            self.session_keys.append(key)
        return code

    def take_documents(self, rowid: np.ndarray, ids: list[str], texts: list[str], metas: Metas) -> None:
        """Take ``len(ids)`` live documents at positions 0.. (an empty mirror, room reserved)
        and make the maps by id and rowid: a bulk load's (:func:`~vxmem.store.mirror.bulk.fill`,
        a mirror file's), which writes the columns itself, then calls :meth:`index_sessions`."""
        n = len(ids)
        self.rowid[:n] = rowid
        self.alive[:n] = True
        self._live = None
        self.ids, self.texts, self.metas = ids, texts, metas
        self.pos_of_id = dict(zip(ids, range(n)))
        self.pos_of_rowid = dict(zip(rowid.tolist(), range(n)))
        self.rowid_pos = RowidMap.of(rowid[:n], np.arange(n))
        self.n = self.n_alive = n

    def index_sessions(self) -> None:
        """Each session's positions, from the session column, ascending (in one sort): a bulk
        load's, once it has written the session column."""
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
        self.rowid_pos.set(int(self.rowid[p]), -1)
        code = int(self.session[p])
        if code >= 0:
            self._session_pos[code].remove(p)
            self._blocks.pop(code, None)
            self._turns.dropped(code)
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
        """The code of ``session`` (a JSON value, or a :class:`UserSession`: one user's session);
        -2 for a session no document has."""
        key = session_key(session)
        if create:
            return self.session_code_of_key(key)
        return self.session_codes.get(key, -2)

    def session_value(self, code: int) -> Any:
        """The JSON value of the session with ``code`` (``remember(session=...)``'s value)."""
        got = self._session_values.get(code, _UNSEEN)
        if got is _UNSEEN:
            got = self._session_values[code] = session_of_key(self.session_keys[code])
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
            codes = [c for v in rest.pop(K_SESSION) for c in codes_named(self.session_keys, v)]
            parts = [self.session_positions(c) for c in codes]
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
                    if all(any(same_json(metas[p].get(k), v) for v in vs) for k, vs in items)]
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
            live = [(p, self.metas[p]) for p in self.live_positions().tolist()]
            col = self._value_columns[key] = ValueColumn(key, len(self.rowid), live)
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

    def turn_at(self, code: int, turn: float) -> int:
        """The position of the live document numbered ``turn`` in the session with ``code``
        (-1: none, or no such session)."""
        if code < 0 or not np.isfinite(turn):
            return -1
        return self._turns.at(code, turn, self._session_pos.get(code, ()), self.turn)

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
