"""The collection's machinery, and the one seam the memory reaches the store through.

An :class:`Engine` holds an open database: the source of truth, an SQLite file
(:mod:`~vxmem.store.sqlite.database`) or a PostgreSQL database many processes share
(:mod:`~vxmem.store.postgres.database`), its in-memory mirror (:mod:`~vxmem.store.mirror.mirror`, where filters and
exact scans run), the HNSW cache (:mod:`~vxmem.store.vector.hnsw`) and lexical search
(:mod:`~vxmem.store.lexical.search`), behind one re-entrant lock. Every write is one database
transaction; the mirror and the caches follow only once it commits. A handle that shares
the database with writers (a read-only SQLite handle, any PostgreSQL one) first takes in
what they committed, at the start of each outermost ``locked()`` block.

:class:`~vxmem.store.seam.MemoryStore` declares what the memory layer uses of it (the mirror
seen as a read-only :class:`~vxmem.store.seam.MemoryView`, the transaction as
:class:`~vxmem.store.seam.MemoryWrites`); the collection's verbs use the same methods.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..core.checks import check_bool, check_int
from ..core.errors import ForkedHandleError, VectrixError
from ..core.tokens import check_token_counter, token_counter_name
from ..models.embed import EmbedderArg, check_embedder, embedder_name, get_embedder, l2_normalize
from ..ranking.scoring import HYBRID_WEIGHT, fuse_relevance
from .arguments import check_token_count
from .lexical.search import LexicalSearch
from .mirror.loading import resave_rows
from .mirror.mirror import ANY_SESSION, Mirror, SessionArg
from .postgres import is_postgres_url, open_postgres, shown_url
from .scopes import Scopes, ScopeState, StateParts, follow_state, scope_of
from .sqlite.database import Database, Transaction
from .vector.search import Candidates, exact_topk, unit_rows
from .vector.vectors import check_vector_dtype, float16_kernels, rowdot

if TYPE_CHECKING:  # psycopg is imported only when a PostgreSQL database is opened
    from .postgres.database import PgDatabase
    from .postgres.writes import PgTransaction

EXACT_THRESHOLD = 20_000  # selections above this many rows go through the HNSW index
SAME_EMBEDDER_COSINE = 0.99  # a stored vector and a fresh one of its text, from the same embedder


class _Locked:
    """``Engine.locked()``: a class, not a generator, because recall enters it a few
    times per call and a generator-based context manager costs several times as much."""

    __slots__ = ("_engine", "_scope")

    def __init__(self, engine: Engine, scope: tuple[Any, ...] = (None, None, None, None)):
        self._engine = engine
        self._scope = scope  # locked()'s user, nearest, owner_of, session

    def __enter__(self) -> Mirror:
        return self._engine._enter(*self._scope)

    def __exit__(self, *exc: object) -> None:
        c = self._engine
        c._depth -= 1
        if not c._depth and c.pooled:
            c.database.release()
        c._lock.release()


class Engine(StateParts):
    """An open database with its mirror, index and lexical search, behind one lock.

    The arguments are :class:`~vxmem.store.collection.Collection`'s, which checks them
    and documents them. ``database``, ``mirror``, ``index`` (the HNSW cache) and
    ``lexical`` are the parts; the methods below are the seam
    (:class:`~vxmem.store.seam.MemoryStore`).

    Callers' callables (embedders, token counters, and above, judges and summarizers) run
    outside the lock: a verb takes it to read a snapshot and again to write, so a slow
    embedder never holds up another thread's read. A handle belongs to the process that
    opened it: used in a forked child it raises :class:`~vxmem.core.errors.ForkedHandleError`.
    """

    def __init__(self, path: str | None, embedder: EmbedderArg, token_counter: Callable[[str], int] | None,
                 read_only: bool, exact_threshold: int, vector_dtype: str, durability: str = "normal"):
        self.embedder = check_embedder(embedder)
        self._token_counter = check_token_counter(token_counter)
        self.exact_threshold = check_int(exact_threshold, "exact_threshold", minimum=0)
        self.read_only = check_bool(read_only, "read_only")
        dtype = check_vector_dtype(vector_dtype)
        if dtype == np.float16:
            float16_kernels()  # loaded with the open, not in the first search; missing: refused before any file
        self.vector_dtype = vector_dtype
        self.url = path if is_postgres_url(path) else None
        # Resolved once, here: a relative path names the same file after a chdir() (the
        # checkpoints, the saved caches and the close all use this one).
        self.path = None if path is None or self.url is not None else os.path.abspath(path)
        if self.read_only and self.path is None and self.url is None:
            raise ValueError("read_only needs a database file path")
        self._lock = threading.RLock()
        self._depth = 0  # how deep the thread holding the lock is in locked() blocks
        self._locked_block = _Locked(self)
        self._closed = False
        self._pid = os.getpid()
        self._prepared = threading.local()  # a query embedded before the lock (see prepare_query)
        self.database: Database | PgDatabase
        if self.url is not None:
            self.database = open_postgres(self.url, self.read_only, durability)
        else:
            self.database = Database(self.path, self.read_only, durability)
        self.database.vector_dtype = dtype
        self.database.counted_by = token_counter_name(self._token_counter)
        try:
            # Scoped (PostgreSQL, scope=user), an empty mirror: each scope's rows come when first read.
            self._state = self._new_state(self.database.load(self.token_counter))
            self._check_embedder()
        except BaseException:
            self.database.close()
            raise
        self.scopes = Scopes(self._new_state) if getattr(self.database, "scoped", False) else None
        self.pooled = self.database.pooled  # a pooled connection goes back after each outermost block
        if self.pooled:
            self.database.release()
        self.lexical.warm(self.mirror)  # the saved postings now, not in the first recall

    def _new_state(self, mirror: Mirror) -> ScopeState:
        # A PostgreSQL database has no path: the cache reads its dim and read_only only, and
        # never loads or saves an index file beside it (it is rebuilt from the mirror).
        return ScopeState(mirror, cast(Database, self.database), self._lock)

    def _new_lexical(self) -> LexicalSearch:
        state = self._state
        return self.database.new_lexical(lambda: state.mirror)

    @property
    def where(self) -> str:
        """The database as messages name it: its file, its URL without the password, or ``:memory:``."""
        return shown_url(self.url) if self.url is not None else self.path or ":memory:"

    @property
    def token_counter(self) -> Callable[[str], int]:
        """The ``str -> int`` that counts each text's tokens (may be replaced; the database
        stores the counts of a counter with a ``name`` beside the texts)."""
        return self._token_counter

    @token_counter.setter
    def token_counter(self, counter: Callable[[str], int]) -> None:
        self._token_counter = counter
        name = token_counter_name(counter)
        if name != self.database.counted_by:
            self.database.counts_mixed = True  # the mirror's counts are no longer all one counter's
        self.database.counted_by = name

    def _check_embedder(self) -> None:
        """Refuse an embedder other than the one whose vectors the database holds.

        By name when both the database and the embedder have one; otherwise by comparing the
        first stored vector with a fresh embedding of its text. A writer records its
        embedder's name (with the first vector, or now for a database that passed the check).
        """
        db, name = self.database, embedder_name(self.embedder)
        where = self.where
        if db.embedder is not None and name is not None:
            if db.embedder != name:
                raise ValueError(f"{where} holds vectors of embedder {db.embedder!r}, not of {name!r}: open it "
                                 "with the embedder that wrote it (embedder=...), or start a new database")
            return
        if self.mirror.n_alive:
            self._compare_one_vector(where, db.embedder, name)
        if name is not None and not self.read_only:
            db.writer_embedder = name
            if self.mirror.n_alive and db.embedder is None:
                db.record_embedder(name)

    def _compare_one_vector(self, where: str, recorded: str | None, name: str | None) -> None:
        m = self.mirror
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

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def locked(self, user: str | tuple[str, ...] | None = None, nearest: str | None = None,
               owner_of: str | None = None, session: str | None = None) -> _Locked:
        """A context manager: hold the collection's lock, check it is open, bring a
        read-only handle up to date (in the outermost block only), and give the
        :class:`Mirror`. Positions read from it stay valid inside the block. Re-entrant,
        like the lock.

        ``user``: the block reads only that user's memories (a tuple: those users', read for
        the block alone); ``nearest``: the block is a recall of that query across every user;
        ``owner_of``: it reads the memories of the user the memory of that id belongs to;
        ``session``: only that session's memories (with a user, that user's session: a
        session belongs to its user). A scoped PostgreSQL handle then gives the mirror of those rows
        alone, or of the rows nearest the query by the database's HNSW index (approximate);
        any other handle, its one mirror. The outermost block's arguments count."""
        if user is None and nearest is None and owner_of is None and session is None:
            return self._locked_block
        return _Locked(self, (user, nearest, owner_of, session))

    def _enter(self, user: str | tuple[str, ...] | None = None, nearest: str | None = None,
               owner_of: str | None = None, session: str | None = None) -> Mirror:
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
            if self._depth == 1 and self.scopes is not None:
                if user is None and owner_of is not None:
                    user, session = cast("PgDatabase", self.database).owner(owner_of)
                self._enter_scope(user, nearest, session)
            elif self._depth == 1 and self.database.follows_writers:
                self._catch_up()
        except BaseException:
            self._depth -= 1
            if not self._depth and self.pooled:
                self.database.release()
            self._lock.release()
            raise
        return self.mirror

    def _enter_scope(self, user: str | tuple[str, ...] | None, nearest: str | None, session: str | None = None,
                     load: bool = True) -> None:
        """Bring every scope kept up to what writers committed, read ``user``'s (``session``'s
        when no user, both's when both; every row when neither) if it is not kept yet, and
        make it the one read (a scoped handle's outermost block); ``nearest`` (neither): a transient scope of the
        rows nearest that query instead. ``load=False``: bring the kept ones up, keep the one read."""
        assert self.scopes is not None
        db = cast("PgDatabase", self.database)
        scope = self.scopes.refresh(db, self.token_counter, scope_of(user, session, nearest) if load else False)
        if not load:
            return
        if scope is False:
            q = getattr(self._prepared, "query", None)
            vec = q[2] if q is not None and q[0] == nearest and q[1] is self.embedder else \
                self.embed([cast(str, nearest)], queries=True)[0]
            self._state = self._new_state(db.nearest(vec, self.token_counter))
        else:
            self._state = self.scopes.use(scope)

    def _catch_up(self) -> None:
        """Take in what writers committed since this handle last looked: the changed rows
        only, or a whole new mirror when the change log cannot say."""
        if self.scopes is not None:
            self._enter_scope(None, None, load=False)
            return
        uid = self.database.uid
        got = self.database.refresh(self.mirror, self.token_counter)
        if got is None:
            return
        if isinstance(got, Mirror):
            self.index.reset()
            self.mirror = got
            if self.database.uid != uid:  # another database at this path: its rowids mean other rows
                self.lexical = self._new_lexical()
        else:
            self.follow(got)

    @contextmanager
    def transaction(self) -> Iterator[Transaction | PgTransaction]:
        """One database transaction; the mirror and the caches follow only once it commits.

        Yields a :class:`~vxmem.store.sqlite.database.Transaction` or a
        :class:`~vxmem.store.postgres.writes.PgTransaction` (``insert``, ``update_meta``,
        ``delete``, ``take_counter``, ``raise_counter``). Raises ``ReadOnlyError`` on a
        read-only handle. A transaction that began behind another process's commit is
        followed through the change log, which holds both.
        """
        with self.locked() as m:
            with self.database.transaction(m) as tx:
                yield tx
            self.follow(tx.ops)
            if tx.behind:
                self._catch_up()

    def embed(self, texts: list[str], *, queries: bool = False) -> np.ndarray:
        """The texts' vectors, unit length (normalised in float64, then float32), after
        checking what the embedder returned: a float array (an int or complex one is a
        ``TypeError``) of one row per text, at least one dimension, finite values, the
        collection's dimension, and no all-zero row for a text to store (it could never be
        recalled by similarity; a query's may be: it matches by words alone). Every error
        names the embedder; nothing is written. Call it outside the lock."""
        try:
            raw = np.asarray(self.embedder(texts))
        except (ValueError, TypeError) as exc:  # ragged rows, objects that are not numbers
            raise ValueError(f"embedder {self._name()!r} returned something that is not an (n, d) array: "
                             f"{exc}") from None
        if raw.dtype.kind != "f":
            raise TypeError(f"embedder {self._name()!r} must return floats, got an array of {raw.dtype}")
        vecs = raw.astype(np.float64)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ValueError(f"embedder {self._name()!r} returned shape {vecs.shape} for {len(texts)} texts; "
                             "expected (n, d)")
        if vecs.shape[1] == 0:
            raise ValueError(f"embedder {self._name()!r} returned vectors of dimension 0")
        dim = self.database.dim
        if dim is not None and vecs.shape[1] != dim:
            raise ValueError(f"embedder {self._name()!r} returned {vecs.shape[1]}-d vectors but this collection holds "
                             f"{dim}-d vectors")
        # Each row's largest magnitude, which unit_rows needs anyway, is NaN or infinite exactly
        # when the row holds a NaN or an infinity, and 0 exactly when the row is all zeros.
        peaks = np.abs(vecs).max(axis=1)
        if len(texts) == 1:  # one remember()'s row: the same checks on a Python float, a third of the time
            top = float(peaks[0])
            finite, nonzero = math.isfinite(top), top != 0.0
        else:
            finite, nonzero = bool(np.isfinite(peaks).all()), bool(peaks.all())
        if not finite:
            raise ValueError(f"embedder {self._name()!r} returned non-finite values (NaN or infinity)")
        if not queries and not nonzero:
            zero = int(np.flatnonzero(peaks == 0)[0])
            if not texts[zero].strip():
                raise ValueError(f"text {zero} is empty: there is nothing to embed or recall")
            raise ValueError(f"embedder {self._name()!r} returned an all-zero vector for text {zero} "
                             f"({texts[zero][:40]!r}): it could never be recalled by similarity")
        return unit_rows(vecs, peaks)

    def _name(self) -> str:
        """The embedder's name, for an error message."""
        return embedder_name(self.embedder) or type(self.embedder).__name__

    def count_tokens(self, texts: list[str]) -> list[int]:
        """The token counter's count of each text, checked (an int in [0, 2**40), never a
        bool or a float). Call it outside the lock, before the transaction."""
        return [check_token_count(self.token_counter(t), t) for t in texts]

    def prepare_query(self, query: str, mode: str) -> None:
        """Embed ``query`` now, before the caller takes the lock, for the next
        :meth:`candidates` of this thread (``mode`` says whether it needs a vector)."""
        if mode == "lexical":
            return
        got = getattr(self._prepared, "query", None)
        if got is not None and got[0] == query and got[1] is self.embedder:
            return
        self._prepared.query = (query, self.embedder, self.embed([query], queries=True)[0])

    def query_vector(self, query: str) -> np.ndarray:
        """The query's vector: the one this thread prepared, or embedded now."""
        got = getattr(self._prepared, "query", None)
        if got is not None:
            self._prepared.query = None
            vec = got[2]
            dim = self.database.dim
            if got[0] == query and got[1] is self.embedder and (dim is None or vec.shape[0] == dim):
                return vec
        return self.embed([query], queries=True)[0]

    def topk(self, q: np.ndarray, positions: np.ndarray, k: int,
              session: SessionArg = ANY_SESSION) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best of ``positions`` by cosine to the unit vector ``q``, best first:
        an exact scan, or the HNSW index above ``exact_threshold`` rows."""
        k = min(k, positions.size)
        if k == 0:
            return positions[:0], np.zeros(0, dtype=np.float32)
        if positions.size > self.exact_threshold > 0:
            hit = self.index.topk(q, positions, k)
            if hit is not None:
                return hit
        return exact_topk(self.mirror, q, positions, k, session)

    def candidates(self, query: str, positions: np.ndarray, k: int, mode: str,
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
        m = self.mirror
        empty = np.zeros(0)
        if positions.size == 0:
            return Candidates(positions[:0], empty, empty, empty)
        k = min(k, int(positions.size))  # a limit of 10**30 asks for every row, and no more
        if mode == "dense":
            pos, sims = self.topk(self.query_vector(query), positions, k, session)
            dense = sims.astype(np.float64)
            return Candidates(pos, dense, dense, np.full(pos.size, np.nan))
        lpos, bm25, seen = self.lexical.search(m, query, positions, k, session, as_of=as_of)
        if mode == "lexical":
            return Candidates(lpos, bm25, np.full(lpos.size, np.nan), bm25)
        q = self.query_vector(query)
        dpos, _ = self.topk(q, positions, k, session)
        pos = np.array(list(dict.fromkeys(dpos.tolist() + lpos.tolist())), dtype=np.int64)
        dense = rowdot(m.vectors(pos), q).astype(np.float64)  # row by row: the same cosine whatever the union
        lexical = seen(pos) if seen is not None else np.zeros(pos.size)
        order = np.argsort(pos, kind="stable")  # slots in position order, which does not depend on the weight
        pos, dense, lexical = pos[order], dense[order], lexical[order]
        return Candidates(pos, fuse_relevance(dense, lexical, hybrid_weight), dense, lexical)

    def record_access(self, positions: np.ndarray, at: float) -> None:
        """Record that the documents at mirror ``positions`` were accessed at ``at`` (durable
        at once; no generation moves, so no reader reloads anything). A no-op on a read-only
        handle. Call it inside ``locked()``."""
        if positions.size and not self.database.read_only:
            self.database.record_access(self.mirror.rowid[positions].tolist(), at)

    def last_access(self, positions: np.ndarray, before: float) -> np.ndarray:
        """Each document's latest recorded access strictly before ``before`` (epoch seconds;
        -inf where it has none), in the order of ``positions``. Call it inside ``locked()``."""
        rowids = self.mirror.rowid[positions].tolist()
        got = self.database.last_access(rowids, before)
        return np.array([got.get(r, -np.inf) for r in rowids], dtype=np.float64)

    def late_vectors(self, positions: np.ndarray, model: str) -> list[bytes | None]:
        """The late-interaction token vectors ``model`` stored for the documents at mirror
        ``positions`` (None where none are stored), in their order. Call it inside ``locked()``."""
        rowids = self.mirror.rowid[positions].tolist()
        got = self.database.late_vectors(model, rowids)
        return [got.get(r) for r in rowids]

    def late_context_vectors(self, positions: np.ndarray, model: str) -> list[tuple[int, bytes] | None]:
        """``(rowid of the turn before, token vectors)`` ``model`` stored for the documents at
        ``positions`` read in context (None where none are stored). Call it inside ``locked()``."""
        rowids = self.mirror.rowid[positions].tolist()
        got = self.database.late_context_vectors(model, rowids)
        return [got.get(r) for r in rowids]

    def follow(self, ops: list[tuple[Any, ...]]) -> None:
        """Apply a committed transaction's ops to the mirror and the HNSW cache."""
        follow_state(self._state, ops)

    def build_index(self) -> None:
        """Build (or finish building) the HNSW index now and wait for it (see
        :meth:`Collection.build_index <vxmem.store.collection.Collection.build_index>`)."""
        with self.locked():
            self.index.ensure(threads=os.cpu_count() or 1)
        self.index.wait()  # a build still running, then a background flush
        with self.locked():
            self.index.raise_failed()

    def close(self) -> None:
        """Save the caches that changed and release the database (see
        :meth:`Collection.close <vxmem.store.collection.Collection.close>`)."""
        if os.getpid() != self._pid:
            self._closed = True
            self.database.close()  # leaves the parent's lock and connection alone
            return
        self.index.wait(closing=True)  # outside the lock: the build installs its index under it
        with self._lock:
            if self._closed:
                return
            try:
                self.index.close()
                if self.scopes is not None:
                    self.scopes.close()
                if self.database.save_mirror(self.mirror):
                    self._save_postings()
            finally:
                self._closed = True
                self.database.close()

    def _save_postings(self) -> None:
        """Save the lexical postings beside the database (a cache, like the mirror file: a
        failure to write them raises nothing)."""
        assert self.path is not None
        try:
            self.lexical.save(self.path, resave_rows(self.mirror.n_alive))
        except (OSError, ValueError):
            pass

