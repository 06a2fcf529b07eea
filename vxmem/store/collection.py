"""The collection: documents, metadata and vectors, durable and filterable.

A few obvious verbs (``add``, ``get``, ``search``, ``scan``, ``count``, ``delete``,
``update_metadata``, ``build_index``, ``close``) over four rooms: the database file
(:mod:`~vxmem.store.database`, the source of truth), its in-memory mirror
(:mod:`~vxmem.store.mirror`, where filters and exact scans run), the HNSW cache
(:mod:`~vxmem.store.hnsw`) and lexical search (:mod:`~vxmem.store.lexical`). Every write is
one SQLite transaction; the mirror and the caches follow only once it commits.

The collection imports nothing of the memory layer: it knows the reserved keys
(:mod:`vxmem.core.keys`) only as columns it mirrors and selects on. The memory above it
(:mod:`vxmem.memory.conversation`) uses a small internal surface, documented in one section below:
``_locked()``, ``_transaction()``, ``_embed()``, ``_count_tokens()``, ``_prepare_query()``,
``_topk()``, ``_candidates()``, ``_record_access()``, ``_last_access()`` and the
:class:`~vxmem.store.mirror.Mirror` that ``_locked()`` gives.

Callers' callables (embedders, token counters, and above, judges and summarizers) run
outside the lock: a verb takes it to read a snapshot and again to write, so a slow
embedder never holds up another thread's read.

A handle belongs to the process that opened it: used in a forked child it raises
:class:`~vxmem.core.errors.ForkedHandleError`, and ``close()`` there leaves the
parent's writer lock and connection alone.
"""

from __future__ import annotations

import math
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from ..core.checks import check_int, check_limit, check_text
from ..core.errors import ForkedHandleError, VectrixError
from ..core.keys import K_SESSION
from ..core.tokens import check_token_counter, token_counter_name
from ..models.embed import EmbedderArg, check_embedder, embedder_name, get_embedder, l2_normalize
from ..ranking.scoring import HYBRID_WEIGHT, fuse_relevance
from .checks import (
    check_filter,
    check_hybrid_weight,
    check_id,
    check_ids,
    check_json,
    check_metadata,
    check_mode,
    check_reserved,
    check_token_count,
    json_copy,
)
from .database import Database, Transaction, resave_rows
from .hnsw import HnswCache
from .lexical import LexicalSearch
from .mirror import ANY_SESSION, Mirror, SessionArg, check_vector_dtype, float16_kernels, rowdot
from .results import Result, Results

EXACT_THRESHOLD = 20_000  # selections above this many rows go through the HNSW index
SAME_EMBEDDER_COSINE = 0.99  # a stored vector and a fresh one of its text, from the same embedder



class Candidates(NamedTuple):
    """The top candidates of one search mode, best first for dense and lexical, in position
    order for hybrid: mirror ``positions``, their ``relevance`` (the mode's score) and the
    raw ``dense`` cosine and ``lexical`` BM25 of each (NaN where a mode did not look)."""

    positions: np.ndarray
    relevance: np.ndarray
    dense: np.ndarray
    lexical: np.ndarray


_TINY = np.nextafter(0.0, 1.0)


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows of a float64 matrix scaled to unit length, as float32; all-zero rows stay zero.

    Each row is first divided by its largest magnitude, so a row of 1e20s or 1e-25s keeps
    its direction (in float32, or squared in float64, it would overflow or vanish).
    """
    # ndarray methods and ufuncs, not np.max / np.linalg.norm: their Python wrappers were a
    # third of the time of one remember()'s row (norm computes this very sum of squares).
    if x.shape[0] == 1 and x.shape[1]:  # one row (a remember()): the same steps on a vector, half the time
        row = x[0]
        top = float(np.abs(row).max())
        if top == 0.0:
            return np.zeros(x.shape, dtype=np.float32)
        y = row / top
        return (y / math.sqrt(float(np.square(y).sum()))).astype(np.float32)[None, :]
    # An all-zero row's 0 becomes the smallest float64 (0 / it is 0), no other row's changes:
    # its peak is at least that, and its norm at least 1.
    peak = np.abs(x).max(axis=1, keepdims=True) if x.size else np.zeros((x.shape[0], 1))
    np.maximum(peak, _TINY, out=peak)
    y = x / peak
    norms = np.sqrt(np.square(y).sum(axis=1, keepdims=True))
    np.maximum(norms, _TINY, out=norms)
    return (y / norms).astype(np.float32)


def exact_topk(m: Mirror, q: np.ndarray, positions: np.ndarray, k: int,
               session: SessionArg = ANY_SESSION) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of ``positions`` by cosine to ``q``, best first, by an exact scan.

    Ties go to the earliest document, so a smaller ``k``'s answer is a prefix of a larger
    one's. ``session`` says the positions are one session's: its contiguous block is scanned.
    """
    n_sel = positions.size
    sims = None
    if session is not ANY_SESSION:
        blk = m.session_block(m.session_code(session))
        if n_sel == blk.n:  # a subset of the block as large as the block is the block
            sims = blk.dots(q)
        else:
            idx = np.searchsorted(blk.positions, positions)
            if idx[-1] < blk.n and np.array_equal(blk.positions[idx], positions):
                sims = blk.dots(q)[idx]
    if sims is None:
        sims = rowdot(m.heap[: m.n], q)[m.slot[positions]] if n_sel * 4 > m.n else rowdot(m.vectors(positions), q)
    if k < n_sel:
        part = np.argpartition(-sims, k - 1)[:k]
        edge = sims[part].min()
        part = np.union1d(part[sims[part] > edge], np.flatnonzero(sims == edge))
    else:
        part = np.arange(n_sel)
    order = part[np.lexsort((positions[part], -sims[part]))][:k]
    return positions[order], sims[order]


class _Locked:
    """``Collection._locked()``: a class, not a generator, because recall enters it a few
    times per call and a generator-based context manager costs several times as much."""

    __slots__ = ("_collection",)

    def __init__(self, collection: Collection):
        self._collection = collection

    def __enter__(self) -> Mirror:
        return self._collection._enter_locked()

    def __exit__(self, *exc: object) -> None:
        c = self._collection
        c._depth -= 1
        c._lock.release()


class Collection:
    """A durable collection of documents with vectors, filterable by metadata.

    :param path: a database file to open or create; None (or ``":memory:"``) keeps
        everything in memory.
    :param embedder: any callable ``list[str] -> (n, d)`` array, or a name of
        :data:`vxmem.models.embed.EMBEDDERS` (default: :func:`vxmem.models.embed.default_embedder`). The
        database records the embedder's ``name`` with its first vector and refuses to open
        with another one (a database with no recorded name: one stored vector is compared
        with a fresh embedding of its text).
    :param token_counter: any ``str -> int`` (default: :func:`~vxmem.core.tokens.count_tokens`).
    :param read_only: open without the writer lock and see what writers commit.
    :param exact_threshold: above this many selected rows a search goes through the HNSW
        index; at or below it, an exact scan (0: always exact).
    :param vector_dtype: ``"float32"`` (default) or ``"float16"``: the vectors this process
        holds in memory for its searches. ``"float16"`` halves that memory (the largest
        part: 768 MB of 1.5 GB at a million 384-d memories) and rounds each dot product by
        about 1e-4, so near ties may order otherwise; SQLite keeps float32 either way, and
        every handle may choose its own. Its scans run on NumKong's float16 kernels
        (usearch's SIMD library) at about float32's speed.
    """

    _results = Results  # the type searches return (the memory's face shows memory columns)

    def __init__(self, path: str | os.PathLike[str] | None = None, embedder: EmbedderArg = None,
                 token_counter: Callable[[str], int] | None = None, *, read_only: bool = False,
                 exact_threshold: int = EXACT_THRESHOLD, vector_dtype: str = "float32"):
        self.embedder = check_embedder(embedder)
        self._token_counter = check_token_counter(token_counter)
        self.exact_threshold = check_int(exact_threshold, "exact_threshold", minimum=0)
        self.read_only = bool(read_only)
        dtype = check_vector_dtype(vector_dtype)
        if dtype == np.float16:
            float16_kernels()  # loaded with the open, not in the first search; missing: refused before any file
        self.vector_dtype = vector_dtype
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str, a PathLike or None, not {type(path).__name__}")
        self.path = None if path is None or str(path) == ":memory:" else os.fspath(path)
        if self.read_only and self.path is None:
            raise ValueError("read_only needs a database file path")
        self._lock = threading.RLock()
        self._depth = 0  # how deep the thread holding the lock is in _locked() blocks
        self._locked_block = _Locked(self)
        self._closed = False
        self._pid = os.getpid()
        self._prepared = threading.local()  # a query embedded before the lock (see _prepare_query)
        self._database = Database(self.path, self.read_only)
        self._database.vector_dtype = dtype
        self._database.counted_by = token_counter_name(self._token_counter)
        try:
            self._mirror = self._database.load(self.token_counter)
            self._check_embedder()
        except BaseException:
            self._database.close()
            raise
        self._hnsw = HnswCache(self._database, lambda: self._mirror, self._lock)
        self._lexical = self._new_lexical()
        self._lexical.warm(self._mirror)  # the saved postings now, not in the first recall

    def _new_lexical(self) -> LexicalSearch:
        db = self._database
        return LexicalSearch(db.conn, lambda: db.generation, self.path, db.uid, db.indexed_upto,
                             None if db.read_only else db.index_pending)

    @property
    def token_counter(self) -> Callable[[str], int]:
        """The ``str -> int`` that counts each text's tokens (may be replaced; the database
        stores the counts of a counter with a ``name`` beside the texts)."""
        return self._token_counter

    @token_counter.setter
    def token_counter(self, counter: Callable[[str], int]) -> None:
        self._token_counter = counter
        name = token_counter_name(counter)
        if name != self._database.counted_by:
            self._database.counts_mixed = True  # the mirror's counts are no longer all one counter's
        self._database.counted_by = name

    def _check_embedder(self) -> None:
        """Refuse an embedder other than the one whose vectors the database holds.

        By name when both the database and the embedder have one; otherwise by comparing the
        first stored vector with a fresh embedding of its text. A writer records its
        embedder's name (with the first vector, or now for a database that passed the check).
        """
        db, name = self._database, embedder_name(self.embedder)
        where = self.path or ":memory:"
        if db.embedder is not None and name is not None:
            if db.embedder != name:
                raise ValueError(f"{where} holds vectors of embedder {db.embedder!r}, not of {name!r}: open it "
                                 "with the embedder that wrote it (embedder=...), or start a new database")
            return
        if self._mirror.n_alive:
            self._compare_one_vector(where, db.embedder, name)
        if name is not None and not self.read_only:
            db.writer_embedder = name
            if self._mirror.n_alive and db.embedder is None:
                db.record_embedder(name)

    def _compare_one_vector(self, where: str, recorded: str | None, name: str | None) -> None:
        m = self._mirror
        first = int(m.live_positions()[0])  # an open from the mirror file may start with a hole
        text, stored = m.texts[first], m.vector(first)
        this = name or type(self.embedder).__name__
        fresh = np.asarray(self.embedder([text]), dtype=np.float32).reshape(1, -1)[0]
        same = fresh.shape == stored.shape and float(l2_normalize(fresh[None])[0] @ stored) >= SAME_EMBEDDER_COSINE
        if same:
            return
        writer = repr(recorded) if recorded else "another embedder"
        advice = "open it with the embedder that wrote it (embedder=...), or start a new database"
        if recorded is None and name != embedder_name(get_embedder("hashing")):
            hashed = np.asarray(get_embedder("hashing")([text]), dtype=np.float32)[0]
            if hashed.shape == stored.shape and float(hashed @ stored) >= SAME_EMBEDDER_COSINE:
                writer = "the 'hashing' embedder"
                advice = "it was written by vxmem's earlier default: open it with embedder='hashing'"
        differ = f"{stored.shape[0]}-d vs {fresh.shape[0]}-d" + ("" if fresh.shape != stored.shape else
                                                                 ", cosine below 0.99")
        raise ValueError(f"{where} holds vectors of {writer}, not of this embedder ({this}): a stored vector and a "
                         f"fresh embedding of its text differ ({differ}); {advice}")

    # ------------------------------------------------------------------ the verbs

    def add(self, texts: str | Sequence[str], metadata: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
            ids: Sequence[str] | None = None) -> list[str]:
        """Store documents in one transaction, embedded in one batch; return their ids.

        :param texts: one text or a list of them.
        :param metadata: one JSON dict for every text, or a list with one per text.
        :param ids: the documents' ids (default: new random ones); an id already taken
            refuses the whole call.
        """
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, Sequence):
            raise TypeError(f"texts must be a str or a list of str, not {type(texts).__name__}")
        texts = [check_text(t, f"texts[{i}]") for i, t in enumerate(texts)]
        n = len(texts)
        metas = check_metadata(metadata, n)
        if ids is None:
            ids = [uuid.uuid4().hex for _ in range(n)]
        else:
            if isinstance(ids, str) or not isinstance(ids, Sequence):
                raise TypeError("ids must be a list of str")
            ids = [check_id(i, f"ids[{k}]") for k, i in enumerate(ids)]
            if len(ids) != n:
                raise ValueError(f"got {len(ids)} ids for {n} texts")
            if len(set(ids)) != n:
                raise ValueError("ids must be unique")
        with self._locked() as m:  # fail fast, before the embedder runs
            self._refuse_taken(m, ids)
        if n == 0:
            return []
        vecs = self._embed(texts)  # the callables run outside the lock, and before the transaction
        tokens = self._count_tokens(texts)
        with self._locked() as m:
            self._refuse_taken(m, ids)  # another thread may have taken one meanwhile
            with self._transaction() as tx:
                for id, text, meta, vec, t in zip(ids, texts, metas, vecs, tokens):
                    tx.insert(id, text, meta, vec, t)
        return list(ids)

    @staticmethod
    def _refuse_taken(m: Mirror, ids: list[str]) -> None:
        taken = [i for i in ids if i in m.pos_of_id]
        if taken:
            raise ValueError(f"id already exists: {taken[0]!r}")

    def search(self, query: str, limit: int = 10, filter: Mapping[str, Any] | None = None, mode: str = "dense",
               hybrid_weight: float = HYBRID_WEIGHT) -> Results:
        """The ``limit`` documents most relevant to ``query`` among those matching ``filter``.

        Exact whenever a filter is given: the true top ``limit`` of the matching
        documents, however few of the collection they are.

        :param query: the text to match.
        :param limit: how many results at most.
        :param filter: ``{key: value}`` or ``{key: [values]}`` (any of them) on metadata.
        :param mode: ``"dense"`` ranks by cosine of the embeddings; ``"lexical"`` by BM25 from
            the SQLite FTS5 index (only documents sharing a word with the query); ``"hybrid"``
            by ``hybrid_weight * dense + (1 - hybrid_weight) * lexical``, each min-max
            normalised over the union of both candidate lists
            (:func:`vxmem.ranking.scoring.fuse_relevance`).
        :param hybrid_weight: the dense share of a hybrid score, in [0, 1].
        """
        check_text(query, "query")
        limit = check_limit(limit)
        flt = check_filter(filter)
        mode = check_mode(mode)
        hybrid_weight = check_hybrid_weight(hybrid_weight)
        self._prepare_query(query, mode)
        with self._locked() as m:
            sessions = (flt or {}).get(K_SESSION, ())
            cand = self._candidates(query, m.matching(flt), limit, mode, hybrid_weight,
                                    session=sessions[0] if len(sessions) == 1 else ANY_SESSION)
            order = np.lexsort((cand.positions, -cand.relevance))[:limit]
            pos, score = cand.positions[order], cand.relevance[order]
            items = [m.result(int(p), float(s)) for p, s in zip(pos, score)]
            return self._results(items, query=query, token_estimate=int(m.tokens[pos].sum()))

    def get(self, id: str) -> Result:
        """The document with this id (``KeyError`` if there is none)."""
        check_id(id)
        with self._locked() as m:
            p = m.pos_of_id.get(id)
            if p is None:
                raise KeyError(f"no document with id {id!r}")
            return m.result(p)

    def __contains__(self, id: object) -> bool:
        with self._locked() as m:
            return isinstance(id, str) and id in m.pos_of_id

    def __len__(self) -> int:
        return self.count()

    def update_metadata(self, id: str, patch: Mapping[str, Any], merge: bool = True) -> dict[str, Any]:
        """Merge ``patch`` into a document's metadata; returns the metadata as stored.

        :param id: the document (``KeyError`` if there is none).
        :param patch: JSON keys and values to set.
        :param merge: False replaces the whole metadata with ``patch``.
        """
        check_id(id)
        if not isinstance(patch, Mapping):
            raise TypeError(f"patch must be a dict, not {type(patch).__name__}")
        check_json(patch, "patch")
        check_reserved(patch, "patch")
        with self._locked() as m:
            p = m.pos_of_id.get(id)
            if p is None:
                raise KeyError(f"no document with id {id!r}")
            meta = dict(m.metas[p]) if merge else {}
            meta.update(json_copy(patch))
            with self._transaction() as tx:
                tx.update_meta(id, meta)
            return json_copy(meta)

    def delete(self, ids: str | Sequence[str]) -> int:
        """Delete documents by id (one, or a list); unknown ids are ignored. Returns how many went."""
        ids = check_ids(ids)
        with self._locked() as m:
            present = list(dict.fromkeys(i for i in ids if i in m.pos_of_id))
            if not present:
                return 0
            with self._transaction() as tx:
                tx.delete(present)
            return len(present)

    def scan(self, filter: Mapping[str, Any] | None = None) -> Iterator[Result]:
        """Every document matching ``filter``, in insertion order."""
        flt = check_filter(filter)
        with self._locked() as m:
            snapshot = [m.result(p) for p in m.matching(flt)]
        return iter(snapshot)

    def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many documents match ``filter`` (all of them when it is None)."""
        flt = check_filter(filter)
        with self._locked() as m:
            return m.n_alive if flt is None else int(m.matching(flt).size)

    def build_index(self) -> None:
        """Build (or finish building) the HNSW index now, and wait for it (and for a
        background flush of pending vectors into it).

        Searches never need this: the index is built on first need, in the background
        when the collection is large, while searches scan exactly. A large build started
        here runs on every core (one a search started keeps its one core free), in a
        thread that holds no lock: other threads keep reading and writing meanwhile
        (their writes join the index when it is installed). What a failed build raised
        is raised here.
        """
        with self._locked():
            self._hnsw.ensure(threads=os.cpu_count() or 1)
        self._hnsw.wait()  # a build still running, then a background flush
        with self._locked():
            self._hnsw.raise_failed()

    def close(self) -> None:
        """Save the vector index if it changed, and release the database.

        Waits for a background index build to finish, so its work is saved, not lost.
        The index is a cache: a failure to save it (a full disk) never makes ``close()``
        fail; the next open rebuilds it. In a forked child, ``close()`` only marks the
        handle closed: the lock, the connection and the index file are the parent's.
        """
        if os.getpid() != self._pid:
            self._closed = True
            self._database.close()  # leaves the parent's lock and connection alone
            return
        self._hnsw.wait(closing=True)  # outside the lock: the build installs its index under it
        with self._lock:
            if self._closed:
                return
            try:
                self._hnsw.close()
                if self._database.save_mirror(self._mirror):
                    self._save_postings()
            finally:
                self._closed = True
                self._database.close()

    def _save_postings(self) -> None:
        """Save the lexical postings beside the database (a cache, like the mirror file: a
        failure to write them raises nothing)."""
        assert self.path is not None
        try:
            self._lexical.save(self.path, resave_rows(self._mirror.n_alive))
        except (OSError, ValueError):
            pass

    def __enter__(self) -> Collection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._mirror.n_alive} documents"
        return f"{type(self).__name__}({self.path or ':memory:'}, {state})"

    # ------------------------------------------------------------------ the internal surface
    #
    # What the memory layer (and white-box tests) use; nothing else reaches inside.

    def _locked(self) -> _Locked:
        """A context manager: hold the collection's lock, check it is open, bring a
        read-only handle up to date (in the outermost block only), and give the
        :class:`Mirror`. Positions read from it stay valid inside the block. Re-entrant,
        like the lock."""
        return self._locked_block

    def _enter_locked(self) -> Mirror:
        if os.getpid() != self._pid:  # before the lock: a fork may have copied it held
            raise ForkedHandleError(
                f"this {type(self).__name__} was opened by process {self._pid}, not this one ({os.getpid()}); "
                "open a new handle in this process")
        self._lock.acquire()
        self._depth += 1
        try:
            if self._closed:
                raise VectrixError(f"this {type(self).__name__} is closed")
            # Only the outermost block catches up: a nested one must not move the mirror
            # (or replace it) under positions the outer block is still holding.
            if self._depth == 1 and self._database.read_only:
                self._catch_up()
        except BaseException:
            self._depth -= 1
            self._lock.release()
            raise
        return self._mirror

    def _catch_up(self) -> None:
        """A read-only handle takes in what writers committed since it last looked: the
        changed rows only, or a whole new mirror when the change log cannot say."""
        uid = self._database.uid
        got = self._database.refresh(self._mirror, self.token_counter)
        if got is None:
            return
        if isinstance(got, Mirror):
            self._hnsw.reset()
            self._mirror = got
            if self._database.uid != uid:  # another database at this path: its rowids mean other rows
                self._lexical = self._new_lexical()
        else:
            self._follow(got)

    @contextmanager
    def _transaction(self) -> Iterator[Transaction]:
        """One SQLite transaction; the mirror and the caches follow only once it commits.

        Yields a :class:`~vxmem.store.database.Transaction` (``insert``, ``update_meta``,
        ``delete``, ``take_counter``, ``raise_counter``). Raises ``ReadOnlyError`` on a
        read-only handle.
        """
        with self._locked() as m:
            with self._database.transaction(m) as tx:
                yield tx
            self._follow(tx.ops)

    def _embed(self, texts: list[str]) -> np.ndarray:
        """The texts' vectors, unit length (normalised in float64, then float32), after
        checking what the embedder returned: real numbers (complex is a ``TypeError``), the
        shape, finite values, the collection's dimension. Call it outside the lock."""
        raw = np.asarray(self.embedder(texts))
        if raw.dtype.kind not in "biuf":
            raise TypeError(f"embedder must return real numbers, got an array of {raw.dtype}")
        vecs = raw.astype(np.float64)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ValueError(f"embedder returned shape {vecs.shape} for {len(texts)} texts; expected (n, d)")
        if not np.isfinite(vecs).all():
            raise ValueError("embedder returned non-finite values")
        dim = self._database.dim
        if dim is not None and vecs.shape[1] != dim:
            raise ValueError(f"embedder returned {vecs.shape[1]}-d vectors but this collection holds "
                             f"{dim}-d vectors")
        return unit_rows(vecs)

    def _count_tokens(self, texts: list[str]) -> list[int]:
        """The token counter's count of each text, checked (an int in [0, 2**40), never a
        bool or a float). Call it outside the lock, before the transaction."""
        return [check_token_count(self.token_counter(t), t) for t in texts]

    def _prepare_query(self, query: str, mode: str) -> None:
        """Embed ``query`` now, before the caller takes the lock, for the next
        :meth:`_candidates` of this thread (``mode`` says whether it needs a vector)."""
        if mode == "lexical":
            return
        got = getattr(self._prepared, "query", None)
        if got is not None and got[0] == query and got[1] is self.embedder:
            return
        self._prepared.query = (query, self.embedder, self._embed([query])[0])

    def _query_vector(self, query: str) -> np.ndarray:
        """The query's vector: the one this thread prepared, or embedded now."""
        got = getattr(self._prepared, "query", None)
        if got is not None:
            self._prepared.query = None
            vec = got[2]
            dim = self._database.dim
            if got[0] == query and got[1] is self.embedder and (dim is None or vec.shape[0] == dim):
                return vec
        return self._embed([query])[0]

    def _topk(self, q: np.ndarray, positions: np.ndarray, k: int,
              session: SessionArg = ANY_SESSION) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best of ``positions`` by cosine to the unit vector ``q``, best first:
        an exact scan, or the HNSW index above ``exact_threshold`` rows."""
        k = min(k, positions.size)
        if k == 0:
            return positions[:0], np.zeros(0, dtype=np.float32)
        if positions.size > self.exact_threshold > 0:
            hit = self._hnsw.topk(q, positions, k)
            if hit is not None:
                return hit
        return exact_topk(self._mirror, q, positions, k, session)

    def _candidates(self, query: str, positions: np.ndarray, k: int, mode: str,
                    hybrid_weight: float = HYBRID_WEIGHT, session: SessionArg = ANY_SESSION,
                    as_of: float | None = None) -> Candidates:
        """The top-``k`` candidates of one mode among ``positions`` (see :class:`Candidates`).

        Hybrid takes the union of both top-``k`` lists, computes the exact cosine and the
        BM25 of every member (0 where it shares no word with the query; on the FTS5-ranked
        fallback, 0 also where FTS5's list did not reach it) and fuses them; its pool does
        not depend on ``hybrid_weight``, so the sweep engine can vary the weight over a
        cached pool. ``session`` says the positions all belong to one session, which lets
        the scans and FTS5 look at just that session. ``as_of`` makes BM25 count only the
        documents that existed at that moment (see ``LexicalSearch.search``).
        """
        m = self._mirror
        empty = np.zeros(0)
        if positions.size == 0:
            return Candidates(positions[:0], empty, empty, empty)
        k = min(k, int(positions.size))  # a limit of 10**30 asks for every row, and no more
        if mode == "dense":
            pos, sims = self._topk(self._query_vector(query), positions, k, session)
            dense = sims.astype(np.float64)
            return Candidates(pos, dense, dense, np.full(pos.size, np.nan))
        lpos, bm25, seen = self._lexical.search(m, query, positions, k, session, as_of=as_of)
        if mode == "lexical":
            return Candidates(lpos, bm25, np.full(lpos.size, np.nan), bm25)
        q = self._query_vector(query)
        dpos, _ = self._topk(q, positions, k, session)
        pos = np.array(list(dict.fromkeys(dpos.tolist() + lpos.tolist())), dtype=np.int64)
        dense = rowdot(m.vectors(pos), q).astype(np.float64)  # row by row: the same cosine whatever the union
        lexical = seen(pos) if seen is not None else np.zeros(pos.size)
        order = np.argsort(pos, kind="stable")  # slots in position order, which does not depend on the weight
        pos, dense, lexical = pos[order], dense[order], lexical[order]
        return Candidates(pos, fuse_relevance(dense, lexical, hybrid_weight), dense, lexical)

    def _record_access(self, positions: np.ndarray, at: float) -> None:
        """Record that the documents at mirror ``positions`` were accessed at ``at`` (durable
        at once; no generation moves, so no reader reloads anything). A no-op on a read-only
        handle. Call it inside ``_locked()``."""
        if positions.size and not self._database.read_only:
            self._database.record_access(self._mirror.rowid[positions].tolist(), at)

    def _last_access(self, positions: np.ndarray, before: float) -> np.ndarray:
        """Each document's latest recorded access strictly before ``before`` (epoch seconds;
        -inf where it has none), in the order of ``positions``. Call it inside ``_locked()``."""
        rowids = self._mirror.rowid[positions].tolist()
        got = self._database.last_access(rowids, before)
        return np.array([got.get(r, -np.inf) for r in rowids], dtype=np.float64)

    # ------------------------------------------------------------------ following a commit

    def _follow(self, ops: list[tuple[Any, ...]]) -> None:
        """Apply a committed transaction's ops to the mirror and the HNSW cache."""
        m = self._mirror
        added, removed = m.apply(ops)
        self._hnsw.follow(added, removed)
        if m.needs_compaction():
            self._mirror = m.compacted()
