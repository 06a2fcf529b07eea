"""The usearch HNSW index over the collection's vectors: a cache of the database.

Above ``exact_threshold`` selected rows a search goes through this index, with an
over-fetch that grows until ``limit`` rows pass the filter. The index is never the truth:
it is built lazily on first need, saved beside the database on ``close()``, and rebuilt
from the database when its file is missing, belongs to another database or is older
than the database (see the sidecar in :mod:`vxmem.store.database`), or when it is not the
file the sidecar describes (its size and CRC-32), or a sample of its vectors differs
from the database's: a foreign or damaged file never gives a wrong answer.

A large build takes minutes, so from :data:`BACKGROUND_BUILD_MIN` vectors it runs in a
thread of its own on a snapshot, while searches scan exactly; writes made meanwhile are
logged and applied when the index is installed. A failed build clears itself, so searches
keep scanning and the next one may retry.
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

from .database import Database, index_files, read_sidecar
from .mirror import Mirror

# New vectors wait in a pending buffer and join the HNSW graph in batches of this many:
# one insert into the graph costs ~2 ms at 100k vectors, a batch much less each. Until
# they join, searches scan the buffer exactly and merge it in, so a new document is found
# at once.
PENDING_FLUSH = 1024
BACKGROUND_BUILD_MIN = 20_000  # HNSW builds of at least this many vectors run in a background thread
THREADED_BUILD_MIN = 50_000  # below this a build uses one thread: the same graph every time
VERIFY_SAMPLE = 16  # stored vectors compared with the database's when a saved index is loaded
_CHUNK = 1 << 22


def file_digest(path: str) -> tuple[int, int]:
    """(size, CRC-32) of a file, read in chunks (about 1 GB/s: 0.2 s for a 100k index)."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


def _new_index(dim: int) -> Any:
    # onnxruntime (the default models' runtime) imported after usearch's extension crashes the
    # interpreter: load it first, here, where vxmem first needs usearch. Not at import time: a
    # process that loaded onnxruntime hangs in a forked child's exit, and a hashing-only one
    # that never builds an index need not pay that.
    from ..onnx import preload

    preload()
    from usearch.index import Index

    return Index(ndim=dim, metric="ip", dtype="f32", connectivity=16, expansion_add=128, expansion_search=128)


def build_graph(dim: int, keys: np.ndarray, vecs: np.ndarray, threads: int) -> Any:
    """A new usearch index holding ``vecs`` under ``keys`` (rowids)."""
    index = _new_index(dim)
    if keys.size:
        index.add(keys, vecs, threads=threads)
    return index


class HnswCache:
    """The HNSW index of one collection, its pending buffer and its background build.

    Every method runs under the collection's ``lock`` (a background build takes it to
    install its index). ``mirror()`` gives the current mirror (it is replaced on
    compaction and reload). ``index`` is the usearch ``Index`` (None until built);
    ``pending`` the rowids added since it last took new vectors in; ``building`` whether
    a background build runs; ``len()`` the vectors in the graph.
    """

    def __init__(self, database: Database, mirror: Callable[[], Mirror], lock: threading.RLock):
        self._database = database
        self._mirror = mirror
        self._lock = lock
        self.index: Any = None
        self.pending: set[int] = set()
        self._dirty = False
        self._builder: threading.Thread | None = None
        self._build_log: tuple[set[int], set[int]] | None = None  # (added, removed) rowids since its snapshot
        self._closed = False

    def __len__(self) -> int:
        return 0 if self.index is None else len(self.index)

    @property
    def building(self) -> bool:
        """Whether a background build is running."""
        return self._builder is not None

    # ------------------------------------------------------------------ building

    def ensure(self, background: bool = True) -> bool:
        """True when the index is ready; otherwise it is being built in the background (or,
        in a collection that never held a vector, there is nothing to build)."""
        if self.index is not None:
            return True
        if self._builder is not None or self._database.dim is None:
            return False
        if self._database.path and self.load_saved():
            return True
        m = self._mirror()
        alive = m.live_positions()
        keys, vecs = m.rowid[alive].astype(np.uint64), m.vecs[alive]
        if alive.size < BACKGROUND_BUILD_MIN or not background:
            # A threaded build inserts in a racy order; small builds are quick anyway.
            threads = 1 if alive.size < THREADED_BUILD_MIN else (os.cpu_count() or 1)
            self._install(self.build_graph(keys, vecs, threads), set(), set())
            return True
        self._build_log = (set(), set())
        builder = threading.Thread(target=self._build_in_background, args=(keys, vecs.copy()),
                                   name="vxmem-index-build", daemon=True)
        self._builder = builder
        builder.start()
        return False

    def build_graph(self, keys: np.ndarray, vecs: np.ndarray, threads: int) -> Any:
        """The graph of a build (a method, so a test can hold or fail a build)."""
        assert self._database.dim is not None
        return build_graph(self._database.dim, keys, vecs, threads)

    def wait(self) -> None:
        """Wait for a background build to finish (call it without holding the lock)."""
        builder = self._builder
        if builder is not None:
            builder.join()

    def _build_in_background(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        try:
            index = self.build_graph(keys, vecs, max(1, (os.cpu_count() or 1) - 1))  # one core left free
        except BaseException:  # searches keep scanning exactly; the next one may try again
            with self._lock:
                if self._builder is threading.current_thread():
                    self._builder = self._build_log = None
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
        if len(self.pending) >= PENDING_FLUSH:
            self._flush_pending()

    # ------------------------------------------------------------------ following writes

    def follow(self, added: list[int], removed: list[int]) -> None:
        """Take in a committed write: rowids ``added`` and ``removed``."""
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
            in_index = [k for k in removed if k not in pending]
            pending.difference_update(removed)
            if in_index:
                self.index.remove(np.array(in_index, dtype=np.uint64))
            pending.update(added)
            if len(pending) >= PENDING_FLUSH:
                self._flush_pending()
            self._dirty = True

    def _flush_pending(self) -> None:
        if self.pending and self.index is not None:
            m = self._mirror()
            keys = np.array(sorted(self.pending), dtype=np.uint64)
            vecs = m.vecs[[m.pos_of_rowid[int(r)] for r in keys]]
            self.index.add(keys, vecs, threads=os.cpu_count() or 1)
        self.pending.clear()

    def reset(self) -> None:
        """Forget the index (a read-only handle whose data a writer changed); an
        unfinished build is for the old data."""
        self.index = None
        self._builder = self._build_log = None
        self.pending.clear()

    # ------------------------------------------------------------------ searching

    def topk(self, q: np.ndarray, positions: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The ``k`` best of ``positions`` by cosine, best first, through the graph and the
        pending buffer; None to fall back to an exact scan (still building, or the filter
        keeps too few of the graph's answers)."""
        if not self.ensure():
            return None
        m = self._mirror()
        allowed = np.zeros(m.n, dtype=bool)
        allowed[positions] = True
        pend = np.array([m.pos_of_rowid[r] for r in self.pending], dtype=np.int64)
        pend = pend[allowed[pend]] if pend.size else pend
        pend_sims = m.vecs[pend] @ q if pend.size else np.zeros(0, dtype=np.float32)
        fetch = max(2 * k, int(math.ceil(k * m.n_alive / positions.size * 2)))
        while fetch <= max(m.n_alive // 2, 4 * k):
            matches = self.index.search(q, fetch, exact=False)
            keys = np.asarray(matches.keys, dtype=np.int64)
            dists = np.asarray(matches.distances, dtype=np.float32)
            pos = np.array([m.pos_of_rowid.get(int(key), -1) for key in keys], dtype=np.int64)
            ok = pos >= 0
            ok[ok] = allowed[pos[ok]]
            if ok.sum() >= k:
                pos = np.concatenate([pos[ok][:k], pend])
                sims = np.concatenate([(1.0 - dists[ok])[:k], pend_sims]).astype(np.float32)
                order = np.lexsort((pos, -sims))[:k]
                return pos[order], sims[order]
            fetch *= 4
        return None

    # ------------------------------------------------------------------ the file

    def load_saved(self) -> bool:
        """Load the saved index file if it belongs to this database at this state, is the
        very file its sidecar describes, and holds the database's vectors (a sample of
        :data:`VERIFY_SAMPLE` is compared); otherwise False, and the caller rebuilds."""
        db = self._database
        if db.path is None or db.dim is None:
            return False
        side = read_sidecar(db.path)
        m = self._mirror()
        n_alive = m.n_alive
        if (side is None or side.get("uid") != db.uid or side.get("generation") != db.generation
                or side.get("count") != n_alive or side.get("dim") != db.dim):
            return False
        idx_path = index_files(db.path)[0]
        try:
            if file_digest(idx_path) != (side.get("size"), side.get("crc32")):
                return False
            index = _new_index(db.dim)
            index.load(idx_path)
            if len(index) != n_alive or index.ndim != db.dim or not self._holds_mirror(index, m):
                return False
        except (OSError, ValueError, RuntimeError, TypeError):
            return False
        self.index = index
        self._dirty = False
        self.pending.clear()
        return True

    @staticmethod
    def _holds_mirror(index: Any, m: Mirror) -> bool:
        """Whether ``index`` holds the mirror's vectors under their rowids, on a sample."""
        alive = m.live_positions()
        if alive.size == 0:
            return True
        pos = alive[np.linspace(0, alive.size - 1, min(VERIFY_SAMPLE, alive.size)).astype(np.int64)]
        keys = m.rowid[pos].astype(np.uint64)
        if not np.all(index.contains(keys)):
            return False
        got = np.asarray(index.get(keys), dtype=np.float32).reshape(len(keys), -1)
        return got.shape == (len(keys), m.vecs.shape[1]) and bool(np.allclose(got, m.vecs[pos], atol=1e-6))

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
            self.index.save(tmp)
            size, crc = file_digest(tmp)
            with open(side_tmp, "w") as f:
                json.dump({"uid": db.uid, "generation": db.generation, "count": self._mirror().n_alive,
                           "dim": db.dim, "size": size, "crc32": crc}, f)
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
