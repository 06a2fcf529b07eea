"""Each memory's late-interaction token vectors, stored beside its document.

``vx_late`` holds, per document (its rowid in ``vx_docs``), the name of the model that made
the vectors and the vectors themselves (packed, opaque here: see :mod:`vxmem.models.late`).
They are derived data, like the vector index: a document without a row (added by ``add()``,
or written by an older vxmem) is encoded when a recall first needs it. A trigger deletes a
document's row with it, whatever deletes the document. The table is made by the first
write that stores a row, so a file without late interaction never has one.

``vx_late_context`` holds a turn's token vectors read after the turn before it (see
:mod:`vxmem.memory.late_stage`), with that turn's rowid (``prev``): deleting either document
deletes the row, so nothing derived from a forgotten turn stays behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

_DDL = (
    "CREATE TABLE IF NOT EXISTS vx_late (doc INTEGER PRIMARY KEY, model TEXT NOT NULL, bits BLOB NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS vx_late_gone AFTER DELETE ON vx_docs BEGIN "
    "DELETE FROM vx_late WHERE doc = old.rowid; END",
)
_CONTEXT_DDL = (
    "CREATE TABLE IF NOT EXISTS vx_late_context (doc INTEGER PRIMARY KEY, prev INTEGER NOT NULL, "
    "model TEXT NOT NULL, bits BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vx_late_context_prev ON vx_late_context (prev)",
    "CREATE TRIGGER IF NOT EXISTS vx_late_context_gone AFTER DELETE ON vx_docs BEGIN "
    "DELETE FROM vx_late_context WHERE doc = old.rowid OR prev = old.rowid; END",
)
_CHUNK = 500  # rowids per SELECT ... IN (...)


def put(conn: sqlite3.Connection, model: str, rows: Sequence[tuple[int, bytes]]) -> None:
    """Store ``(rowid, bits)`` rows made by ``model`` (inside the caller's transaction)."""
    if not rows:
        return
    for ddl in _DDL:
        conn.execute(ddl)
    conn.executemany("INSERT OR REPLACE INTO vx_late (doc, model, bits) VALUES (?, ?, ?)",
                     [(int(r), model, bytes(b)) for r, b in rows])


def get(conn: sqlite3.Connection, model: str, rowids: Sequence[int]) -> dict[int, bytes]:
    """The stored bits ``model`` made for each of ``rowids`` that has them."""
    out: dict[int, bytes] = {}
    ids = [int(r) for r in rowids]
    try:
        for i in range(0, len(ids), _CHUNK):
            part = ids[i:i + _CHUNK]
            marks = ",".join("?" * len(part))
            out.update(conn.execute(f"SELECT doc, bits FROM vx_late WHERE model = ? AND doc IN ({marks})",
                                    (model, *part)).fetchall())
    except sqlite3.OperationalError as exc:  # no late interaction was ever stored in this file
        if "no such table" not in str(exc):
            raise
    return out


def put_context(conn: sqlite3.Connection, model: str, doc: int, prev: int, bits: bytes) -> None:
    """Store the bits ``model`` made of document ``doc`` read after document ``prev``."""
    for ddl in _CONTEXT_DDL:
        conn.execute(ddl)
    conn.execute("INSERT OR REPLACE INTO vx_late_context (doc, prev, model, bits) VALUES (?, ?, ?, ?)",
                 (int(doc), int(prev), model, bytes(bits)))


def get_context(conn: sqlite3.Connection, model: str, rowids: Sequence[int]) -> dict[int, tuple[int, bytes]]:
    """``(prev, bits)`` ``model`` stored for each of ``rowids`` read in context, where stored."""
    out: dict[int, tuple[int, bytes]] = {}
    ids = [int(r) for r in rowids]
    try:
        for i in range(0, len(ids), _CHUNK):
            part = ids[i:i + _CHUNK]
            marks = ",".join("?" * len(part))
            rows = conn.execute(f"SELECT doc, prev, bits FROM vx_late_context WHERE model = ? AND doc IN ({marks})",
                                (model, *part)).fetchall()
            out.update((doc, (prev, bits)) for doc, prev, bits in rows)
    except sqlite3.OperationalError as exc:  # no turn was ever stored in context in this file
        if "no such table" not in str(exc):
            raise
    return out
