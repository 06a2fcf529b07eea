"""The database's schema: its tables, the FTS5 lexical index and the change log, as DDL.

:class:`~vxmem.store.database.Database` creates them in a fresh file and brings an older
file up to :data:`SCHEMA_VERSION` once.
"""

from __future__ import annotations

from .lexical import TOKENIZE

# 2: the FTS5 lexical index; 3: the change log; 4: the access log; 5: each text's token count;
# 6: the FTS5 rows written in batches, vx_meta's "fts_upto" saying how far (older files gain
# them on a writable open; an older vxmem refuses a file of schema 6, whose FTS5 table it
# would damage by deleting rows never indexed)
SCHEMA_VERSION = 6
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
# column holding one token per session (see vxmem.store.lexical). Porter stemming over
# unicode61 with diacritics removed: case, accents, punctuation and inflections
# ("running" ~ "run", "Café" ~ "cafe") match. It holds every document whose rowid is at
# most vx_meta's "fts_upto" and none above: the writer indexes the newer ones in batches
# (see vxmem.store.database.FTS_BATCH).
_FTS_SCHEMA = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS vx_fts USING fts5(text, scope, content='', tokenize='{TOKENIZE}')",
    "INSERT INTO vx_fts (vx_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)')",
)
