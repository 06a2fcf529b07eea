"""The usearch HNSW graph: its settings, how one is made and searched, and its file.

The graph is a cache of the database (see :mod:`vxmem.store.vector.hnsw` for how a collection
keeps one). A saved file is loaded when it is provably this database's: the sidecar (see
:mod:`vxmem.store.sqlite.files`) names the database (``uid``), the generation it was saved at,
its settings and its own size and CRC-32, and a sample of its vectors is compared with
the database's. The rows written since that generation (read from the change log,
``vx_changes``) are then taken in: deleted ones removed, new ones queued. A file that
cannot be proven this database's, or older than the change log reaches, is rebuilt: a
foreign or damaged file never gives a wrong answer.
"""

from __future__ import annotations

import json
import math
import os
import threading
import zlib
from typing import Any

import numpy as np

from ..mirror.mirror import Mirror
from ..sqlite.database import Database
from ..sqlite.files import index_files, read_sidecar, remove_caches, spread_sample

BUILD_CHUNK = 8192  # vectors a build gathers and adds at a time (no copy of every vector at once)
VERIFY_SAMPLE = 16  # stored vectors compared with the database's when a saved index is loaded
_CHUNK = 1 << 22

# The graph's settings, written into the sidecar: a file saved with others is rebuilt.
# The graph only proposes candidates: every one is re-scored exactly against the mirror's
# float32 vectors, so the scores are the exact scan's whatever it holds, and recall is
# decided by what it proposes. So it holds 8-bit vectors (dtype "i8": usearch normalises a
# vector and keeps trunc(127 x) of each component), a quarter of float32's memory, and is
# built with expansion_add 48. At 100k on bench_memory's seeded 384-d corpus, usearch
# searched directly on one thread, its top 20 re-scored as vxmem does
# (benchmarks/bench_hnsw_settings.py, one run):
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
# --scale 1000000 --connectivity 16 --expansion 384,768,1024,1216,1536):
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


def new_index(dim: int) -> Any:
    """A new, empty usearch index of ``dim``-d vectors with :data:`HNSW_SETTINGS`."""
    # onnxruntime (the default models' runtime) imported after usearch's extension crashes the
    # interpreter: load it first, here, where vxmem first needs usearch. Not at import time: a
    # process that loaded onnxruntime hangs in a forked child's exit, and a hashing-only one
    # that never builds an index need not pay that.
    from ...models.onnx import preload

    preload()
    from usearch.index import Index

    return Index(ndim=dim, **HNSW_SETTINGS)


def build_graph(dim: int, keys: np.ndarray, vecs: np.ndarray, threads: int, rows: np.ndarray) -> Any:
    """A new usearch index holding the vectors of ``keys`` (rowids): ``vecs[rows]`` (the
    mirror's heap at each position's slot), gathered a chunk at a time."""
    index = new_index(dim)
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



def holds_mirror(index: Any, m: Mirror, keys: np.ndarray) -> bool:
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


def load_graph(db: Database, m: Mirror) -> tuple[Any, set[int], bool] | None:
    """The graph saved beside ``db``, if it is provably this database's, with what was
    written since it was saved taken in: the graph (deleted rows removed), the live rowids
    it does not hold (for the pending buffer), and whether it now differs from its file.
    None when it cannot be proven, and the caller rebuilds.

    Proof: the sidecar names this database (``uid``), these settings and this
    dimension, a generation no later than the database's, and the file's own size and
    CRC-32; the change log reaches back to that generation; after the rows it names are
    applied (deleted ones removed, inserted ones queued as pending), the graph plus the
    queue hold exactly the live rowids of ``m``; and a sample of :data:`VERIFY_SAMPLE`
    stored vectors (spread over the graph, and its newest) matches the database's.
    """
    if db.path is None or db.dim is None:
        return None
    side = read_sidecar(db.path)
    saved = side.get("generation") if side else None
    if side is not None and type(saved) is int and saved > db.generation and side.get("uid") == db.uid \
            and not db.read_only:
        remove_caches(db.path)  # of a history this database never reached (see loading)
        return None
    if (side is None or side.get("uid") != db.uid or side.get("dim") != db.dim
            or side.get("settings") != settings_tag() or type(saved) is not int or saved > db.generation):
        return None
    changes = db.changes_since(saved)
    if changes is None:  # older than the change log reaches: what changed cannot be named
        return None
    inserted, deleted = changes
    idx_path = index_files(db.path)[0]
    try:
        if file_digest(idx_path) != (side.get("size"), side.get("crc32")):
            return None
        index = new_index(db.dim)
        index.load(idx_path)
        index.expansion_search = HNSW_SETTINGS["expansion_search"]
        if index.ndim != db.dim or len(index) != side.get("count"):
            return None
        if deleted:
            gone = np.array(sorted(deleted), dtype=np.uint64)
            gone = gone[np.asarray(index.contains(gone), dtype=bool)]
            if gone.size:
                index.remove(gone)
        held = np.sort(np.asarray(index.keys, dtype=np.int64))
        live = np.sort(m.rowid[m.live_positions()])
        new = np.setdiff1d(live, held, assume_unique=True)
        if held.size + new.size != live.size or not set(new.tolist()) <= inserted:
            return None  # the graph holds a row the database has not, or misses an old one
        if not holds_mirror(index, m, held):
            return None
    except (OSError, ValueError, RuntimeError, TypeError):
        return None
    return index, set(new.tolist()), bool(deleted) or bool(new.size)


def _sync(path: str) -> None:
    """Flush ``path``'s data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_graph(index: Any, graph_lock: threading.Lock, db: Database) -> None:
    """Write ``index`` (every call into it under ``graph_lock``) and its sidecar beside the
    database ``db`` under temporary names and move them into place; on any failure the
    temporary files are removed (a killed save's are removed at the next writable open)."""
    assert db.path is not None
    idx_path, side_path = index_files(db.path)
    tmp, side_tmp = idx_path + ".tmp", side_path + ".tmp"
    try:
        with graph_lock:
            index.save(tmp)
            count = len(index)
        size, crc = file_digest(tmp)
        _sync(tmp)  # on the disk before it takes the name: a power loss leaves the old pair or the new
        with open(side_tmp, "w") as f:
            json.dump({"uid": db.uid, "generation": db.generation, "count": count, "dim": db.dim,
                       "settings": settings_tag(), "size": size, "crc32": crc}, f)
            f.flush()
            os.fsync(f.fileno())
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
