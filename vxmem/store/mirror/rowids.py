"""A value per rowid, sized by the rowids held: an array indexed by rowid while they are dense, sorted pairs when not.

A file store's rowids run 1..n, where an array indexed by rowid is the fastest map there is
(one gather). A PostgreSQL handle with ``scope=user`` holds a user's hundred rows whose rowids
lie anywhere up to the collection's newest: an array up to the largest would cost 8 MB per
user at a million memories. :class:`RowidMap` keeps the array while it is at most
:data:`SPREAD` times the rowids held (plus :data:`SLACK`), and otherwise the rowids sorted
beside their values, read by binary search.
"""

from __future__ import annotations

import numpy as np

SPREAD = 4  # an array indexed by rowid may be this many times the rowids held ...
SLACK = 1024  # ... plus this many slots, before the map keeps sorted pairs instead

_NO_ROWIDS = np.zeros(0, dtype=np.int64)


class RowidMap:
    """An int64 value per rowid (``missing`` for a rowid never set), read many at a time.

    Dense: ``_dense[rowid]``. Sparse: ``_keys[: _n]`` (ascending) and ``_vals[: _n]``. A rowid
    once set stays a key (set it to ``missing`` to clear it), so ``held`` bounds the map's size.
    """

    __slots__ = ("missing", "held", "_dense", "_keys", "_vals", "_n")

    def __init__(self, missing: int = -1) -> None:
        self.missing = missing
        self.held = 0  # rowids set so far (the dense array's may include cleared ones)
        self._dense: np.ndarray | None = np.full(64, missing, dtype=np.int64)
        self._keys = self._vals = _NO_ROWIDS
        self._n = 0

    @classmethod
    def of(cls, rowids: np.ndarray, values: np.ndarray, missing: int = -1) -> RowidMap:
        """A map of ``rowids`` (distinct) to ``values``."""
        got = cls(missing)
        got._take(np.asarray(rowids, dtype=np.int64), np.asarray(values, dtype=np.int64))
        return got

    @classmethod
    def of_array(cls, by_rowid: np.ndarray, missing: int = 0) -> RowidMap:
        """A map of an array indexed by rowid (taken as it is while dense)."""
        held = int(np.count_nonzero(by_rowid != missing))
        if by_rowid.size <= SPREAD * held + SLACK:
            got = cls(missing)
            got._dense, got.held = by_rowid, held
            return got
        keys = np.flatnonzero(by_rowid != missing)
        return cls.of(keys, by_rowid[keys], missing)

    @property
    def dense(self) -> bool:
        """Whether the map is an array indexed by rowid."""
        return self._dense is not None

    @property
    def nbytes(self) -> int:
        """The bytes of the map's arrays."""
        if self._dense is not None:
            return int(self._dense.nbytes)
        return int(self._keys.nbytes + self._vals.nbytes)

    def __getitem__(self, rowids: np.ndarray) -> np.ndarray:
        """The value of each of ``rowids`` (an array of rowids; ``missing`` where none is set)."""
        return self.get(np.asarray(rowids, dtype=np.int64).reshape(-1)).reshape(np.shape(rowids))

    def get(self, rowids: np.ndarray, ascending: bool = False) -> np.ndarray:
        """The value of each of ``rowids`` (``ascending``: they are sorted, which saves a pass)."""
        d = self._dense
        if d is not None:
            top = (rowids[-1] if ascending else rowids.max()) if rowids.size else -1
            if top < d.size:
                return d[rowids]
            inside = rowids < d.size
            return np.where(inside, d[np.where(inside, rowids, 0)], self.missing)
        if self._n == 0:
            return np.full(rowids.shape, self.missing, dtype=np.int64)
        keys = self._keys[: self._n]
        i = np.minimum(np.searchsorted(keys, rowids), self._n - 1)
        return np.where(keys[i] == rowids, self._vals[i], self.missing)

    def value(self, rowid: int) -> int:
        """The value of one rowid (``missing`` where none is set)."""
        d = self._dense
        if d is not None:
            return int(d[rowid]) if rowid < d.size else self.missing
        i = int(np.searchsorted(self._keys[: self._n], rowid))
        return int(self._vals[i]) if i < self._n and self._keys[i] == rowid else self.missing

    def set(self, rowid: int, value: int) -> None:
        """Set one rowid's value (a new rowid is mostly the largest yet: an append)."""
        d = self._dense
        if d is not None:
            if rowid >= d.size and not self._grow(rowid, 1):
                self.set(rowid, value)
                return
            d = self._dense
            assert d is not None
            self.held += int(d[rowid] == self.missing and value != self.missing)
            d[rowid] = value
            return
        n = self._n
        i = n if n == 0 or rowid > self._keys[n - 1] else int(np.searchsorted(self._keys[:n], rowid))
        if i < n and self._keys[i] == rowid:
            self._vals[i] = value
            return
        if n == self._keys.size:
            if max(rowid, int(self._keys[n - 1]) if n else 0) + 1 <= SPREAD // 2 * (n + 1) + SLACK:
                self._to_dense()  # the rowids grew dense again (half the bound: no flapping)
                self.set(rowid, value)
                return
            room = max(16, 2 * n)
            self._keys, self._vals = np.resize(self._keys, room), np.resize(self._vals, room)
        self._keys[i + 1: n + 1] = self._keys[i:n].copy()
        self._vals[i + 1: n + 1] = self._vals[i:n].copy()
        self._keys[i], self._vals[i] = rowid, value
        self._n = n + 1
        self.held += 1

    def add(self, rowids: np.ndarray) -> None:
        """Add 1 to the value of each of ``rowids`` per time it occurs (a count per rowid)."""
        if rowids.size == 0:
            return
        rowids = np.asarray(rowids, dtype=np.int64)
        top = int(rowids.max())
        d = self._dense
        if d is not None and top + 1 <= SPREAD * (self.held + rowids.size) + SLACK:  # it may stay dense
            counts = np.bincount(rowids)
            fresh = counts > 0
            m = min(counts.size, d.size)
            fresh[:m] &= d[:m] == self.missing
            held = self.held + int(np.count_nonzero(fresh))
            if top + 1 <= SPREAD * held + SLACK:
                if counts.size > d.size:
                    d = self._resized(max(counts.size, min(2 * d.size, SPREAD * held + SLACK)))
                d[: counts.size] += counts
                self.held = held
                return
        if self._dense is not None:
            self._to_sparse()
        self._merge(*np.unique(rowids, return_counts=True))

    def _merge(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Add ``counts`` to the values of ``keys`` (distinct, ascending) in the sorted pairs."""
        n = self._n
        have, vals = self._keys[:n], self._vals[:n].copy()
        i = np.minimum(np.searchsorted(have, keys), max(n - 1, 0))
        found = have[i] == keys if n else np.zeros(keys.size, dtype=bool)
        vals[i[found]] += counts[found]
        new = ~found
        merged_keys = np.concatenate([have, keys[new]])
        order = np.argsort(merged_keys, kind="stable")
        self._keys = merged_keys[order]
        self._vals = np.concatenate([vals, self.missing + counts[new]])[order]
        self._n = self._keys.size
        self.held += int(np.count_nonzero(new))
        if self._keys[-1] + 1 <= SPREAD // 2 * self.held + SLACK:
            self._to_dense()

    def to_array(self, size: int) -> np.ndarray:
        """The values of rowids 0..size-1 as one array indexed by rowid (a copy)."""
        if self._dense is not None:
            out = np.full(size, self.missing, dtype=np.int64)
            m = min(size, self._dense.size)
            out[:m] = self._dense[:m]
            return out
        out = np.full(size, self.missing, dtype=np.int64)
        keys = self._keys[: self._n]
        inside = keys < size
        out[keys[inside]] = self._vals[: self._n][inside]
        return out

    # ------------------------------------------------------------------ layout

    def _take(self, rowids: np.ndarray, values: np.ndarray) -> None:
        top = int(rowids.max(initial=-1))
        self.held = int(rowids.size)
        if top + 1 <= SPREAD * rowids.size + SLACK:
            d = np.full(max(64, min(2 * (top + 1), SPREAD * rowids.size + SLACK)), self.missing, dtype=np.int64)
            d[rowids] = values
            self._dense = d
            return
        order = np.argsort(rowids, kind="stable")
        self._dense, self._keys, self._vals, self._n = None, rowids[order], values[order], rowids.size

    def _grow(self, rowid: int, more: int) -> bool:
        """Make the dense array hold ``rowid`` if it stays within bounds with ``more`` rowids
        held; otherwise switch to sorted pairs. Whether the array still is the map."""
        d = self._dense
        assert d is not None
        bound = SPREAD * (self.held + more) + SLACK
        if rowid + 1 > bound:
            self._to_sparse()
            return False
        self._resized(max(rowid + 1, min(2 * d.size, bound)))
        return True

    def _resized(self, size: int) -> np.ndarray:
        """The dense array, grown to ``size`` slots (the new ones ``missing``)."""
        d = self._dense
        assert d is not None
        grown = np.full(size, self.missing, dtype=np.int64)
        grown[: d.size] = d
        self._dense = grown
        return grown

    def _to_dense(self) -> None:
        keys, vals = self._keys[: self._n], self._vals[: self._n]
        self._keys = self._vals = _NO_ROWIDS
        self._n = 0
        self._take(keys, vals)

    def _to_sparse(self) -> None:
        d = self._dense
        assert d is not None
        keys = np.flatnonzero(d != self.missing)
        self._dense, self._keys, self._vals, self._n = None, keys, d[keys], keys.size
        self.held = int(keys.size)
