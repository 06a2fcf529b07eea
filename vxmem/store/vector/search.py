"""The store's search primitives: a mode's top candidates, unit vectors, and the exact top-k scan."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..mirror.mirror import ANY_SESSION, Mirror, SessionArg
from .vectors import rowdot


class Candidates(NamedTuple):
    """The top candidates of one search mode, best first for dense and lexical, in position
    order for hybrid: mirror ``positions``, their ``relevance`` (the mode's score) and the
    raw ``dense`` cosine and ``lexical`` BM25 of each (NaN where a mode did not look)."""

    positions: np.ndarray
    relevance: np.ndarray
    dense: np.ndarray
    lexical: np.ndarray


_TINY = np.nextafter(0.0, 1.0)


def unit_rows(x: np.ndarray, peaks: np.ndarray | None = None) -> np.ndarray:
    """Rows of a float64 matrix scaled to unit length, as float32; all-zero rows stay zero.

    Each row is first divided by its largest magnitude (``peaks``, when the caller has it),
    so a row of 1e20s or 1e-25s keeps its direction (in float32, or squared in float64, it
    would overflow or vanish).
    """
    # ndarray methods and ufuncs, not np.max / np.linalg.norm: their Python wrappers were a
    # third of the time of one remember()'s row (norm computes this very sum of squares).
    if x.shape[0] == 1 and x.shape[1]:  # one row (a remember()): the same steps on a vector, half the time
        row = x[0]
        top = float(np.abs(row).max() if peaks is None else peaks[0])
        if top == 0.0:
            return np.zeros(x.shape, dtype=np.float32)
        y = row / top
        return (y / math.sqrt(float(np.square(y).sum()))).astype(np.float32)[None, :]
    # An all-zero row's 0 becomes the smallest float64 (0 / it is 0), no other row's changes:
    # its peak is at least that, and its norm at least 1.
    if peaks is not None:
        peak = peaks.reshape(-1, 1).copy()
    else:
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


