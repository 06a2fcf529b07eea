"""The PostgreSQL schema: its tables as DDL, made on a fresh database and checked on every open.

The tables mirror the file store's (see :mod:`vxmem.store.sqlite.schema`) with PostgreSQL's
types: the vectors in a pgvector ``vector`` column, rowids from a sequence. ``vx_meta``
holds the format, the schema version, the generation every write moves on, the vector
dimension and the names of the embedder and token counter. A database of a newer schema is
refused; an older one (none exists yet) would be migrated here, once, in one transaction.
"""

from __future__ import annotations

import uuid

import psycopg

from ...core.errors import InvalidDatabaseError

SCHEMA_VERSION = 1
FORMAT_NAME = "vxmem-postgres"
# Taken (for the creating transaction only) while the schema is made: two processes opening
# a fresh database at once would otherwise race to create the same tables.
_CREATE_LOCK = 0x7678_6D65_6D00  # "vxmem\0"

_DDL = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TABLE IF NOT EXISTS vx_meta (key text PRIMARY KEY, value text NOT NULL)",
    # Rowids are taken while the transaction holds the generation row (see database.py), so
    # they grow in commit order: a reader appends new rows to its mirror in rowid order.
    """CREATE TABLE IF NOT EXISTS vx_docs (
        rowid bigserial PRIMARY KEY,
        id text NOT NULL UNIQUE,
        text text NOT NULL,
        metadata text NOT NULL,
        vector vector NOT NULL,
        tokens bigint
    )""",
    "CREATE TABLE IF NOT EXISTS vx_counters (name text PRIMARY KEY, value bigint NOT NULL)",
    # One row per document a committed transaction touched, tagged with its generation: what
    # every other process reads to follow the writes.
    "CREATE TABLE IF NOT EXISTS vx_changes (generation bigint NOT NULL, doc bigint NOT NULL, op text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vx_changes_generation ON vx_changes (generation)",
    "CREATE TABLE IF NOT EXISTS vx_access (doc bigint NOT NULL, at double precision NOT NULL, PRIMARY KEY (doc, at))",
    """CREATE TABLE IF NOT EXISTS vx_late (
        doc bigint PRIMARY KEY REFERENCES vx_docs (rowid) ON DELETE CASCADE,
        model text NOT NULL, bits bytea NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS vx_late_context (
        doc bigint PRIMARY KEY REFERENCES vx_docs (rowid) ON DELETE CASCADE,
        prev bigint NOT NULL REFERENCES vx_docs (rowid) ON DELETE CASCADE,
        model text NOT NULL, bits bytea NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS vx_late_context_prev ON vx_late_context (prev)",
)


def ensure(conn: psycopg.Connection, where: str) -> None:
    """Make the schema in a database that has none (in one transaction, under a lock that
    lets one process at a time do it), and refuse one that holds other tables named
    ``vx_meta`` or a vxmem schema newer than this one."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
        exists = conn.execute("SELECT to_regclass('vx_meta') IS NOT NULL").fetchone()
        if not (exists and exists[0]):
            try:
                for ddl in _DDL:
                    conn.execute(ddl)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise InvalidDatabaseError(f"{where}: cannot create the vxmem tables or the pgvector extension "
                                           f"({exc}); ask for CREATE rights or run CREATE EXTENSION vector") from None
            conn.execute("INSERT INTO vx_meta (key, value) VALUES (%s, %s), (%s, %s), (%s, %s), (%s, %s), (%s, %s)",
                         ("format", FORMAT_NAME, "schema_version", str(SCHEMA_VERSION), "generation", "0",
                          "uid", uuid.uuid4().hex, "changes_since", "0"))
    check(read_meta(conn), where)


def read_meta(conn: psycopg.Connection) -> dict[str, str]:
    """``vx_meta`` as a dict."""
    return {k: v for k, v in conn.execute("SELECT key, value FROM vx_meta").fetchall()}


def check(meta: dict[str, str], where: str) -> int:
    """The schema version of a database whose ``vx_meta`` is ``meta``, after refusing one that
    is not vxmem's or was written by a newer vxmem."""
    if meta.get("format") != FORMAT_NAME:
        raise InvalidDatabaseError(f"{where} is not a vxmem database (format {meta.get('format')!r})")
    version = int(meta.get("schema_version", 0))
    if version > SCHEMA_VERSION:
        raise InvalidDatabaseError(f"{where} was written by a newer vxmem (schema {version}, this one reads "
                                   f"{SCHEMA_VERSION})")
    return version
