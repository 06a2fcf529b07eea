"""The writes inside one PostgreSQL transaction: documents, metadata, deletions, counters, token vectors.

Every write transaction (``PgDatabase.transaction``) first moves ``vx_meta``'s generation on (``UPDATE ... RETURNING``):
the row lock that takes is held until COMMIT, so writing transactions, in any number of
processes, commit one after another in generation order, and the rowids they take from the
sequence grow in that order. That is PostgreSQL's own locking, inside the transaction; no
process holds a lock of its own. A duplicate id is refused by the unique constraint
(:class:`~vxmem.core.errors.ConflictError`), counters move in one statement each, and a
transaction that fails leaves nothing behind.

A process whose mirror was behind when its transaction began (another process committed
in between) takes in the change log after COMMIT, its own writes among the rest, instead of
applying its ops directly; a metadata update computed from a memory another process changed
meanwhile is refused (:class:`~vxmem.core.errors.ConflictError`) rather than overwriting it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import psycopg

from ...core.errors import ConflictError
from ..mirror.mirror import Mirror
from ..sqlite.jsonio import dumps
from .corpus import COUNTED, count_in, count_params, doc_columns, lexical_columns
from .schema import make_vector_index, session_of, user_of


class Written(Protocol):
    """What a transaction reads and sets of its :class:`~vxmem.store.postgres.database.PgDatabase`."""

    @property
    def conn(self) -> psycopg.Connection: ...

    dim: int | None
    generation: int
    embedder: str | None
    writer_embedder: str | None
    scoped: bool
    token_counter: str | None
    counted_by: str | None

    def put_meta(self, key: str, value: str) -> None: ...


class PgTransaction:
    """Writes inside one PostgreSQL transaction, recorded as ops for the mirror to follow after COMMIT.

    ``behind``: the mirror missed another process's commit, so after COMMIT the engine takes
    in the change log (``ops`` is then empty)."""

    def __init__(self, database: Written, mirror: Mirror, generation: int, behind: bool):
        self.database = database
        self.conn = database.conn
        self.mirror = mirror
        self.generation = generation
        self.read_at = database.generation  # the generation the mirror holds
        self.behind = behind
        self.ops: list[tuple[Any, ...]] = []
        self.last_rowid = 0

    def insert(self, id: str, text: str, meta: dict[str, Any], vec: np.ndarray, tokens: int) -> None:
        """Add a document, ``tokens`` being its text's (checked) token count; its vector's
        dimension becomes the collection's if it has none yet."""
        self._set_dim(vec.shape[0])
        lex = doc_columns([text], [meta])[0]
        try:
            # The row, its change-log entry and its word statistics in one statement: one round trip.
            row = self.conn.execute(
                "WITH d AS (INSERT INTO vx_docs (id, text, metadata, vector, tokens, user_id, session_key, text_len, "
                "lex_len, created, terms) VALUES (%s, %s, %s, %b, %s, %s, %s, %s, %s, %s, %s) "
                "RETURNING rowid, user_id, session_key), c AS (INSERT INTO vx_changes (generation, doc, op, user_id, "
                f"session_key) SELECT %s, rowid, 'insert', user_id, session_key FROM d RETURNING doc), {COUNTED} "
                "SELECT doc FROM c",
                (id, text, dumps(meta), np.asarray(vec, dtype=np.float32), self._stored(tokens), user_of(meta),
                 session_of(meta), *lex, self.generation, *count_params(lex[3], 1, lex[1], lex[2]))).fetchone()
        except psycopg.errors.UniqueViolation:
            raise ConflictError(f"id already exists: {id!r}") from None
        except psycopg.DataError as exc:  # a NUL character, which a PostgreSQL text cannot hold
            raise ValueError(f"document {id!r} cannot be stored in PostgreSQL: {exc}") from None
        assert row is not None
        self.last_rowid = int(row[0])
        self.ops.append(("insert", self.last_rowid, id, text, meta, vec, tokens))

    def _set_dim(self, dim: int) -> None:
        db = self.database
        if db.dim is None:  # another process may have stored the first vector since this one read vx_meta
            row = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'dim'").fetchone()
            other = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'embedder'").fetchone()
            db.embedder = db.embedder if other is None else other[0]
            if row is None:
                db.put_meta("dim", str(dim))
                if db.scoped:
                    make_vector_index(self.conn, dim)
                if db.writer_embedder is not None and db.embedder is None:
                    db.put_meta("embedder", db.writer_embedder)
                    db.embedder = db.writer_embedder
            db.dim = dim if row is None else int(row[0])
            if self.mirror.dim is None:
                self.mirror.set_dim(db.dim)
        if dim != db.dim:
            raise ValueError(f"a {dim}-d vector for a collection of {db.dim}-d vectors")
        if db.embedder is not None and db.writer_embedder is not None and db.embedder != db.writer_embedder:
            # Both opened the database empty; the other process stored the first vector.
            raise ValueError(f"this database holds vectors of embedder {db.embedder!r}, written by another "
                             f"process since this handle opened it, not of {db.writer_embedder!r}")

    def _stored(self, tokens: int) -> int | None:
        """``tokens`` as stored: the count when the handle's counter is the one ``vx_meta`` names, else NULL."""
        db = self.database
        return int(tokens) if db.counted_by is not None and db.counted_by == db.token_counter else None

    def update_meta(self, id: str, meta: dict[str, Any]) -> None:
        """Replace a document's metadata (refused if another process changed it since this one read it)."""
        if self.behind:
            row = self.conn.execute(
                "SELECT max(c.generation) FROM vx_changes c JOIN vx_docs d ON d.rowid = c.doc "
                "WHERE d.id = %s AND c.generation < %s", (id, self.generation)).fetchone()
            if row is not None and row[0] is not None and row[0] > self.read_at:
                raise ConflictError(f"document {id!r} was changed by another process while this one was "
                                    "writing it; try again")
        scope, created = lexical_columns(0, meta)  # its scope token may come or go with its session
        old = self.conn.execute("SELECT lex_len, text_len FROM vx_docs WHERE id = %s", (id,)).fetchone()
        self.conn.execute(
            "WITH d AS (UPDATE vx_docs SET metadata = %s, user_id = %s, session_key = %s, lex_len = text_len + %s, "
            "created = %s WHERE id = %s RETURNING rowid, user_id, session_key) INSERT INTO vx_changes "
            "(generation, doc, op, user_id, session_key) SELECT %s, rowid, 'update', user_id, session_key FROM d",
            (dumps(meta), user_of(meta), session_of(meta), scope, created, id, self.generation))
        if old is not None:
            count_in(self.conn, [], 0, old[1] + scope - old[0], created)
        self.ops.append(("update", id, meta))

    def delete(self, ids: Sequence[str]) -> None:
        """Delete documents by id (their token vectors go with them; their access log too)."""
        rows = self.conn.execute("DELETE FROM vx_docs WHERE id = ANY(%s) RETURNING rowid, terms, lex_len, created",
                                 (list(ids),)).fetchall()
        gone = [r[0] for r in rows]
        if gone:
            self.conn.execute("INSERT INTO vx_changes (generation, doc, op) SELECT %s, unnest(%s::bigint[]), 'delete'",
                              (self.generation, gone))
        for _, terms, lex_len, created in rows:
            count_in(self.conn, terms, -1, -lex_len, created)
        if gone:
            self.conn.execute("DELETE FROM vx_access WHERE doc = ANY(%s)", (gone,))
        self.ops.append(("delete", list(ids)))

    def insert_accesses(self, times: Sequence[float]) -> None:
        """Record the document inserted last as accessed at each of ``times``."""
        for t in times:
            self.conn.execute("INSERT INTO vx_access (doc, at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                              (self.last_rowid, float(t)))

    def put_late(self, model: str, bits: bytes) -> None:
        """Store ``model``'s token vectors of the document inserted last."""
        self.conn.execute("INSERT INTO vx_late (doc, model, bits) VALUES (%s, %s, %s) ON CONFLICT (doc) DO UPDATE "
                          "SET model = excluded.model, bits = excluded.bits", (self.last_rowid, model, bytes(bits)))

    def put_late_context(self, model: str, prev: int, bits: bytes) -> None:
        """Store ``model``'s token vectors of the document inserted last, read after document ``prev``."""
        self.conn.execute("INSERT INTO vx_late_context (doc, prev, model, bits) VALUES (%s, %s, %s, %s) "
                          "ON CONFLICT (doc) DO UPDATE SET prev = excluded.prev, model = excluded.model, "
                          "bits = excluded.bits", (self.last_rowid, int(prev), model, bytes(bits)))

    def take_counter(self, name: str) -> int:
        """The counter's value, moved on by one, in one statement."""
        row = self.conn.execute(
            "INSERT INTO vx_counters (name, value) VALUES (%s, 1) ON CONFLICT (name) "
            "DO UPDATE SET value = vx_counters.value + 1 RETURNING value - 1", (name,)).fetchone()
        assert row is not None
        return int(row[0])

    def counter(self, name: str) -> int:
        """The counter's value (0 before it was first taken)."""
        row = self.conn.execute("SELECT value FROM vx_counters WHERE name = %s", (name,)).fetchone()
        return int(row[0]) if row else 0

    def raise_counter(self, name: str, value: int) -> None:
        """Move the counter up to at least ``value`` (never down)."""
        self.conn.execute("INSERT INTO vx_counters (name, value) VALUES (%s, %s) ON CONFLICT (name) "
                          "DO UPDATE SET value = GREATEST(vx_counters.value, excluded.value)", (name, int(value)))
