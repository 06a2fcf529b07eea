"""The mirror saved beside the database (``db.vxdb.mirror``), so an open reads no rows.

Reading every row of ``vx_docs`` is most of an open (1.7 s of CPU at 100k memories: SQLite
walks 200 MB of pages, then each row becomes Python objects). A writer's ``close()``
saves its mirror's live documents in a :mod:`~vxmem.store.mirror.snapshot` file instead: the
numpy columns as they lie in memory, the vectors with each session's rows together (so a
session's first recall after an open scans the rows in place instead of gathering them
from all over the file), the ids, texts and metadata texts as JSON arrays. The next open
reads that file into memory of its own (never a map of it, which another process may
change), parses the metadata only as it is read, and takes in what was
committed since from the change log, the way a read-only handle follows writers.

The file is a cache. It is used only when it is provably this database's at a state the
change log reaches from: the same ``uid``, dimension, schema version and token counter,
and a generation no later than the database's and no earlier than its oldest logged
change; the file's own size and CRC-32 must hold too. Anything else (a missing, stale,
damaged or foreign file) reads every row, as before, and the next writer's close saves a
good one. Small collections are read directly (:data:`MIN_DOCUMENTS`).
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import numpy as np

from ..sqlite.files import spread_sample
from ..sqlite.jsonio import dumps_strings, loads, loads_strings, long_digit_runs
from .columns import Metas
from .mirror import Mirror
from .snapshot import Rows, read, write

MIN_DOCUMENTS = 10_000  # below this many documents an open reads the rows (in well under 0.2 s)
_SAVED = ("rowid", "kind", "session", "user", "ts", "expires", "superseded", "superseded_at", "tokens", "turn",
          "feedback")


def save(path: str, m: Mirror, fields: dict[str, Any]) -> None:
    """Save ``m``'s live documents to ``path`` with ``fields`` (what ties it to the database)."""
    n = m.n_alive
    live = m.live_positions()
    whole = live.size == m.n  # no holes: the columns as they are, no copy
    arrays: dict[str, np.ndarray | Rows] = {}
    for name in _SAVED:
        col = getattr(m, name)
        arrays[name] = col[:n] if whole else col[live]
    plist = live.tolist()
    arrays["ids"] = _bytes(dumps_strings([m.ids[p] for p in plist]))
    arrays["texts"] = _bytes(dumps_strings([m.texts[p] for p in plist]))
    metas = [m.metas.text(p).encode() for p in plist]
    joined = b"".join(metas)
    arrays["metas"] = _bytes(joined)
    arrays["metas_at"] = at = np.r_[0, np.cumsum([len(t) for t in metas], dtype=np.int64)]
    runs = np.asarray(long_digit_runs(joined), dtype=np.int64)  # the few texts only json reads exactly
    arrays["metas_long"] = np.unique(np.searchsorted(at, runs, side="right") - 1)
    # Each session's vectors together (in position order), so an open's session blocks are
    # views of the file's pages: ``slot`` gives each position its row of ``heap``.
    order = np.argsort(m.session[live], kind="stable")
    rows = m.slot[live][order]
    slot = np.empty(n, dtype=np.int64)
    slot[order] = np.arange(n)
    arrays["slot"] = slot
    in_place = bool(np.array_equal(rows, np.arange(n)))  # already laid out so: no gather
    arrays["heap"] = m.heap[:n] if in_place else Rows(m.heap, rows)  # last: it gets the headroom
    sessions = m.session_keys  # by code
    users = sorted(m.user_codes, key=m.user_codes.__getitem__)
    latest = m.latest if math.isfinite(m.latest) else None
    write(path, {**fields, "n": n, "dim": m.dim, "sessions": sessions, "users": users, "latest": latest},
          arrays, headroom=n)


def load(path: str, expect: dict[str, Any],
         dtype: np.dtype | type = np.float32) -> tuple[Mirror, dict[str, Any]] | None:
    """The mirror saved at ``path`` and its fields, if its fields hold ``expect``'s values
    and it reads whole; otherwise None. Its vectors are ``dtype``'s: a float32 file is
    rounded into a float16 mirror (a copy), a float16 file cannot make a float32 one (None:
    the rows are read)."""
    got = read(path)
    if got is None:
        return None
    fields, arrays = got
    if any(fields.get(k) != v for k, v in expect.items()):
        return None
    try:
        return _mirror(fields, arrays, np.dtype(dtype)), fields
    except (ValueError, KeyError, TypeError, IndexError):  # a file that reads whole but does not hold a mirror
        return None


def _bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _mirror(fields: dict[str, Any], arrays: dict[str, np.ndarray], dtype: np.dtype) -> Mirror:
    n, dim = fields["n"], fields["dim"]
    if type(n) is not int or type(dim) is not int or n <= 0 or dim <= 0:
        raise ValueError("no documents")
    heap, slot = arrays["heap"], arrays["slot"]
    if heap.dtype not in (np.float32, dtype) or heap.ndim != 2 or heap.shape[1] != dim or heap.shape[0] < n:
        raise ValueError("vectors")
    if slot.dtype != np.int64 or slot.shape != (n,) or slot.min() < 0 or slot.max() >= n \
            or np.any(np.bincount(slot, minlength=n) != 1):
        raise ValueError("slots")
    ids = loads_strings(arrays["ids"].data)
    texts = loads_strings(arrays["texts"].data)
    at = arrays["metas_at"]
    if at.dtype != np.int64 or at.shape != (n + 1,) or at[0] != 0 or at[-1] != arrays["metas"].size \
            or np.any(at[1:] < at[:-1]):
        raise ValueError("metadata")
    if not len(ids) == len(texts) == n:
        raise ValueError("lists")
    m = Mirror(dim, dtype)
    cap = heap.shape[0]
    m.reserve(cap)  # the small columns, with the file's headroom
    for name in _SAVED:
        saved = arrays[name]
        col = getattr(m, name)
        if saved.shape != (n,) or saved.dtype != col.dtype:
            raise ValueError(name)
        col[:n] = saved
    if len(m.rowid) > cap or heap.dtype != dtype:  # a small file (less headroom than a fresh mirror's
        grown = np.zeros((len(m.rowid), dim), dtype=dtype)  # columns have), or float32 for a float16 mirror
        grown[:n] = heap[:n]
        heap = grown
    m.heap = heap  # the read file itself: no copy, zero pages past n
    m.slot[:n] = slot
    rowid = m.rowid[:n]
    if np.any(rowid[1:] <= rowid[:-1]) or rowid[0] <= 0:
        raise ValueError("rowids")
    sessions, users = fields["sessions"], fields["users"]
    if not all(type(k) is str for k in sessions) or not all(type(u) is str for u in users):
        raise ValueError("codes")
    m.session_codes = {k: i for i, k in enumerate(sessions)}
    m.session_keys = list(sessions)
    m.user_codes = {u: i for i, u in enumerate(users)}
    if np.any(m.session[:n] >= len(sessions)) or np.any(m.user[:n] >= len(users)):
        raise ValueError("codes")
    long = arrays["metas_long"]
    if long.dtype != np.int64 or long.ndim != 1 or np.any((long < 0) | (long >= n)):
        raise ValueError("metadata")
    metas = Metas.of_bytes(arrays["metas"].data, at.tolist(), frozenset(long.tolist()))
    m.take_documents(rowid.copy(), ids, texts, metas)
    if len(m.pos_of_id) != n:
        raise ValueError("ids")
    m.index_sessions()
    latest = fields["latest"]
    m.latest = -np.inf if latest is None else float(latest)
    return m


VERIFY_SAMPLE = 32  # documents compared with their rows at each open from the file (spread, and the newest)


def agrees(m: Mirror, conn: sqlite3.Connection) -> bool:
    """Whether ``m`` holds as many documents as ``vx_docs`` and, on a sample of them (spread
    over the positions, and the newest), the very id, text, metadata and vector of their
    rows (read in the caller's read transaction)."""
    (count,) = conn.execute("SELECT count(*) FROM vx_docs").fetchone()
    live = m.live_positions()
    if count != live.size:
        return False
    if live.size == 0:
        return True
    pos = live[spread_sample(live.size, VERIFY_SAMPLE, 8)].tolist()
    rowids = [int(m.rowid[p]) for p in pos]
    rows = {r[0]: r[1:] for r in conn.execute(
        f"SELECT rowid, id, text, metadata, vector FROM vx_docs WHERE rowid IN ({','.join('?' * len(rowids))})",
        rowids)}
    for p, rowid in zip(pos, rowids):
        row = rows.get(rowid)
        if row is None:
            return False
        id, text, meta, blob = row
        stored = np.frombuffer(blob, dtype=np.float32).astype(m.dtype) if len(blob) == 4 * (m.dim or 0) else None
        if id != m.ids[p] or text != m.texts[p] or stored is None or stored.tobytes() != m.vector(p).tobytes() \
                or loads(meta) != m.metas[p]:
            return False
    return True
