"""The PostgreSQL schema: its tables as DDL, made on a fresh database and checked on every open.

The tables mirror the file store's (see :mod:`vxmem.store.sqlite.schema`) with PostgreSQL's
types: the vectors in a pgvector ``vector`` column, rowids from a sequence. ``vx_meta``
holds the format, the schema version, the generation every write moves on, the vector
dimension and the names of the embedder and token counter. A database of a newer schema is
refused; an older one is migrated here, once, in one transaction, by a process that may write.

Schema 2 adds ``user_id`` (the ``_vx_user`` a memory belongs to, copied out of its metadata)
and ``session_key`` (its session's key), each with an index on it and the rowid, so a process
serving one user or one session reads those rows alone; the whole collection's BM25
statistics (see :mod:`~vxmem.store.postgres.corpus`); and a pgvector HNSW index (cosine) on
the vectors for recall across every user's memories, made by the first handle opened with
``scope=user`` once the collection's dimension is known (pgvector indexes only vectors of one
declared dimension; keeping the index costs each write its insertion, which a database that
no such handle reads need not pay).

Schema 3 adds to ``vx_changes`` the user and session key of each changed document (after
the change), so a process following some users' and sessions' mirrors fetches only their
changed rows (a row of neither, a deletion, or one logged by an older schema is fetched by
its rowid).
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from ...core.errors import InvalidDatabaseError
from ...core.keys import K_USER
from ..mirror.columns import SessionMoves, columns_of
from ..sqlite.jsonio import dumps, loads_all
from .corpus import doc_columns

SCHEMA_VERSION = 4  # 4: a session belongs to its user (a user's session key holds the user's name)
FORMAT_NAME = "vxmem-postgres"
# Taken (for the creating transaction only) while the schema is made: two processes opening
# a fresh database at once would otherwise race to create the same tables.
_CREATE_LOCK = 0x7678_6D65_6D00  # "vxmem\0"

# Schema 2's indexes and table: a user's rows by index; the whole collection's BM25 statistics
# (see :mod:`~vxmem.store.postgres.corpus`).
_V2 = (
    "CREATE INDEX IF NOT EXISTS vx_docs_user ON vx_docs (user_id, rowid)",
    "CREATE INDEX IF NOT EXISTS vx_docs_session ON vx_docs (session_key, rowid)",
    "CREATE INDEX IF NOT EXISTS vx_docs_created ON vx_docs (created)",
    "CREATE INDEX IF NOT EXISTS vx_docs_terms ON vx_docs USING gin (terms)",
    "CREATE TABLE IF NOT EXISTS vx_terms (term text PRIMARY KEY, df bigint NOT NULL)",
)
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
        tokens bigint,
        user_id text,
        session_key text,
        text_len integer NOT NULL DEFAULT 0,
        lex_len integer NOT NULL DEFAULT 0,
        created double precision NOT NULL DEFAULT '-Infinity',
        terms text[] NOT NULL DEFAULT '{}'
    )""",
    *_V2,
    "CREATE TABLE IF NOT EXISTS vx_counters (name text PRIMARY KEY, value bigint NOT NULL)",
    # One row per document a committed transaction touched, tagged with its generation: what
    # every other process reads to follow the writes.
    "CREATE TABLE IF NOT EXISTS vx_changes (generation bigint NOT NULL, doc bigint NOT NULL, op text NOT NULL, "
    "user_id text, session_key text)",
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


_LEX_META = ("INSERT INTO vx_meta (key, value) VALUES ('lex_docs', '0'), ('lex_sum', '0'), "
             "('max_created', '-Infinity') ON CONFLICT (key) DO NOTHING")


def ensure(conn: psycopg.Connection, where: str) -> None:
    """Make the schema in a database that has none (in one transaction, under a lock that
    lets one process at a time do it), migrate one of an older schema, and refuse one that
    holds other tables named ``vx_meta`` or a vxmem schema newer than this one."""
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
            conn.execute(_LEX_META)
        else:
            migrate(conn, read_meta(conn))
    check(read_meta(conn), where)


def migrate(conn: psycopg.Connection, meta: dict[str, str]) -> None:
    """Bring a database of an older schema to this one (inside the caller's transaction)."""
    version = int(meta.get("schema_version", SCHEMA_VERSION))
    if version >= SCHEMA_VERSION or meta.get("format") != FORMAT_NAME:
        return
    if version < 2:
        _to_v2(conn)
    for column in ("user_id text", "session_key text"):  # older changes' are NULL: fetched by rowid
        conn.execute(f"ALTER TABLE vx_changes ADD COLUMN IF NOT EXISTS {column}")
    if version < 4:
        _to_v4(conn)
    conn.execute("UPDATE vx_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def _to_v4(conn: psycopg.Connection) -> None:
    """Schema 3 to 4: a session belongs to its user. A user's rows get the session key that holds
    the user's name, a served session ``user/s`` becomes ``s``, and each user's session its own
    turn counter, from where the shared one stood; processes that follow read afresh."""
    moves = SessionMoves()
    last, moved_any = 0, False
    while rows := conn.execute("SELECT rowid, metadata FROM vx_docs WHERE user_id IS NOT NULL AND rowid > %s "
                               "ORDER BY rowid LIMIT 2000", (last,)).fetchall():
        last = rows[-1][0]
        news = [moves.take(meta) or meta for meta in loads_all([m for _, m in rows])]
        with conn.cursor() as cur:
            cur.executemany("UPDATE vx_docs SET metadata = %s, session_key = %s WHERE rowid = %s",
                            [(dumps(new), session_of(new), rowid) for (rowid, _), new in zip(rows, news)])
        moved_any = True
    for old in moves.old_counters():
        conn.execute("INSERT INTO vx_counters (name, value) SELECT n, c.value FROM vx_counters c, unnest(%s::text[]) n "
                     "WHERE c.name = %s ON CONFLICT (name) DO UPDATE SET value = greatest(vx_counters.value, "
                     "excluded.value)", (moves.counters(old), old))
    if moved_any:
        conn.execute("UPDATE vx_meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")
        conn.execute("UPDATE vx_meta SET value = (SELECT value FROM vx_meta WHERE key = 'generation') "
                     "WHERE key = 'changes_since'")


def _to_v2(conn: psycopg.Connection) -> None:
    """Schema 1 to 2: the user and session columns, the BM25 statistics, their indexes."""
    # Schema 1 had no user column and no lexical statistics: each row's are computed here.
    for column in ("user_id text", "session_key text", "text_len integer NOT NULL DEFAULT 0",
                   "lex_len integer NOT NULL DEFAULT 0", "created double precision NOT NULL DEFAULT '-Infinity'",
                   "terms text[] NOT NULL DEFAULT '{}'"):
        conn.execute(f"ALTER TABLE vx_docs ADD COLUMN IF NOT EXISTS {column}")
    last = 0
    while rows := conn.execute("SELECT rowid, text, metadata FROM vx_docs WHERE rowid > %s ORDER BY rowid LIMIT 2000",
                               (last,)).fetchall():
        metas = loads_all([m for _, _, m in rows])
        with conn.cursor() as cur:
            cur.executemany("UPDATE vx_docs SET user_id = %s, session_key = %s, text_len = %s, lex_len = %s, "
                            "created = %s, terms = %s WHERE rowid = %s", [
                                (user_of(meta), session_of(meta), *cols, r[0]) for r, meta, cols in zip(
                                rows, metas, doc_columns([t for _, t, _ in rows], metas))])
        last = rows[-1][0]
    for ddl in _V2:
        conn.execute(ddl)
    conn.execute(_LEX_META)  # the HNSW index is made by the first scope=user handle (make_vector_index)
    conn.execute("INSERT INTO vx_terms (term, df) SELECT t, count(*) FROM vx_docs, unnest(terms) t GROUP BY t")
    conn.execute("UPDATE vx_meta SET value = s.v FROM (SELECT count(*)::text AS n, coalesce(sum(lex_len), 0)::text "
                 "AS total, coalesce(max(created) FILTER (WHERE created > '-Infinity'), '-Infinity')::text AS top "
                 "FROM vx_docs) d, LATERAL (VALUES ('lex_docs', d.n), ('lex_sum', d.total), ('max_created', d.top)) "
                 "s(k, v) WHERE key = s.k")


def user_of(meta: dict[str, Any]) -> str | None:
    """The user a document belongs to, as the ``user_id`` column holds it (None: no one's)."""
    user = meta.get(K_USER)
    return user if isinstance(user, str) else None


def session_of(meta: dict[str, Any]) -> str | None:
    """The key of the session a document belongs to, as the ``session_key`` column (and the
    mirror) holds it (None: a plain document without one)."""
    return columns_of(meta)[5]


def vector_index(dim: int) -> str:
    """The expression the HNSW index is made on (a search must ORDER BY the same one to use it)."""
    return f"(vector::vector({int(dim)}))"


def make_vector_index(conn: psycopg.Connection, dim: int) -> None:
    """Make the HNSW index (cosine distance) on the vectors of a collection of ``dim``-d vectors,
    unless it is there (inside the caller's transaction, one process at a time). Building it
    over many rows takes a while, during which writes wait: on a large database, make it
    beforehand with ``CREATE INDEX CONCURRENTLY`` and the same name and expression."""
    exists = conn.execute("SELECT to_regclass('vx_docs_hnsw') IS NOT NULL").fetchone()
    if exists and exists[0]:
        return
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
    conn.execute(f"CREATE INDEX IF NOT EXISTS vx_docs_hnsw ON vx_docs USING hnsw ({vector_index(dim)} "
                 "vector_cosine_ops)")


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
