"""Filling an empty mirror with a whole database's documents at once: what an open spends its time on."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.keys import K_FEEDBACK, K_FEEDBACK_FOLDED, K_USER, NO_KIND
from .columns import Metas, columns_of_all, latest_feedback, superseded_at
from .mirror import Mirror


def fill(mirror: Mirror, rowids: list[int], ids: list[str], texts: list[str], metas: list[dict[str, Any]],
         vectors: list[bytes]) -> None:
    """Fill an empty mirror with committed documents, as ``Mirror.append`` would one by one
    but column by column (opening a large database is this loop), with room to double.
    ``vectors`` are the float32 blobs, each checked to hold ``dim`` values."""
    assert mirror.n == 0 and mirror.dim is not None
    n = len(ids)
    mirror.reserve(2 * n)
    if n == 0:
        return
    width = 4 * mirror.dim
    step = 4096  # joined a chunk at a time: no second copy of every vector at once
    for a in range(0, n, step):
        b = min(a + step, n)
        if set(map(len, vectors[a:b])) != {width}:  # some blob is not dim floats long: name the first
            i = next(i for i in range(a, b) if len(vectors[i]) != width)
            raise ValueError(f"document {ids[i]!r} has a {len(vectors[i]) // 4}-d vector, expected {mirror.dim}")
        mirror.heap[a:b] = np.frombuffer(b"".join(vectors[a:b]), dtype=np.float32).reshape(b - a, mirror.dim)
    mirror.slot[:n] = np.arange(n)
    mirror.take_documents(np.asarray(rowids, dtype=np.int64), ids, texts, Metas(list(metas)))
    kind, ts, expires, superseded, turn, keys = columns_of_all(metas)
    mirror.kind[:n] = kind
    mirror.ts[:n] = ts
    mirror.expires[:n] = expires
    mirror.superseded[:n] = superseded
    mirror.superseded_at[:n] = np.inf
    for p in np.flatnonzero(mirror.superseded[:n]).tolist():
        mirror.superseded_at[p] = superseded_at(metas[p], True)
    mirror.turn[:n] = turn
    mirror.feedback[:n] = [bool(m.get(K_FEEDBACK)) for m in metas]
    mirror.user[:n] = [mirror.user_code(m.get(K_USER)) for m in metas]
    mem = mirror.kind[:n] != NO_KIND  # latest, as Mirror._note_times would raise it row by row
    sup = mirror.superseded_at[:n][mem]
    times = [float(np.nanmax(mirror.ts[:n][mem], initial=-np.inf)),
             float(sup[np.isfinite(sup)].max(initial=-np.inf))]
    times += [latest_feedback(m) for m, k in zip(metas, mem.tolist())
              if k and (K_FEEDBACK in m or K_FEEDBACK_FOLDED in m)]
    mirror.latest = max(mirror.latest, *times)
    codes = np.array([-1 if key is None else mirror.session_code_of_key(key) for key in keys], dtype=np.int64)
    mirror.session[:n] = codes
    mirror.index_sessions()
