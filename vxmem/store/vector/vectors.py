"""The mirror's vectors: the dtypes a process may hold them in, and the dot product of every scan.

SQLite always keeps float32 vectors; the mirror holds float32 or, at half the memory,
float16 (:data:`VECTOR_DTYPES`). :func:`rowdot` is the one row-wise dot product the exact
scans, the session blocks and the HNSW re-scoring share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
    that keep spinning afterwards, and when the cores are busy the whole recall then waits for a
    scheduler time slice (8 ms per recall instead of 0.4 with one core loaded).
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
