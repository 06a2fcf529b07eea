"""The collection's HNSW cache: the usearch graph over its vectors, built, kept in step, searched.

Above ``exact_threshold`` selected rows a search goes through this index: the graph
proposes a few times ``limit`` candidates (more when a filter keeps few of them), and
each is scored exactly against the mirror's vectors, so the scores are the exact scan's
and only a row the graph never proposed can be missed (recall@10 against the exact top
10 is measured in ``benchmarks/bench_memory.py``).

The index is never the truth: it is built lazily on first need and saved beside the
database on ``close()``; a saved file is used only when it is provably this database's
(the graph, its settings and that proof: :mod:`vxmem.store.vector.graph`).

A large build takes a while, so from :data:`BACKGROUND_BUILD_MIN` vectors it runs in a
thread of its own on a snapshot, while searches scan exactly; writes made meanwhile are
logged and applied when the index is installed. A failed build clears itself, so searches
keep scanning and the next one may retry.

New vectors wait in a pending buffer that searches scan exactly; from
:data:`PENDING_FLUSH` of them a background thread moves them into the graph in small
batches, so no write waits for the graph. usearch calls on one index must not overlap
(each call uses the same per-thread scratch space), so every call into the graph holds
``graph_lock``, and a batch is small enough that a search waits at most a few ms for it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..mirror.mirror import Mirror
from ..sqlite.database import Database
from .graph import HNSW_SETTINGS, build_graph, expansion_for, load_graph, overfetch, save_graph
from .vectors import rowdot

__all__ = ["BACKGROUND_BUILD_MIN", "FLUSH_BATCH", "HNSW_SETTINGS", "PENDING_FLUSH", "HnswCache"]

# New vectors wait in a pending buffer and join the HNSW graph in batches from this many:
# one insert into the graph costs ~1 ms at 100k vectors. Until they join, searches scan
# the buffer exactly and merge it in, so a new document is found at once.
PENDING_FLUSH = 1024
FLUSH_BATCH = 8  # vectors added to the graph per hold of its lock by the background flush
BACKGROUND_BUILD_MIN = 20_000  # builds of this many vectors run in a thread of their own; smaller ones on one thread
_NO_POSITIONS = np.zeros(0, dtype=np.int64)


def _members(sorted_positions: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Which of ``cand`` are in ``sorted_positions`` (ascending, non-empty): a binary search each."""
    idx = np.searchsorted(sorted_positions, cand)
    idx[idx >= sorted_positions.size] = 0
    return sorted_positions[idx] == cand



class HnswCache:
    """The HNSW index of one collection, its pending buffer, its background build and flush.

    Every method runs under the collection's ``lock`` (a background build takes it to
    install its index; the background flush to take and settle its batches). ``mirror()``
    gives the current mirror (it is replaced on compaction and reload). ``index`` is the
    usearch ``Index`` (None until built); ``pending`` the rowids added since it last took
    new vectors in (some may be in the graph already while a flush runs); ``building``
    whether a background build runs; ``len()`` the vectors in the graph. ``rebuilds``
    counts the graphs built in this process (a saved index reused is not one).
    ``graph_lock`` is held by every call into ``index`` (usearch calls on one index must not
    overlap); ``dirty`` says the graph changed since it was loaded or built (``close()``
    saves it then).
    """

    def __init__(self, database: Database, mirror: Callable[[], Mirror], lock: threading.RLock):
        self._database = database
        self._mirror = mirror
        self._lock = lock
        self.graph_lock = threading.Lock()  # held by every call into the usearch index
        self.index: Any = None
        self.pending: set[int] = set()
        self.rebuilds = 0
        self.dirty = False
        self._builder: threading.Thread | None = None
        self._build_log: tuple[set[int], set[int]] | None = None  # (added, removed) rowids since its snapshot
        self._flusher: threading.Thread | None = None
        self._closed = False
        self._stopping = False  # close() is waiting: the background flush ends after its batch
        self.failed: BaseException | None = None  # what the last background build raised

    def __len__(self) -> int:
        if self.index is None:
            return 0
        with self.graph_lock:
            return len(self.index)

    @property
    def building(self) -> bool:
        """Whether a background build is running."""
        return self._builder is not None

    # ------------------------------------------------------------------ building

    def ensure(self, threads: int | None = None) -> bool:
        """True when the index is ready; otherwise it is being built in the background (or,
        in a collection that never held a vector, there is nothing to build).

        A build of :data:`BACKGROUND_BUILD_MIN` vectors or more runs in a thread of its own
        on ``threads`` cores (default: all but one, so a build a search started leaves a
        core to the caller); a smaller one runs here."""
        if self.index is not None:
            return True
        if self._builder is not None or self._database.dim is None:
            return False
        if self._database.path and self.load_saved():
            return True
        m = self._mirror()
        alive = m.live_positions()
        keys = m.rowid[alive].astype(np.uint64)
        # No copy of the vectors under the lock: a mirror row, once written, never changes
        # (appends take new rows; a compaction or a growth makes new arrays), so the build
        # reads the rows of the heap from its own thread, a chunk at a time.
        vecs, rows = m.heap, m.slot[alive]
        self.failed = None
        if alive.size < BACKGROUND_BUILD_MIN:
            # One thread: a threaded build inserts in a racy order (a small build gives the
            # same graph every time), and a small build is quick anyway.
            self.rebuilds += 1
            self._install(self.build_graph(keys, vecs, 1, rows), set(), set())
            return True
        self._build_log = (set(), set())
        builder = threading.Thread(target=self._build_in_background,
                                   args=(keys, vecs, threads or max(1, (os.cpu_count() or 1) - 1), rows),
                                   name="vxmem-index-build", daemon=True)
        self._builder = builder
        self.rebuilds += 1
        builder.start()
        return False

    def raise_failed(self) -> None:
        """Raise what the last background build raised, if no index came of it since."""
        failed, self.failed = self.failed, None
        if failed is not None and self.index is None:
            raise failed

    def build_graph(self, keys: np.ndarray, vecs: np.ndarray, threads: int, rows: np.ndarray) -> Any:
        """The graph of a build (a method, so a test can hold or fail a build)."""
        assert self._database.dim is not None
        return build_graph(self._database.dim, keys, vecs, threads, rows)

    def wait(self, closing: bool = False) -> None:
        """Wait for a background build, and then a background flush, to finish (call it
        without holding the lock). ``closing`` stops the flush after its current batch
        instead: close() adds what is left with every core, which is quicker."""
        builder = self._builder
        if builder is not None:
            builder.join()
        self._stopping = closing
        flusher = self._flusher
        if flusher is not None:
            flusher.join()

    def _build_in_background(self, keys: np.ndarray, vecs: np.ndarray, threads: int,
                             rows: np.ndarray) -> None:
        try:
            index = self.build_graph(keys, vecs, threads, rows)
        except BaseException as exc:  # searches keep scanning exactly; the next one may try again
            with self._lock:
                if self._builder is threading.current_thread():
                    self._builder = self._build_log = None
                    self.failed = exc
            raise
        with self._lock:
            if self._closed or self._builder is not threading.current_thread() or self._build_log is None:
                return
            added, removed = self._build_log
            self._install(index, added, removed)

    def _install(self, index: Any, added: set[int], removed: set[int]) -> None:
        if removed:
            index.remove(np.array(sorted(removed), dtype=np.uint64))
        self.index = index
        self.dirty = True
        self.pending = set(added)
        self._builder = None
        self._build_log = None
        self._maybe_flush()

    # ------------------------------------------------------------------ following writes

    def follow(self, added: list[int], removed: list[int]) -> None:
        """Take in a committed write: rowids ``added`` and ``removed``. Never waits for the
        graph unless a row it holds is removed (a batch of the flush, a few ms at most)."""
        if self._build_log is not None:
            log_added, log_removed = self._build_log
            for k in removed:
                if k in log_added:
                    log_added.discard(k)
                else:
                    log_removed.add(k)
            log_added.update(added)
        if self.index is not None and (added or removed):
            pending = self.pending
            in_index = [k for k in removed if k not in pending]  # a batch being flushed settles its own
            pending.difference_update(removed)
            if in_index:
                with self.graph_lock:
                    self.index.remove(np.array(in_index, dtype=np.uint64))
            pending.update(added)
            self.dirty = True
            self._maybe_flush()

    def _maybe_flush(self) -> None:
        """Start the background flush once :data:`PENDING_FLUSH` vectors wait."""
        if len(self.pending) >= PENDING_FLUSH and self._flusher is None and not self._closed:
            self._flusher = threading.Thread(target=self._flush_in_background, name="vxmem-index-flush",
                                             daemon=True)
            self._flusher.start()

    def add_to_graph(self, index: Any, keys: np.ndarray, vecs: np.ndarray, threads: int = 1) -> None:
        """Add the rows of ``keys`` the graph does not hold yet (a method, so a test can hold
        the background flush)."""
        with self.graph_lock:
            new = ~np.asarray(index.contains(keys), dtype=bool).reshape(-1)
            if new.any():
                index.add(keys[new], vecs[new], threads=threads)

    def _flush_in_background(self) -> None:
        try:
            order: list[int] = []
            while True:
                with self._lock:
                    index = self.index
                    if index is None or self._closed or self._stopping or not self.pending:
                        return
                    if not order:
                        order = sorted(self.pending, reverse=True)
                    batch: list[int] = []
                    while order and len(batch) < FLUSH_BATCH:
                        k = order.pop()
                        if k in self.pending:
                            batch.append(k)
                    if not batch:
                        continue
                    m = self._mirror()
                    keys = np.array(batch, dtype=np.int64)
                    vecs = m.vectors(m.rowid_pos[keys])  # a copy: the mirror may grow meanwhile
                self.add_to_graph(index, keys.astype(np.uint64), vecs)
                with self._lock:
                    if self.index is not index:  # reset meanwhile: the batch went into an old graph
                        return
                    now = self._mirror().rowid_pos
                    gone = [k for k in batch if now.value(k) < 0]  # deleted while it was being added
                    if gone:
                        with self.graph_lock:
                            index.remove(np.array(gone, dtype=np.uint64))
                    self.pending.difference_update(batch)
        finally:
            with self._lock:
                if self._flusher is threading.current_thread():
                    self._flusher = None

    def flush(self) -> None:
        """Move every pending vector into the graph now (under the lock; a background flush
        running meanwhile skips what is already in)."""
        self._flush_pending()

    def _flush_pending(self) -> None:
        if self.pending and self.index is not None:
            m = self._mirror()
            keys = np.array(sorted(self.pending), dtype=np.int64)
            self.add_to_graph(self.index, keys.astype(np.uint64), m.vectors(m.rowid_pos[keys]), os.cpu_count() or 1)
        self.pending.clear()

    def reset(self) -> None:
        """Forget the index (a read-only handle whose data a writer changed); an
        unfinished build or flush is for the old data."""
        self.index = None
        self._builder = self._build_log = None
        self.pending.clear()

    # ------------------------------------------------------------------ searching

    def topk(self, q: np.ndarray, positions: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The ``k`` best of ``positions`` (ascending) by cosine, best first; None to fall
        back to an exact scan (still building, or the filter keeps too few of the graph's
        answers).

        The graph proposes :func:`overfetch` candidates, the pending buffer adds its rows,
        and every candidate is scored exactly against the mirror's vectors: the scores are
        the exact scan's, and only a row the graph never proposed can be missed. Nothing
        here is O(rows): membership in ``positions`` is a binary search per candidate.
        """
        if not self.ensure():
            return None
        m = self._mirror()
        everyone = positions.size == m.n_alive  # every live row selected: no membership test
        pend = self._pending_positions(m)
        if pend.size and not everyone:
            pend = pend[_members(positions, pend)]
        fetch = overfetch(k, m.n_alive / positions.size)
        while True:
            with self.graph_lock:
                expansion = expansion_for(len(self.index))
                if self.index.expansion_search != expansion:
                    self.index.expansion_search = expansion
                matches = self.index.search(q, fetch, threads=1)
            keys = np.asarray(matches.keys, dtype=np.int64)
            pos = m.rowid_pos.get(keys[keys >= 0])
            pos = pos[pos >= 0]  # deleted since the graph took them
            if not everyone:
                pos = pos[_members(positions, pos)]
            if pos.size >= k or fetch >= len(self.index):
                break
            if fetch > max(m.n_alive // 2, 4 * k):
                return None  # so selective a filter is cheaper to scan
            fetch *= 4
        if pend.size:  # the graph's keys are unique, so without a pending row pos already is
            pos = np.union1d(pos, pend)  # a row being flushed can be in both
        sims = rowdot(m.vectors(pos), q)
        order = np.lexsort((pos, -sims))[:k]
        return pos[order], sims[order]

    def _pending_positions(self, m: Mirror) -> np.ndarray:
        if not self.pending:
            return _NO_POSITIONS
        pos = m.rowid_pos[np.fromiter(self.pending, dtype=np.int64, count=len(self.pending))]
        return pos[pos >= 0]

    # ------------------------------------------------------------------ the file

    def load_saved(self) -> bool:
        """Load the saved index file if it is provably this database's (see
        :func:`~vxmem.store.vector.graph.load_graph`), and take in what was written since it
        was saved (deleted rows removed, inserted ones queued as pending); otherwise False,
        and the caller rebuilds."""
        got = load_graph(self._database, self._mirror())
        if got is None:
            return False
        self.index, self.pending, self.dirty = got
        self._maybe_flush()
        return True

    def close(self) -> None:
        """Save the index if it changed since it was loaded or built, and stop taking a
        background build in. The index is a cache: when it cannot be saved (a full disk, an
        unwritable directory) nothing is raised and the next open rebuilds it."""
        self._closed = True
        db = self._database
        if self.index is None or not self.dirty or not db.path or db.read_only:
            return
        try:
            self._save()
        except Exception:  # noqa: BLE001 - a cache that could not be saved is only rebuilt later
            pass

    def _save(self) -> None:
        """Write the index and its sidecar beside the database (see
        :func:`~vxmem.store.vector.graph.save_graph`), every pending vector added first."""
        self._flush_pending()
        save_graph(self.index, self.graph_lock, self._database)
        self.dirty = False
