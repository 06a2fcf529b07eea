"""The database's schema: its tables, the FTS5 lexical index and the logs, as DDL.

:func:`create` makes them in a fresh file, :func:`migrate` brings an older file up to
:data:`SCHEMA_VERSION` once (a writer's open: see :mod:`vxmem.store.sqlite.opening`).
"""

from __future__ import annotations

import json
import sqlite3
import uuid

from ..lexical.fts import TOKENIZE, scope_token
from . import keys, user_sessions
from .files import rollback

# 2: the FTS5 lexical index; 3: the change log; 4: the access log; 5: each text's token count;
# 6: the FTS5 rows written in batches, vx_meta's "fts_upto" saying how far (older files gain
# them on a writable open; an older vxmem refuses a file of schema 6, whose FTS5 table it
# would damage by deleting rows never indexed); 7: the servers' API keys (vx_keys: an older
# vxmem refuses the file rather than serve it without asking for a key); 8: a session belongs
# to its user (a user's session key and FTS5 scope token hold the user: see user_sessions)
SCHEMA_VERSION = 8
FORMAT_NAME = "vxmem"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vx_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS vx_docs (
        rowid INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        vector BLOB NOT NULL,
        tokens INTEGER
    )""",
    "CREATE TABLE IF NOT EXISTS vx_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)

# Each text's token count, as counted by the counter vx_meta's "token_counter" names (NULL:
# not counted by it, counted again at open); a file of schema 4 or older gains the column empty.
_TOKENS_SCHEMA = ("ALTER TABLE vx_docs ADD COLUMN tokens INTEGER",)

# The change log: one row per document a committed transaction touched (``doc`` is its
# rowid in vx_docs), tagged with the generation that transaction committed as.
_CHANGES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vx_changes (generation INTEGER NOT NULL, doc INTEGER NOT NULL, op TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vx_changes_generation ON vx_changes (generation)",
)

# The access log: when each document was accessed (``doc`` its rowid in vx_docs, ``at`` epoch
# seconds), one row per (document, moment). Written only by a memory that ages memories from
# their last access (``recency_from="accessed"``); a document's rows go with it.
_ACCESS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vx_access (doc INTEGER NOT NULL, at REAL NOT NULL, PRIMARY KEY (doc, at)) "
    "WITHOUT ROWID",
)

# The lexical index: a contentless FTS5 table over each document's text plus a "scope"
# column holding one token per session (see vxmem.store.lexical.fts). Porter stemming over
# unicode61 with diacritics removed: case, accents, punctuation and inflections
# ("running" ~ "run", "Café" ~ "cafe") match. It holds every document whose rowid is at
# most vx_meta's "fts_upto" and none above: the writer indexes the newer ones in batches
# (see vxmem.store.sqlite.database.FTS_BATCH).
_FTS_SCHEMA = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS vx_fts USING fts5(text, scope, content='', tokenize='{TOKENIZE}')",
    "INSERT INTO vx_fts (vx_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)')",
)


def tables(conn: sqlite3.Connection) -> set[str]:
    """The names of the file's tables."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def create(conn: sqlite3.Connection) -> None:
    """Make this schema in a fresh file, in one transaction, with ``vx_meta``'s first values
    (a new ``uid``, generation 0)."""
    conn.execute("BEGIN IMMEDIATE")
    for ddl in _SCHEMA + _FTS_SCHEMA + _CHANGES_SCHEMA + _ACCESS_SCHEMA + keys.DDL:
        conn.execute(ddl)
    conn.executemany("INSERT OR IGNORE INTO vx_meta (key, value) VALUES (?, ?)",
                     [("format", FORMAT_NAME), ("schema_version", str(SCHEMA_VERSION)),
                      ("generation", "0"), ("uid", uuid.uuid4().hex), ("changes_since", "0"),
                      ("fts_upto", "0")])
    conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection, version: int, generation: int) -> None:
    """Bring a database of schema ``version`` (at ``generation``) up to this schema, once, in
    one transaction: a version-1 file gains its FTS5 table (every document indexed), a
    version-2 file its change log, a version-3 file its access log, a file older than
    version 5 the token column (empty: the first writable load fills it), a file older
    than version 6 its ``fts_upto`` (every document: they were indexed one by one), a file
    older than version 7 its (empty) table of API keys, a file older than version 8 its users'
    sessions of their own (:mod:`~vxmem.store.sqlite.user_sessions`)."""
    c = conn
    c.execute("BEGIN IMMEDIATE")
    try:
        if version < 2:
            user_sessions.migrate(c, fts=False)
            _index_every_document(c)
        if version < 3:
            for ddl in _CHANGES_SCHEMA:
                c.execute(ddl)
            # Readers that hold an older generation have no log to follow: they reload in full.
            c.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('changes_since', ?)",
                      (str(generation),))
        if version < 4:
            for ddl in _ACCESS_SCHEMA:
                c.execute(ddl)
        if version < 5 and "tokens" not in _doc_columns(c):
            for ddl in _TOKENS_SCHEMA:
                c.execute(ddl)
        if version < 6:  # an older vxmem indexed every document in its own transaction
            c.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES "
                      "('fts_upto', (SELECT CAST(COALESCE(max(rowid), 0) AS TEXT) FROM vx_docs))")
        if version < 7:
            for ddl in keys.DDL:
                c.execute(ddl)
        # A version-1 file's rows moved before its FTS5 table was made (above), which indexed them moved.
        if 2 <= version < 8 and user_sessions.migrate(c, fts=True):
            # Readers that hold an older generation read rows whose sessions moved: they reload in full.
            c.execute("UPDATE vx_meta SET value = ? WHERE key = 'generation'", (str(generation + 1),))
            c.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('changes_since', ?)",
                      (str(generation + 1),))
        c.execute("UPDATE vx_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        c.execute("COMMIT")
    except BaseException:
        rollback(c)
        raise


def _index_every_document(c: sqlite3.Connection) -> None:
    """A version-1 file's FTS5 table, made and filled with every document (inside the
    migration's transaction)."""
    from tqdm.auto import tqdm

    total = c.execute("SELECT count(*) FROM vx_docs").fetchone()[0]
    for ddl in _FTS_SCHEMA:
        c.execute(ddl)
    last, step = 0, 5000
    with tqdm(total=total, desc="building the lexical index", unit="doc",
              disable=total < 20_000) as bar:
        while True:
            rows = c.execute("SELECT rowid, text, metadata FROM vx_docs WHERE rowid > ? "
                             "ORDER BY rowid LIMIT ?", (last, step)).fetchall()
            if not rows:
                break
            c.executemany("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)",
                          [(r, t, scope_token(json.loads(mj))) for r, t, mj in rows])
            last = rows[-1][0]
            bar.update(len(rows))


def _doc_columns(c: sqlite3.Connection) -> set[str]:
    return {r[1] for r in c.execute("PRAGMA table_info(vx_docs)")}
