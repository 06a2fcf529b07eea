"""The usearch HNSW index over the collection's vectors: a cache of the database.

Above ``exact_threshold`` selected rows a search goes through this index: the graph
proposes a few times ``limit`` candidates (more when a filter keeps few of them), and
each is scored exactly against the mirror's vectors, so the scores are the exact scan's
and only a row the graph never proposed can be missed (recall@10 against the exact top
10 is measured in ``benchmarks/bench_memory.py``).

The index is never the truth: it is built lazily on first need and saved beside the
database on ``close()``. A saved file is loaded when it is provably this database's: the
sidecar (see :mod:`vxmem.store.database`) names the database (``uid``), the generation it
was saved at, its settings and its own size and CRC-32, and a sample of its vectors is
compared with the database's. The rows written since that generation (read from the
change log, ``vx_changes``) are then taken in: deleted ones removed, new ones queued.
A file that cannot be proven this database's, or older than the change log reaches, is
rebuilt: a foreign or damaged file never gives a wrong answer.

A large build takes a while, so from :data:`BACKGROUND_BUILD_MIN` vectors it runs in a
thread of its own on a snapshot, while searches scan exactly; writes made meanwhile are
logged and applied when the index is installed. A failed build clears itself, so searches
keep scanning and the next one may retry.

New vectors wait in a pending buffer that searches scan exactly; from
:data:`PENDING_FLUSH` of them a background thread moves them into the graph in small
batches, so no write waits for the graph. usearch calls on one index must not overlap
(each call uses the same per-thread scratch space), so every call into the graph holds
``_graph_lock``, and a batch is small enough that a search waits at most a few ms for it.
"""

from __future__ import annotations

import json
import math
import os
import threading
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .database import Database
from .files import index_files, read_sidecar
from .mirror import Mirror, rowdot, spread_sample

# New vectors wait in a pending buffer and join the HNSW graph in batches from this many:
# one insert into the graph costs ~1 ms at 100k vectors. Until they join, searches scan
# the buffer exactly and merge it in, so a new document is found at once.
PENDING_FLUSH = 1024
FLUSH_BATCH = 8  # vectors added to the graph per hold of its lock by the background flush
BACKGROUND_BUILD_MIN = 20_000  # builds of this many vectors run in a thread of their own; smaller ones on one thread
BUILD_CHUNK = 8192  # vectors a build gathers and adds at a time (no copy of every vector at once)
VERIFY_SAMPLE = 16  # stored vectors compared with the database's when a saved index is loaded
_CHUNK = 1 << 22
_NO_POSITIONS = np.zeros(0, dtype=np.int64)

# The graph's settings, written into the sidecar: a file saved with others is rebuilt.
# The graph only proposes candidates: every one is re-scored exactly against the mirror's
# float32 vectors, so the scores are the exact scan's whatever it holds, and recall is
# decided by what it proposes. So it holds 8-bit vectors (dtype "i8": usearch normalises a
# vector and keeps trunc(127 x) of each component), a quarter of float32's memory, and is
# built with expansion_add 48. At 100k on bench_memory's seeded 384-d corpus, usearch
# searched directly on one thread, its top 20 re-scored as vxmem does
# (benchmarks/bench_hnsw_settings.py, one run, the machine otherwise quiet):
#
#   graph          build on 2 threads   recall@10 at expansion_search 128 / 256 / 384   p50 ms at 384
#   f32, add 128   179 s (352 CPU s)    0.953 / 0.990 / 0.995                            9.4
#   f32, add 64     88 s (172 CPU s)    0.941 / 0.982 / 0.991                            9.3
#   i8,  add 128    73 s (131 CPU s)    0.947 / 0.987 / 0.994                            4.6
#   i8,  add 64     33 s  (65 CPU s)    0.944 / 0.981 / 0.991                            6.6
#   i8,  add 48     26 s  (52 CPU s)    - / 0.981 / 0.992                                5.0
#
# Re-scoring the top 40 instead of 20 finds no more: what is missed, the graph never
# proposed. expansion_search is the search's alone (not the file's). "f32" and "f16" are
# options: set HNSW_SETTINGS["dtype"] before opening (a file saved with another dtype is
# rebuilt).
HNSW_SETTINGS: dict[str, Any] = {"metric": "ip", "dtype": "i8", "connectivity": 16, "expansion_add": 48,
                                 "expansion_search": 384}
# From EXPANSION_FROM vectors on, a search's expansion grows with the graph's size (as its
# 0.6th power), so recall holds as it grows. At 1M (bench_memory's corpus, the i8 graph
# above, top 20 re-scored, one thread, 300 queries: benchmarks/bench_hnsw_settings.py
# --scale 1000000 --connectivity 16 --expansion 384,768,1024,1216,1536, load 0.6):
#
#   expansion_search   384     768     1,024   1,216   1,536 (what the rule gives: 1,529)
#   recall@10          0.951   0.979   0.985   0.989   0.993
#   p50 ms             1.4     3.4     4.8     5.7     6.5
EXPANSION_FROM = 100_000
OVERFETCH = 2  # the graph proposes this many times k candidates (at least OVERFETCH_MIN), scaled up by a filter
OVERFETCH_MIN = 20
I8_SCALE = 127.0  # usearch's i8: trunc(127 x) of the unit vector's components


def stored_form(vecs: np.ndarray, dtype: str) -> tuple[np.ndarray, float]:
    """Unit vectors as a graph of ``dtype`` stores them, and how far a component read back
    may be from it: f32 holds the same floats; f16 rounds each component by at most 2**-11
    (plus the float32 round trip); i8 truncates 127 x, a boundary case either way."""
    if dtype == "i8":
        return np.trunc(vecs * I8_SCALE), 1.0
    return vecs, {"f32": 1e-6, "f16": 1e-3}.get(dtype, 0.0)


def file_digest(path: str) -> tuple[int, int]:
    """(size, CRC-32) of a file, read in chunks (about 1 GB/s: 0.2 s for a 100k index)."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


def settings_tag() -> str:
    """The graph's settings as the sidecar records them (expansion_search is the search's, not the file's)."""
    return ",".join(f"{k}={v}" for k, v in sorted(HNSW_SETTINGS.items()) if k != "expansion_search")


def _new_index(dim: int) -> Any:
    # onnxruntime (the default models' runtime) imported after usearch's extension crashes the
    # interpreter: load it first, here, where vxmem first needs usearch. Not at import time: a
    # process that loaded onnxruntime hangs in a forked child's exit, and a hashing-only one
    # that never builds an index need not pay that.
    from ..models.onnx import preload

    preload()
    from usearch.index import Index

    return Index(ndim=dim, **HNSW_SETTINGS)


def build_graph(dim: int, keys: np.ndarray, vecs: np.ndarray, threads: int, rows: np.ndarray) -> Any:
    """A new usearch index holding the vectors of ``keys`` (rowids): ``vecs[rows]`` (the
    mirror's heap at each position's slot), gathered a chunk at a time."""
    index = _new_index(dim)
    for a in range(0, keys.size, BUILD_CHUNK):
        b = min(a + BUILD_CHUNK, keys.size)
        index.add(keys[a:b], vecs[rows[a:b]], threads=threads)
    return index


def expansion_for(n: int) -> int:
    """The ``expansion_search`` of a graph of ``n`` vectors: :data:`HNSW_SETTINGS`' up to
    :data:`EXPANSION_FROM`, then scaled by ``(n / EXPANSION_FROM) ** 0.6``."""
    base = int(HNSW_SETTINGS["expansion_search"])
    return base if n <= EXPANSION_FROM else int(math.ceil(base * (n / EXPANSION_FROM) ** 0.6))


def overfetch(k: int, inverse_share: float) -> int:
    """How many candidates to ask the graph for, for the top ``k`` of a selection that is
    ``1 / inverse_share`` of the rows."""
    return max(OVERFETCH_MIN, int(math.ceil(k * OVERFETCH * max(1.0, inverse_share))))


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
    """

    def __init__(self, database: Database, mirror: Callable[[], Mirror], lock: threading.RLock):
        self._database = database
        self._mirror = mirror
        self._lock = lock
        self._graph_lock = threading.Lock()  # held by every call into the usearch index
        self.index: Any = None
        self.pending: set[int] = set()
        self.rebuilds = 0
        self._dirty = False
        self._builder: threading.Thread | None = None
        self._build_log: tuple[set[int], set[int]] | None = None  # (added, removed) rowids since its snapshot
        self._flusher: threading.Thread | None = None
        self._closed = False
        self._stopping = False  # close() is waiting: the background flush ends after its batch
        self.failed: BaseException | None = None  # what the last background build raised

    def __len__(self) -> int:
        if self.index is None:
            return 0
        with self._graph_lock:
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
        self._dirty = True
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
                with self._graph_lock:
                    self.index.remove(np.array(in_index, dtype=np.uint64))
            pending.update(added)
            self._dirty = True
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
        with self._graph_lock:
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
                    gone = [k for k in batch if k >= now.size or now[k] < 0]  # deleted while it was being added
                    if gone:
                        with self._graph_lock:
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
            with self._graph_lock:
                expansion = expansion_for(len(self.index))
                if self.index.expansion_search != expansion:
                    self.index.expansion_search = expansion
                matches = self.index.search(q, fetch, threads=1)
            keys = np.asarray(matches.keys, dtype=np.int64)
            keys = keys[keys < m.rowid_pos.size]
            pos = m.rowid_pos[keys]
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
        """Load the saved index file if it is provably this database's, and take in what was
        written since it was saved; otherwise False, and the caller rebuilds.

        Proof: the sidecar names this database (``uid``), these settings and this
        dimension, a generation no later than the database's, and the file's own size and
        CRC-32; the change log reaches back to that generation; after the rows it names are
        applied (deleted ones removed, inserted ones queued as pending), the graph plus the
        queue hold exactly the live rowids; and a sample of :data:`VERIFY_SAMPLE` stored
        vectors (spread over the graph, and its newest) matches the database's.
        """
        db = self._database
        if db.path is None or db.dim is None:
            return False
        side = read_sidecar(db.path)
        saved = side.get("generation") if side else None
        if (side is None or side.get("uid") != db.uid or side.get("dim") != db.dim
                or side.get("settings") != settings_tag() or type(saved) is not int or saved > db.generation):
            return False
        changes = db.changes_since(saved)
        if changes is None:  # older than the change log reaches: what changed cannot be named
            return False
        inserted, deleted = changes
        m = self._mirror()
        idx_path = index_files(db.path)[0]
        try:
            if file_digest(idx_path) != (side.get("size"), side.get("crc32")):
                return False
            index = _new_index(db.dim)
            index.load(idx_path)
            index.expansion_search = HNSW_SETTINGS["expansion_search"]
            if index.ndim != db.dim or len(index) != side.get("count"):
                return False
            if deleted:
                gone = np.array(sorted(deleted), dtype=np.uint64)
                gone = gone[np.asarray(index.contains(gone), dtype=bool)]
                if gone.size:
                    index.remove(gone)
            held = np.sort(np.asarray(index.keys, dtype=np.int64))
            live = np.sort(m.rowid[m.live_positions()])
            new = np.setdiff1d(live, held, assume_unique=True)
            if held.size + new.size != live.size or not set(new.tolist()) <= inserted:
                return False  # the graph holds a row the database has not, or misses an old one
            if not self._holds_mirror(index, m, held):
                return False
        except (OSError, ValueError, RuntimeError, TypeError):
            return False
        self.index = index
        self._dirty = bool(deleted) or bool(new.size)
        self.pending = set(new.tolist())
        self._maybe_flush()
        return True

    @staticmethod
    def _holds_mirror(index: Any, m: Mirror, keys: np.ndarray) -> bool:
        """Whether ``index`` holds the mirror's vectors under their rowids, on a sample of
        ``keys`` (ascending rowids the graph holds): spread over them, and the newest."""
        if keys.size == 0:
            return True
        sample = keys[spread_sample(keys.size, VERIFY_SAMPLE, VERIFY_SAMPLE)]
        pos = m.rowid_pos[sample]
        if np.any(pos < 0):
            return False
        got = np.asarray(index.get(sample.astype(np.uint64)), dtype=np.float32).reshape(len(sample), -1)
        want, atol = stored_form(m.vectors(pos), HNSW_SETTINGS["dtype"])
        return got.shape == want.shape and bool(np.allclose(got, want, rtol=0.0, atol=atol))

    def close(self) -> None:
        """Save the index if it changed since it was loaded or built, and stop taking a
        background build in. The index is a cache: when it cannot be saved (a full disk, an
        unwritable directory) nothing is raised and the next open rebuilds it."""
        self._closed = True
        db = self._database
        if self.index is None or not self._dirty or not db.path or db.read_only:
            return
        try:
            self._save(db.path)
        except Exception:  # noqa: BLE001 - a cache that could not be saved is only rebuilt later
            pass

    def _save(self, path: str) -> None:
        """Write the index and its sidecar beside their final names and move them into place;
        on any failure the temporary files are removed (a killed save's are removed at the
        next writable open)."""
        db = self._database
        idx_path, side_path = index_files(path)
        self._flush_pending()
        tmp, side_tmp = idx_path + ".tmp", side_path + ".tmp"
        try:
            with self._graph_lock:
                self.index.save(tmp)
                count = len(self.index)
            size, crc = file_digest(tmp)
            with open(side_tmp, "w") as f:
                json.dump({"uid": db.uid, "generation": db.generation, "count": count, "dim": db.dim,
                           "settings": settings_tag(), "size": size, "crc32": crc}, f)
            # The sidecar names the index file's content, so a kill between the two moves
            # leaves a pair that does not match: rebuilt, never trusted.
            os.replace(tmp, idx_path)
            os.replace(side_tmp, side_path)
        except BaseException:
            for name in (tmp, side_tmp):
                try:
                    os.remove(name)
                except OSError:
                    pass
            raise
        self._dirty = False
