"""The database: one open SQLite file (WAL), and the write side of it.

SQLite is the source of truth for text, metadata and vectors; everything else the
process holds (the mirror, the HNSW index, the lexical postings) is rebuilt from it. One
process writes a database file at a time: a second writer gets
:class:`~vxmem.core.errors.DatabaseLockedError` at open. ``read_only=True`` opens without
the lock and sees what writers have committed.

:class:`Database` stands on its other jobs: opening the file and a writer's upkeep of it
(:mod:`vxmem.store.sqlite.opening`, with the DDL and migrations in :mod:`vxmem.store.sqlite.schema`) and
the read side, the mirror loaded and followed through the change log
(:mod:`vxmem.store.mirror.loading`). Here is the write side: :class:`Transaction`, every
committed write of which moves ``generation`` on and lists the rows it touched in
``vx_changes``, in the same transaction. The files beside the database and the writer lock
are in :mod:`vxmem.store.sqlite.files`, the writer's WAL checkpoints in :mod:`vxmem.store.sqlite.checkpoint`;
their public names are importable from here too, but each constant is read in the module
that defines it (``CHANGE_WINDOW`` in :mod:`~vxmem.store.sqlite.opening`, ``RESAVE_ROWS`` in
:mod:`~vxmem.store.mirror.loading`, the checkpoint cadence in :mod:`~vxmem.store.sqlite.checkpoint`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...core.errors import ReadOnlyError, disk_full, is_disk_full
from ..lexical.fts import scope_token
from ..lexical.search import LexicalSearch
from ..mirror.loading import DatabaseLoader
from ..mirror.mirror import Mirror
from . import late_table
from .checkpoint import JOURNAL_SIZE_LIMIT, Checkpointer
from .files import index_files, read_only_uri, read_sidecar, remove_stale_temps, rollback
from .jsonio import dumps as _dumps
from .opening import CHANGE_WINDOW
from .schema import FORMAT_NAME, SCHEMA_VERSION

__all__ = ["CHANGE_WINDOW", "FORMAT_NAME", "FTS_BATCH", "JOURNAL_SIZE_LIMIT", "PRUNE_EVERY", "SCHEMA_VERSION",
           "Checkpointer", "Database", "Transaction", "index_files", "read_only_uri", "read_sidecar",
           "remove_stale_temps"]

PRUNE_EVERY = 1_000  # the writer drops older changes every this many generations (and at open)
_IN_CHUNK = 500  # rowids per "IN (...)" list
# The writer indexes new documents in FTS5 this many at a time, in the transaction that brings
# the unindexed ones to this many: an FTS5 row written in a transaction of its own cost more
# than the document row (FTS5 writes a segment at every commit and merges them as they pile
# up: 0.05 ms of a 0.12 ms remember()'s SQL), a batch of 128 about 0.013 ms a row. Under 1%
# of the calls pay for a batch (about 2 ms), so remember()'s p99 does not move.
FTS_BATCH = 128


class Transaction:
    """Writes inside one SQLite transaction, recorded as ops for the mirror to follow after COMMIT.

    Every document write also writes the FTS5 table, so the two can never disagree.
    """

    def __init__(self, database: Database, mirror: Mirror):
        self.database = database
        self.conn = database.conn
        self.mirror = mirror
        self.generation = database.generation + 1  # what this transaction commits as
        self.ops: list[tuple[Any, ...]] = []
        self.scopes: dict[str, str] = {}  # FTS scope of documents whose session moved in this transaction
        self.records_counter: str | None = None  # the token counter this transaction names in vx_meta
        self.last_rowid = 0  # the rowid of the last document this transaction inserted
        self.behind = False  # the one writer's mirror is never behind its own file

    def insert(self, id: str, text: str, meta: dict[str, Any], vec: np.ndarray, tokens: int) -> None:
        """Add a document, ``tokens`` being its text's (checked) token count; its vector's
        dimension becomes the collection's if it has none yet."""
        dim = self.database.dim
        if dim is not None and vec.shape[0] != dim:  # embedded outside the lock, before another thread's first write
            raise ValueError(f"a {vec.shape[0]}-d vector for a collection of {dim}-d vectors")
        self.database.set_dim(self, vec.shape[0])
        blob = np.asarray(vec, dtype=np.float32).tobytes()  # a float32 vector as it is, no copy first
        cur = self.conn.execute("INSERT INTO vx_docs (id, text, metadata, vector, tokens) VALUES (?, ?, ?, ?, ?)",
                                (id, text, _dumps(meta), blob, self._stored(tokens)))
        rowid = self.last_rowid = int(cur.lastrowid or 0)  # FTS5 gets it with its batch (see Database.transaction)
        self.conn.execute("INSERT INTO vx_changes (generation, doc, op) VALUES (?, ?, 'insert')",
                          (self.generation, rowid))
        self.ops.append(("insert", rowid, id, text, meta, vec, tokens))

    def insert_accesses(self, times: Sequence[float]) -> None:
        """Record the document this transaction inserted last as accessed at each of ``times``
        (a restore carries a memory's access log over with it)."""
        self.conn.executemany("INSERT OR IGNORE INTO vx_access (doc, at) VALUES (?, ?)",
                              [(self.last_rowid, float(t)) for t in times])

    def put_late(self, model: str, bits: bytes) -> None:
        """Store the late-interaction token vectors ``model`` made for the document this
        transaction inserted last (see :mod:`vxmem.store.sqlite.late_table`)."""
        late_table.put(self.conn, model, [(self.last_rowid, bits)])

    def put_late_context(self, model: str, prev: int, bits: bytes) -> None:
        """Store the token vectors ``model`` made of the document this transaction inserted
        last read after the document with rowid ``prev``."""
        late_table.put_context(self.conn, model, self.last_rowid, prev, bits)

    def _stored(self, tokens: int) -> int | None:
        """``tokens`` as stored: the count if the handle's token counter is the one ``vx_meta``
        names (named by this transaction if none is yet), else NULL (counted again at open)."""
        db = self.database
        name = db.counted_by
        if name is None or db.schema_version < 5:
            return None
        if db.token_counter is None and self.records_counter is None:
            self.conn.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('token_counter', ?)", (name,))
            self.records_counter = name
        return int(tokens) if name in (db.token_counter, self.records_counter) else None

    def update_meta(self, id: str, meta: dict[str, Any]) -> None:
        """Replace a document's metadata (moving its FTS scope if its session changed)."""
        self.conn.execute("UPDATE vx_docs SET metadata = ? WHERE id = ?", (_dumps(meta), id))
        self.conn.execute("INSERT INTO vx_changes (generation, doc, op) SELECT ?, rowid, 'update' FROM vx_docs "
                          "WHERE id = ?", (self.generation, id))
        m = self.mirror
        p = m.pos_of_id.get(id)
        if p is not None and m.rowid[p] <= self.database.fts_upto:  # one not indexed yet is, with its scope then
            old = self.scopes[id] if id in self.scopes else scope_token(m.metas[p])
            new = scope_token(meta)
            if old != new:
                rowid, text = int(m.rowid[p]), m.texts[p]
                self.conn.execute("INSERT INTO vx_fts (vx_fts, rowid, text, scope) VALUES ('delete', ?, ?, ?)",
                                  (rowid, text, old))
                self.conn.execute("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)", (rowid, text, new))
                self.scopes[id] = new  # the mirror follows only at commit
        self.ops.append(("update", id, meta))

    def delete(self, ids: Sequence[str]) -> None:
        """Delete documents by id."""
        m = self.mirror
        self.conn.executemany("INSERT INTO vx_changes (generation, doc, op) SELECT ?, rowid, 'delete' FROM vx_docs "
                              "WHERE id = ?", [(self.generation, i) for i in ids])
        self.conn.executemany("DELETE FROM vx_access WHERE doc = (SELECT rowid FROM vx_docs WHERE id = ?)",
                              [(i,) for i in ids])
        self.conn.executemany("DELETE FROM vx_docs WHERE id = ?", [(i,) for i in ids])
        # A contentless FTS5 row is deleted by restating what was indexed (a document not indexed
        # yet has no row to delete: deleting one FTS5 never held would damage its index).
        upto = self.database.fts_upto
        self.conn.executemany(
            "INSERT INTO vx_fts (vx_fts, rowid, text, scope) VALUES ('delete', ?, ?, ?)",
            [(int(m.rowid[p]), m.texts[p], self.scopes[i] if i in self.scopes else scope_token(m.metas[p]))
             for i, p in ((i, m.pos_of_id.get(i)) for i in ids) if p is not None and m.rowid[p] <= upto])
        self.ops.append(("delete", list(ids)))

    def take_counter(self, name: str) -> int:
        """The counter's value, moved on by one, in one statement."""
        return int(self.conn.execute(
            "INSERT INTO vx_counters (name, value) VALUES (?, 1) "
            "ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value - 1", (name,)).fetchone()[0])

    def counter(self, name: str) -> int:
        """The counter's value (0 before it was first taken)."""
        row = self.conn.execute("SELECT value FROM vx_counters WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row else 0

    def raise_counter(self, name: str, value: int) -> None:
        """Move the counter up to at least ``value`` (never down)."""
        self.conn.execute(
            "INSERT INTO vx_counters (name, value) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET value = max(value, excluded.value)", (name, int(value)))


class Database(DatabaseLoader):
    """One open database: the connection, its ``vx_meta`` state and, for a writer, the lock.

    ``path=None`` is an in-memory database. Opening creates the schema in a fresh file,
    refuses a file that is not a vxmem database (:class:`~vxmem.core.errors.InvalidDatabaseError`, never an
    empty store), and brings an older file up to this schema once (a read-only handle
    reads an older file as it is). ``dim`` (None until the first vector), ``generation``,
    ``uid``, ``schema_version`` and ``embedder`` (the name of the embedder that wrote the
    vectors, None when unrecorded) mirror ``vx_meta``. ``writer_embedder`` is the name this
    handle records with the first vector. ``token_counter`` is the name of the token counter
    whose counts ``vx_docs`` stores (None when unrecorded); ``counted_by`` the name of this
    handle's counter (None: its counts are never stored). ``pid`` is the process that opened it: in another
    one (a fork) :meth:`close` leaves the parent's lock and connection alone.
    ``saved_at`` is the generation of the mirror file this handle read or wrote (None: this
    open read the rows); ``checkpointer`` runs a writer's WAL checkpoints (None for a
    read-only or in-memory handle).
    """

    @property
    def follows_writers(self) -> bool:
        """Whether other processes write this file (a read-only handle follows the writer)."""
        return self.read_only

    pooled = False  # one connection of its own, never given back (see PgDatabase.release)

    def release(self) -> None:
        """Nothing: a file's connection is the handle's own."""

    def new_lexical(self, mirror: Callable[[], Mirror]) -> LexicalSearch:
        """The lexical search over this file's FTS5 table (``mirror`` is not needed: FTS5 is in the file)."""
        return LexicalSearch(self.conn, lambda: self.generation, self.path, self.uid, self.indexed_upto,
                             None if self.read_only else self.index_pending)

    def late_vectors(self, model: str, rowids: Sequence[int]) -> dict[int, bytes]:
        """The token vectors ``model`` stored for each of ``rowids`` that has them."""
        return late_table.get(self.conn, model, rowids)

    def late_context_vectors(self, model: str, rowids: Sequence[int]) -> dict[int, tuple[int, bytes]]:
        """``(prev, bits)`` ``model`` stored for each of ``rowids`` read in context, where stored."""
        return late_table.get_context(self.conn, model, rowids)

    @contextmanager
    def transaction(self, mirror: Mirror) -> Iterator[Transaction]:
        """One SQLite transaction (``BEGIN IMMEDIATE``); ``generation`` moves on if it wrote.

        A failure rolls back, if SQLite has not already (a full disk can end the
        transaction itself), and the error raised is the one that happened.
        """
        if self.read_only:
            raise ReadOnlyError(f"{self.path} is open read_only")
        tx = Transaction(self, mirror)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield tx
            indexed = self._index_fts() if tx.last_rowid - self.fts_upto >= FTS_BATCH else self.fts_upto
            if tx.ops:
                self.conn.execute("UPDATE vx_meta SET value = ? WHERE key = 'generation'", (str(tx.generation),))
                if tx.generation % PRUNE_EVERY == 0:
                    self._prune(tx.generation)
            self.conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            rollback(self.conn)
            if is_disk_full(exc):
                raise disk_full(self.path, exc) from exc
            raise
        except BaseException:
            rollback(self.conn)
            raise
        self.fts_upto = indexed
        if tx.ops:
            self.generation = tx.generation
        if tx.records_counter is not None:
            self.token_counter = tx.records_counter
        if self.checkpointer is not None:
            self.checkpointer.committed(self.conn)

    def set_dim(self, tx: Transaction, dim: int) -> None:
        """Fix the collection's vector dimension with its first vector, in ``tx`` (and record
        ``writer_embedder`` as the embedder that made it)."""
        if self.dim is None:
            tx.conn.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('dim', ?)", (str(dim),))
            self.dim = dim
            tx.mirror.set_dim(dim)
            if self.writer_embedder is not None and self.embedder is None:
                tx.conn.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('embedder', ?)",
                                (self.writer_embedder,))
                self.embedder = self.writer_embedder

    def record_access(self, rowids: Sequence[int], at: float) -> None:
        """Record that the documents ``rowids`` were accessed at ``at`` (epoch seconds), in one
        small transaction of its own (or the one this handle has open). It moves no
        generation: the documents did not change. Nothing is written on a read-only handle."""
        if self.read_only or not rowids:
            return
        own = not self.conn.in_transaction
        if own:
            self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany("INSERT OR IGNORE INTO vx_access (doc, at) VALUES (?, ?)",
                                  [(int(r), float(at)) for r in rowids])
            if own:
                self.conn.execute("COMMIT")
        except BaseException:
            if own:
                rollback(self.conn)
            raise
        if own and self.checkpointer is not None:
            self.checkpointer.committed(self.conn)

    def last_access(self, rowids: Sequence[int], before: float) -> dict[int, float]:
        """Each document's latest access strictly before ``before``, for those of ``rowids``
        that had one (a file older than the access log has none)."""
        if self.schema_version < 4 or not rowids:
            return {}
        out: dict[int, float] = {}
        docs = [int(r) for r in rowids]
        with self._damage_is_invalid():
            for start in range(0, len(docs), _IN_CHUNK):
                part = docs[start: start + _IN_CHUNK]
                marks = ",".join("?" * len(part))
                out.update(self.conn.execute(
                    f"SELECT doc, max(at) FROM vx_access WHERE doc IN ({marks}) AND at < ? GROUP BY doc",
                    (*part, float(before))))
        return out

    def record_embedder(self, name: str) -> None:
        """Record ``name`` as the embedder of a database that holds vectors but no name yet
        (one written before names were recorded, checked by the caller)."""
        if self.read_only:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('embedder', ?)", (name,))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.embedder = name
