"""A session's rows laid out together, so a session's scan reads one block of vectors.

Written in one process, a session's rows lie scattered over the mirror's heap; a mirror
file lays each session's rows out together. :class:`SessionBlock` scans runs that lie
together in place and gathers the rest into copies (see ``Mirror.session_block``).
"""

from __future__ import annotations

import numpy as np

from ..vector.vectors import rowdot

_NO_POSITIONS = np.zeros(0, dtype=np.int64)

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
