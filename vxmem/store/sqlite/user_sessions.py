"""Schema 8's migration: a session belongs to its user.

Before schema 8 a session was one name across users: two users who both wrote to session
``"s"`` shared its transcript and its turn counter, and the servers kept a user's sessions
apart by storing ``user/s``. From schema 8 a session's key holds its user's name
(:func:`~vxmem.store.mirror.columns.session_key`). A file's user rows change three ways,
in the migration's transaction:

- a served session ``user/s`` of that user becomes ``s`` (the metadata rewritten);
- the FTS5 row's scope token becomes the user's session's;
- each user's session gets its own turn counter, starting where the shared one stood, so
  no turn number is ever given twice in a session.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...core.keys import K_SESSION
from ..lexical.fts import scope_token, session_token
from ..mirror.columns import SessionMoves
from .jsonio import dumps, loads

_BATCH = 2000
_USERS = "metadata LIKE '%\"_vx_user\"%'"  # the rows that may be a user's (a superset: '_' matches any character)


def migrate(c: sqlite3.Connection, fts: bool) -> bool:
    """Move every user's rows to sessions of their own (inside the caller's transaction), with
    their FTS5 rows when ``fts`` (those up to ``fts_upto``); True if any row was a user's (the
    caller then makes readers read the file afresh)."""
    from tqdm.auto import tqdm  # a bar past 20,000 rows (100,000 took 4.3 s to move)

    row = c.execute("SELECT value FROM vx_meta WHERE key = 'fts_upto'").fetchone() if fts else None
    fts_upto = int(row[0]) if row else 0
    moves = SessionMoves()
    last, any_rows = 0, False
    total = c.execute(f"SELECT count(*) FROM vx_docs WHERE {_USERS}").fetchone()[0]
    with tqdm(total=total, desc="moving users' sessions", unit="doc", disable=total < 20_000) as bar:
        while rows := c.execute(f"SELECT rowid, text, metadata FROM vx_docs WHERE rowid > ? AND {_USERS} "
                                "ORDER BY rowid LIMIT ?", (last, _BATCH)).fetchall():
            last = rows[-1][0]
            for rowid, text, metadata in rows:
                any_rows |= _move(c, rowid, text, loads(metadata), fts_upto, moves)
            bar.update(len(rows))
    for old in moves.old_counters():
        row = c.execute("SELECT value FROM vx_counters WHERE name = ?", (old,)).fetchone()
        if row:
            c.executemany("INSERT INTO vx_counters (name, value) VALUES (?, ?) ON CONFLICT(name) "
                          "DO UPDATE SET value = max(value, excluded.value)",
                          [(new, int(row[0])) for new in moves.counters(old)])
    return any_rows


def _move(c: sqlite3.Connection, rowid: int, text: str, meta: Any, fts_upto: int, moves: SessionMoves) -> bool:
    """One row's part of :func:`migrate`; True if it is a user's memory."""
    new = moves.take(meta)
    if new is None:
        return False
    if new is not meta:
        c.execute("UPDATE vx_docs SET metadata = ? WHERE rowid = ?", (dumps(new), rowid))
    if rowid <= fts_upto:  # a contentless table forgets a row given the values it was indexed with
        c.execute("INSERT INTO vx_fts (vx_fts, rowid, text, scope) VALUES ('delete', ?, ?, ?)",
                  (rowid, text, session_token(meta.get(K_SESSION))))
        c.execute("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)", (rowid, text, scope_token(new)))
    return True
