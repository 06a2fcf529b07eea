"""The database file: opening, the schema's migration, the change log, loading, the write side.

SQLite (WAL) is the source of truth for text, metadata and vectors; everything else the
process holds (the mirror, the HNSW index, the lexical postings) is rebuilt from it. One
process writes a database file at a time: a second writer gets
:class:`~vxmem.core.errors.DatabaseLockedError` at open. ``read_only=True`` opens without
the lock and sees what writers have committed.

Every committed write moves ``generation`` on and lists the rows it touched in
``vx_changes`` (same transaction), so a read-only handle applies only what changed since
the generation it holds, read in one read transaction (a commit is seen whole or not at
all). The writer keeps the last :data:`CHANGE_WINDOW` generations of the log; a reader
further behind, or a file replaced under it, reloads in full.

The DDL is in :mod:`vxmem.store.schema`, the files beside the database and the writer lock
in :mod:`vxmem.store.files`, the writer's WAL checkpoints in :mod:`vxmem.store.checkpoint`;
their public names are importable from here too (the checkpoint cadence,
``CHECKPOINT_EVERY`` and ``CHECKPOINT_CAP``, is read where it is defined).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..core.errors import InvalidDatabaseError, ReadOnlyError
from ..core.tokens import token_counter_name
from . import mirror_file
from .checkpoint import JOURNAL_SIZE_LIMIT, Checkpointer
from .checks import check_token_count
from .files import (
    _WRITER_LOCKS,
    close_connection,
    index_files,
    mirror_path,
    postings_path,
    read_only_uri,
    read_sidecar,
    remove_stale_temps,
)
from .jsonio import dumps as _dumps
from .jsonio import loads_all
from .lexical import scope_token, snapshot_read
from .mirror import Mirror
from .schema import _ACCESS_SCHEMA, _CHANGES_SCHEMA, _FTS_SCHEMA, _SCHEMA, _TOKENS_SCHEMA, FORMAT_NAME, SCHEMA_VERSION
from .snapshot import remove as remove_file

__all__ = ["CHANGE_WINDOW", "FORMAT_NAME", "FTS_BATCH", "JOURNAL_SIZE_LIMIT", "PRUNE_EVERY", "SCHEMA_VERSION",
           "Checkpointer", "Database", "Transaction", "index_files", "read_only_uri", "read_sidecar",
           "remove_stale_temps"]

CHANGE_WINDOW = 10_000  # generations of vx_changes the writer keeps for read-only handles
PRUNE_EVERY = 1_000  # the writer drops older changes every this many generations (and at open)
MAX_TOKENS = 2**40 - 1  # a stored token count above this (or not an integer) is counted again
_DOC_COLUMNS = "rowid, id, text, metadata, vector"
_IN_CHUNK = 500  # rowids per "IN (...)" list
RESAVE_GENERATIONS = 1_000  # a close saves the mirror file again once it is this many generations behind
RESAVE_ROWS = 1_000  # ... or once this many rows changed (2% of the documents, when that is more)
# The writer indexes new documents in FTS5 this many at a time, in the transaction that brings
# the unindexed ones to this many: an FTS5 row written in a transaction of its own cost more
# than the document row (FTS5 writes a segment at every commit and merges them as they pile
# up: 0.05 ms of a 0.12 ms remember()'s SQL), a batch of 128 about 0.013 ms a row. Under 1%
# of the calls pay for a batch (about 2 ms), so remember()'s p99 does not move.
FTS_BATCH = 128


def resave_rows(n: int) -> int:
    """Changed rows from which a close saves the files beside ``n`` documents again (fewer
    are taken from the log, or tokenised, at the next open)."""
    return max(RESAVE_ROWS, n // 50)


def _release_heap() -> None:
    """Hand the heap the rows of a large load left free back to the system (glibc keeps
    freed blocks for reuse: 150 MB of vector blobs at 100k documents); elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


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


class Database:
    """One open database: the connection, its ``vx_meta`` state and, for a writer, the lock.

    ``path=None`` is an in-memory database. Opening creates the schema in a fresh file,
    refuses a file that is not a vxmem database (:class:`InvalidDatabaseError`, never an
    empty store), and brings an older file up to this schema once (a read-only handle
    reads an older file as it is). ``dim`` (None until the first vector), ``generation``,
    ``uid``, ``schema_version`` and ``embedder`` (the name of the embedder that wrote the
    vectors, None when unrecorded) mirror ``vx_meta``. ``writer_embedder`` is the name this
    handle records with the first vector. ``token_counter`` is the name of the token counter
    whose counts ``vx_docs`` stores (None when unrecorded); ``counted_by`` the name of this
    handle's counter (None: its counts are never stored). ``pid`` is the process that opened it: in another
    one (a fork) :meth:`close` leaves the parent's lock and connection alone.
    """

    def __init__(self, path: str | None, read_only: bool = False):
        self.path = path
        self.read_only = read_only
        self.dim: int | None = None
        self.vector_dtype = np.dtype(np.float32)  # the mirror's (SQLite always holds float32)
        self.generation = 0
        self.uid: str | None = None
        self.embedder: str | None = None
        self.writer_embedder: str | None = None
        self.token_counter: str | None = None
        self.counted_by: str | None = None
        self.schema_version = SCHEMA_VERSION
        self.pid = os.getpid()
        self._lock_fd: int | None = None
        self._data_version: int | None = None
        self._has_changes = False
        self._saved_at: int | None = None  # the generation the mirror file holds, when this handle knows it
        self.counts_mixed = False  # the token counter changed on this open handle: its mirror saves no file
        self._checkpointer: Checkpointer | None = None
        # A writer's: FTS5 holds every document up to this rowid, none above (see FTS_BATCH).
        self.fts_upto = 0
        self._opened = False  # the schema is read: close() may index what is left
        existing_empty = False
        if path is None:
            self.conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        elif read_only:
            if not os.path.exists(path):
                raise FileNotFoundError(f"no database at {path}")
            try:
                self.conn = sqlite3.connect(read_only_uri(path), uri=True, check_same_thread=False,
                                            isolation_level=None)
            except sqlite3.Error as exc:
                raise InvalidDatabaseError(f"{path} cannot be opened read-only: {exc}") from None
        else:
            existing_empty = os.path.isfile(path) and os.path.getsize(path) == 0
            self._take_writer_lock(path)
            try:
                self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
            except BaseException:
                self.close()
                raise
        try:
            with self._damage_is_invalid():
                self._init_schema(existing_empty)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening

    def _take_writer_lock(self, path: str) -> None:
        self._lock_fd = _WRITER_LOCKS.take(path)

    def _init_schema(self, existing_empty: bool) -> None:
        c = self.conn
        tables = self._tables()
        if tables and "vx_meta" not in tables:
            raise InvalidDatabaseError(f"{self.path} is an SQLite database but not a vxmem one "
                                       f"(its tables: {', '.join(sorted(tables)[:5])})")
        if not tables and existing_empty:
            self._refuse_truncated()  # before the WAL pragma writes a header over the evidence
        if not self.read_only:
            if self.path is not None:
                c.execute("PRAGMA journal_mode = WAL")
            c.execute("PRAGMA synchronous = NORMAL")
            if self.path is not None:
                c.execute("PRAGMA wal_autocheckpoint = 0")
                c.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
                self._checkpointer = Checkpointer(self.path)
        if not tables:
            if self.read_only:
                raise InvalidDatabaseError(f"{self.path} is empty: not a vxmem database")
            c.execute("BEGIN IMMEDIATE")
            for ddl in _SCHEMA + _FTS_SCHEMA + _CHANGES_SCHEMA + _ACCESS_SCHEMA:
                c.execute(ddl)
            c.executemany("INSERT OR IGNORE INTO vx_meta (key, value) VALUES (?, ?)",
                          [("format", FORMAT_NAME), ("schema_version", str(SCHEMA_VERSION)),
                           ("generation", "0"), ("uid", uuid.uuid4().hex), ("changes_since", "0"),
                           ("fts_upto", "0")])
            c.execute("COMMIT")
        meta = self._read_meta()
        if self.schema_version < SCHEMA_VERSION and not self.read_only:
            self._migrate()
            meta = self._read_meta()
        self._has_changes = self.schema_version >= 3 and "vx_changes" in self._tables()
        if not self.read_only and self._has_changes:
            self._prune(self.generation, force=True)
        if self.path is not None and not self.read_only:
            remove_stale_temps(self.path)
        if not self.read_only:
            self.fts_upto = int(meta["fts_upto"])
            try:
                self.index_pending()  # what a killed writer left unindexed
            except sqlite3.OperationalError:  # a full disk: searches tokenise them; the close tries again
                pass
        self.uid = meta.get("uid")  # ties a saved index file to this database, not one made at the same path
        self._opened = True

    def _tables(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _read_meta(self) -> dict[str, str]:
        """``vx_meta``, checked, with ``dim``, ``generation`` and ``schema_version`` taken from it."""
        meta = dict(self.conn.execute("SELECT key, value FROM vx_meta"))
        if meta.get("format") != FORMAT_NAME:
            raise InvalidDatabaseError(f"{self.path} is not a vxmem database (format {meta.get('format')!r})")
        version = int(meta.get("schema_version", 0))
        if version > SCHEMA_VERSION:
            raise InvalidDatabaseError(f"{self.path} was written by a newer vxmem (schema "
                                       f"{meta['schema_version']}, this one reads {SCHEMA_VERSION})")
        self.schema_version = version
        self.dim = int(meta["dim"]) if "dim" in meta else None
        self.generation = int(meta.get("generation", 0))
        self.embedder = meta.get("embedder")
        self.token_counter = meta.get("token_counter")
        return meta

    def _refuse_truncated(self) -> None:
        """An empty file whose index file says it held documents was truncated, not created:
        starting it afresh would be a silently empty store."""
        assert self.path is not None
        side = read_sidecar(self.path)
        held = side.get("count", 0) if side else 0
        if held:
            raise InvalidDatabaseError(
                f"{self.path} is empty, but its index file says it held {held} documents: the database "
                f"was truncated or replaced. Restore it, or delete {self.path}.usearch* to start afresh")

    def _migrate(self) -> None:
        """Bring an older database up to this schema, once, in one transaction: a version-1
        file gains its FTS5 table (every document indexed), a version-2 file its change log,
        a version-3 file its access log, a file older than version 5 the token column
        (empty: the first writable load fills it), a file older than version 6 its ``fts_upto``
        (every document: they were indexed one by one)."""
        from tqdm.auto import tqdm

        c = self.conn
        version = self.schema_version
        c.execute("BEGIN IMMEDIATE")
        try:
            if version < 2:
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
            if version < 3:
                for ddl in _CHANGES_SCHEMA:
                    c.execute(ddl)
                # Readers that hold an older generation have no log to follow: they reload in full.
                c.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('changes_since', ?)",
                          (str(self.generation),))
            if version < 4:
                for ddl in _ACCESS_SCHEMA:
                    c.execute(ddl)
            if version < 5 and "tokens" not in self._doc_columns():
                for ddl in _TOKENS_SCHEMA:
                    c.execute(ddl)
            if version < 6:  # an older vxmem indexed every document in its own transaction
                c.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES "
                          "('fts_upto', (SELECT CAST(COALESCE(max(rowid), 0) AS TEXT) FROM vx_docs))")
            c.execute("UPDATE vx_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            c.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def _doc_columns(self) -> set[str]:
        return {r[1] for r in self.conn.execute("PRAGMA table_info(vx_docs)")}

    def _prune(self, generation: int, force: bool = False) -> None:
        """Drop the change log older than :data:`CHANGE_WINDOW` generations before ``generation``
        (inside the caller's transaction, or in one of its own with ``force``)."""
        floor = generation - CHANGE_WINDOW
        if floor <= 0:
            return
        c = self.conn
        if force:
            oldest = c.execute("SELECT min(generation) FROM vx_changes").fetchone()[0]
            if oldest is None or oldest > floor:
                return
            c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("DELETE FROM vx_changes WHERE generation <= ?", (floor,))
            c.execute("UPDATE vx_meta SET value = CAST(max(CAST(value AS INTEGER), ?) AS TEXT) "
                      "WHERE key = 'changes_since'", (floor,))
            if force:
                c.execute("COMMIT")
        except BaseException:
            if force:
                self._rollback()
            raise

    # ------------------------------------------------------------------ reading

    def _snapshot(self) -> contextlib.AbstractContextManager[None]:
        """One read transaction: every read inside sees the same committed state (inside a
        write transaction of this handle, a search made while writing, that transaction's)."""
        return snapshot_read(self.conn)

    def load(self, token_counter: Callable[[str], int]) -> Mirror:
        """Every document, read into a fresh :class:`Mirror`, in one read transaction with ``vx_meta``.

        Each text's token count is the stored one when ``token_counter`` is the counter that
        stored it (see :func:`~vxmem.core.tokens.token_counter_name`), otherwise counted now; a
        writer then stores the counts its counter made where none of that counter's were
        (once: an older file, or rows a handle with another counter wrote). A damaged row or
        ``vx_meta`` value is an :class:`InvalidDatabaseError`; a token counter that returns
        something other than a count is a ``TypeError`` / ``ValueError`` naming it.
        """
        probe = self._probe()
        name = token_counter_name(token_counter)
        with self._damage_is_invalid(), self._snapshot():
            meta = self._read_meta()
            self._has_changes = self._has_changes or (self.schema_version >= 3 and "vx_changes" in self._tables())
            saved = self._saved_mirror(meta, name, token_counter)
            if saved is None:
                m, stored = self._read_all(name)
        self.uid = meta.get("uid")
        self._saved_at = None if saved is None else saved[2]
        if saved is not None:
            m, uncounted, _ = saved  # rowids the change log brought whose counts were not stored
            counted = m.rowid_pos[np.array(uncounted, dtype=np.int64)]
        else:
            counted = self._fill_tokens(m, token_counter, stored)
        self._data_version = probe
        if counted.size and name is not None and not self.read_only and self.schema_version >= 5 \
                and self.token_counter in (None, name):
            try:
                self._store_counts(m, counted, name)
            except sqlite3.Error:  # a cache of the texts: a full disk leaves them to be counted at the next open
                pass
        return m

    def _saved_mirror(self, meta: dict[str, str], counter: str | None,
                      token_counter: Callable[[str], int]) -> tuple[Mirror, list[int], int] | None:
        """The mirror file's mirror brought up to this read transaction's state through the
        change log, if the file is provably this database's (see :mod:`~vxmem.store.mirror_file`),
        the rowids it counted the tokens of (none were stored) and the file's generation;
        otherwise None."""
        since = int(meta.get("changes_since", -1))
        # Only for the counter whose counts vx_docs stores: any other open counts (and a writer
        # stores) them the way a full read does.
        if self.path is None or counter is None or counter != self.token_counter or self.dim is None \
                or not self._has_changes or self.schema_version != SCHEMA_VERSION:
            return None
        got = mirror_file.load(mirror_path(self.path),
                               {"uid": meta.get("uid"), "dim": self.dim, "schema": SCHEMA_VERSION, "counter": counter},
                               self.vector_dtype)
        if got is None:
            return None
        m, fields = got
        uncounted: list[int] = []
        saved = fields.get("generation")
        if type(saved) is not int or not 0 <= since <= saved <= self.generation:
            return None
        if saved < self.generation:
            logged = self._logged_ops(m, saved)
            if logged is None:
                return None
            ops, stored = logged
            for op in ops:
                if op[0] == "insert":
                    count = stored[op[1]]
                    if type(count) is not int or not 0 <= count <= MAX_TOKENS:  # none stored: counted, as a full read
                        uncounted.append(op[1])
                        count = check_token_count(token_counter(op[3]), op[3])
                    op[6] = count
            m.apply([tuple(op) for op in ops])
            if m.needs_compaction():
                m = m.compacted()
        return (m, uncounted, saved) if mirror_file.agrees(m, self.conn) else None

    def save_mirror(self, m: Mirror) -> bool:
        """Save ``m`` as the mirror file a later open reads (a writer's ``close()``), unless
        the file already holds this generation; True when the collection keeps such files
        beside it (a writer's, of at least :data:`~vxmem.store.mirror_file.MIN_DOCUMENTS`
        documents; a smaller one's files are removed). A cache: a failure to write it (a
        full disk) raises nothing, and the next open reads the rows."""
        if self.read_only or self.path is None or self.uid is None:
            return False
        if m.n_alive < mirror_file.MIN_DOCUMENTS:
            for name in (mirror_path(self.path), postings_path(self.path)):
                remove_file(name)
            return False
        if self.counted_by is not None and not self.counts_mixed and not self._file_is_close(m):
            try:
                mirror_file.save(mirror_path(self.path), m, {
                    "uid": self.uid, "generation": self.generation, "schema": SCHEMA_VERSION,
                    "counter": self.counted_by})
                self._saved_at = self.generation
            except (OSError, ValueError):
                pass
        return True

    def _file_is_close(self, m: Mirror) -> bool:
        """Whether the mirror file is near enough this handle's state that an open taking the
        changes since from the log costs little: fewer than :data:`RESAVE_GENERATIONS`
        generations behind, with fewer changed rows than :func:`resave_rows` of ``m``
        (so a close after a few writes does not write the whole file again)."""
        saved = self._saved_at
        if saved is None:
            return False
        if saved == self.generation:
            return True
        if not 0 < self.generation - saved < RESAVE_GENERATIONS:
            return False
        (changed,) = self.conn.execute("SELECT count(*) FROM vx_changes WHERE generation > ?", (saved,)).fetchone()
        return bool(changed < resave_rows(m.n_alive))

    def _read_all(self, counter: str | None) -> tuple[Mirror, list[int | None] | None]:
        """Every row, into a fresh mirror, and the stored token counts ``counter`` made (None
        for a row without one; None for all when it made none), inside the caller's read transaction."""
        usable = counter is not None and counter == self.token_counter and self.schema_version >= 5
        tokens = (f"CASE WHEN typeof(tokens) = 'integer' AND tokens BETWEEN 0 AND {MAX_TOKENS} THEN tokens END"
                  if usable else "NULL")
        rows = self.conn.execute(f"SELECT {_DOC_COLUMNS}, {tokens} FROM vx_docs ORDER BY rowid").fetchall()
        m, stored = self._mirror_of(rows)
        stored = stored if usable else None
        big = len(rows) >= 10_000
        del rows
        if big:
            _release_heap()
        return m, stored

    def _store_counts(self, m: Mirror, positions: np.ndarray, name: str) -> None:
        """Store the counts at ``positions`` as ``name``'s (a writer's open: one transaction
        of its own, which moves no generation: the documents are unchanged)."""
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('token_counter', ?)", (name,))
            c.executemany("UPDATE vx_docs SET tokens = ? WHERE rowid = ?",
                          zip(m.tokens[positions].tolist(), m.rowid[positions].tolist()))
            c.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self.token_counter = name
        if self._checkpointer is not None:
            self._checkpointer.committed(c)

    def _probe(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def _mirror_of(self, rows: list[tuple[Any, ...]]) -> tuple[Mirror, list[Any] | None]:
        """A mirror of ``rows`` (rowid, id, text, metadata, vector, stored token count) and the
        rows' stored counts (None when there are no rows)."""
        m = Mirror(self.dim, self.vector_dtype)
        if not rows:
            if self.dim is not None:
                m.set_dim(self.dim)
            return m, None
        if self.dim is None:
            raise InvalidDatabaseError(f"{self.path}: documents but no vector dimension in vx_meta")
        m.set_dim(self.dim)
        rowids, ids, texts, metas, blobs, stored = (list(col) for col in zip(*rows))
        try:
            # Room to double: the first writes after open never grow (copy) every column, and
            # the vectors' headroom is zero pages that take no memory until written.
            m.fill(rowids, ids, texts, loads_all(metas), blobs)
        except ValueError as exc:
            if "-d vector" in str(exc):
                raise InvalidDatabaseError(f"{self.path}: {exc}") from None
            raise
        return m, stored

    def _vector(self, id: str, blob: bytes) -> np.ndarray:
        vec = np.frombuffer(blob, dtype=np.float32)
        if vec.shape[0] != self.dim:
            raise InvalidDatabaseError(f"{self.path}: document {id!r} has a {vec.shape[0]}-d vector, "
                                       f"expected {self.dim}")
        return vec

    @staticmethod
    def _fill_tokens(m: Mirror, token_counter: Callable[[str], int], stored: list[int | None] | None) -> np.ndarray:
        """Fill a fresh mirror's token column: the ``stored`` counts where there are, the
        counter's (checked) elsewhere. Returns the positions counted now."""
        texts = m.texts
        if stored is None:
            todo = np.arange(m.n)
        else:
            missing = [p for p, t in enumerate(stored) if t is None]
            m.tokens[: m.n] = [0 if t is None else t for t in stored]
            todo = np.asarray(missing, dtype=np.int64)
        if todo.size:
            m.tokens[todo] = [check_token_count(token_counter(texts[p]), texts[p]) for p in todo.tolist()]
        return todo

    def changes_since(self, generation: int) -> tuple[set[int], set[int]] | None:
        """(inserted, deleted) rowids committed after ``generation`` up to the one this
        handle holds, from the change log, in one read transaction; None when the log does
        not reach back that far (pruned, or a file without one)."""
        if generation == self.generation:
            return set(), set()
        if not self._has_changes:
            return None
        with self._damage_is_invalid(), self._snapshot():
            row = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'changes_since'").fetchone()
            if row is None or generation < int(row[0]):
                return None
            inserted: set[int] = set()
            deleted: set[int] = set()
            for doc, op in self.conn.execute(
                    "SELECT doc, op FROM vx_changes WHERE generation > ? AND generation <= ? AND op != 'update'",
                    (generation, self.generation)):
                (inserted if op == "insert" else deleted).add(int(doc))
        return inserted, deleted

    def refresh(self, mirror: Mirror, token_counter: Callable[[str], int]) -> list[tuple[Any, ...]] | Mirror | None:
        """For a read-only handle: what writers committed since ``mirror`` was read.

        None when nothing was; otherwise the ops of the change (``("insert", rowid, id,
        text, meta, vec, tokens)``, ``("update", id, meta)``, ``("delete", [ids])``, for
        ``Collection._follow``), read from the change log in one read transaction, or a whole
        new :class:`Mirror` when the log cannot say (an older file, a reader further behind
        than the log reaches, or another database now at this path). ``PRAGMA data_version``
        taken before the transaction is the cheap "anything new?" probe, so a commit that
        lands while this reads is picked up by the next call.
        """
        if not self.read_only:
            return None
        probe = self._probe()
        if probe == self._data_version:
            return None
        state = (self.uid, self.generation, self.dim, self.schema_version, self._has_changes, self.token_counter)
        try:
            return self._refresh(mirror, token_counter, probe)
        except BaseException:  # nothing taken in: the next call tries again from the same state
            self.uid, self.generation, self.dim, self.schema_version, self._has_changes, self.token_counter = state
            raise

    def _refresh(self, mirror: Mirror, token_counter: Callable[[str], int],
                 probe: int) -> list[tuple[Any, ...]] | Mirror | None:
        with self._damage_is_invalid(), self._snapshot():
            old_uid, old_gen, old_dim = self.uid, self.generation, self.dim
            meta = self._read_meta()
            uid, since = meta.get("uid"), int(meta.get("changes_since", -1))
            if uid == old_uid and self.generation == old_gen:
                self._data_version = probe
                return None
            has_changes = self.schema_version >= 3 and (self._has_changes or "vx_changes" in self._tables())
            self._has_changes = has_changes
            incremental = (uid == old_uid and has_changes and 0 <= since <= old_gen < self.generation
                           and (old_dim is None or old_dim == self.dim) and (old_dim is not None or mirror.n == 0))
            if not incremental:
                self.uid = uid
                fresh, stored = self._read_all(token_counter_name(token_counter))
            else:
                logged = self._logged_ops(mirror, old_gen)
                ops = None if logged is None else logged[0]
        if not incremental:
            self._fill_tokens(fresh, token_counter, stored)
            self._data_version = probe
            return fresh
        if ops is None:  # the log and the mirror disagree: read it all
            self._data_version = None
            return self.refresh_full(token_counter)
        for op in ops:
            if op[0] == "insert":
                op[6] = check_token_count(token_counter(op[3]), op[3])
        if old_dim is None and self.dim is not None:
            mirror.set_dim(self.dim)
        self._data_version = probe
        return [tuple(op) for op in ops]

    def refresh_full(self, token_counter: Callable[[str], int]) -> Mirror:
        """A whole new mirror (and ``vx_meta`` read again), in one read transaction."""
        return self.load(token_counter)

    def _logged_ops(self, mirror: Mirror, generation: int) -> tuple[list[list[Any]], dict[int, Any]] | None:
        """The ops that bring ``mirror`` (at ``generation``) to this read transaction's state,
        from the rows the change log names since, and those rows' stored token counts by
        rowid (inserts carry a count of 0: the caller counts); None if they cannot (see
        :meth:`_ops_of`)."""
        touched = {r for (r,) in self.conn.execute(
            "SELECT DISTINCT doc FROM vx_changes WHERE generation > ?", (generation,))}
        rows = self.conn.execute(
            f"SELECT {_DOC_COLUMNS}, tokens FROM vx_docs WHERE rowid IN "
            "(SELECT doc FROM vx_changes WHERE generation > ?) ORDER BY rowid", (generation,)).fetchall()
        ops = self._ops_of(mirror, touched, [r[:5] for r in rows])
        return None if ops is None else (ops, {r[0]: r[5] for r in rows})

    def _ops_of(self, mirror: Mirror, touched: set[int], rows: list[tuple[Any, ...]]) -> list[list[Any]] | None:
        """The ops that bring ``mirror`` to ``rows`` (the touched documents still present);
        None if they cannot (a new row below the mirror's last rowid)."""
        present = {r[0] for r in rows}
        deleted = [mirror.ids[p] for r in sorted(touched - present)
                   if (p := mirror.pos_of_rowid.get(r)) is not None]
        ops: list[list[Any]] = [["delete", deleted]] if deleted else []
        last = int(mirror.rowid[mirror.n - 1]) if mirror.n else 0
        for rowid, id, text, meta_json, blob in rows:
            p = mirror.pos_of_rowid.get(rowid)
            meta = json.loads(meta_json)
            if p is not None:
                ops.append(["update", id, meta])
            elif rowid > last:
                ops.append(["insert", rowid, id, text, meta, self._vector(id, blob), 0])
            else:
                return None
        # Deletions first (an id may be taken again by a new row), then updates, then inserts in rowid order.
        return sorted(ops, key=lambda op: ("delete", "update", "insert").index(op[0]))

    @contextmanager
    def _damage_is_invalid(self) -> Iterator[None]:
        """What a damaged file raises while it is read, as an :class:`InvalidDatabaseError`."""
        name = self.path or ":memory:"
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise InvalidDatabaseError(f"{name} is not a readable vxmem database: {exc}") from None
        except InvalidDatabaseError:
            raise
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # a damaged row or vx_meta value
            raise InvalidDatabaseError(f"{name} is damaged: {type(exc).__name__}: {exc}") from exc

    # ------------------------------------------------------------------ writing

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
        except BaseException:
            self._rollback()
            raise
        self.fts_upto = indexed
        if tx.ops:
            self.generation = tx.generation
        if tx.records_counter is not None:
            self.token_counter = tx.records_counter
        if self._checkpointer is not None:
            self._checkpointer.committed(self.conn)

    def _index_fts(self) -> int:
        """Index in FTS5, inside the caller's write transaction, every document above
        ``fts_upto`` (as it stands in this transaction: its text, and its session's scope
        token); the rowid FTS5 holds every document up to now, for ``fts_upto`` once it commits."""
        rows = self.conn.execute("SELECT rowid, text, metadata FROM vx_docs WHERE rowid > ? ORDER BY rowid",
                                 (self.fts_upto,)).fetchall()
        if not rows:
            return self.fts_upto
        metas = loads_all([mj for _, _, mj in rows])
        self.conn.executemany("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)",
                              [(r, t, scope_token(meta)) for (r, t, _), meta in zip(rows, metas)])
        upto = int(rows[-1][0])
        self.conn.execute("UPDATE vx_meta SET value = ? WHERE key = 'fts_upto'", (str(upto),))
        return upto

    def index_pending(self) -> None:
        """A writer's: index in FTS5, in a transaction of its own, the documents it holds
        unindexed (the last batch not yet full, or what a killed writer left), so FTS5 holds
        them all. A no-op for a read-only handle or inside a transaction."""
        if self.read_only or self.conn.in_transaction:
            return
        (last,) = self.conn.execute("SELECT COALESCE(max(rowid), 0) FROM vx_docs").fetchone()
        if last <= self.fts_upto:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            indexed = self._index_fts()
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self.fts_upto = indexed
        if self._checkpointer is not None:
            self._checkpointer.committed(self.conn)

    def indexed_upto(self) -> int | None:
        """The rowid FTS5 holds every document up to (and none above), as the current
        transaction sees it; None when it holds every document (a file of schema 5 or older,
        read as it is)."""
        if not self.read_only:
            return self.fts_upto
        row = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'fts_upto'").fetchone()
        return None if row is None else int(row[0])

    def _rollback(self) -> None:
        """Roll back the open transaction, if there still is one; never masks the error being handled."""
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:  # pragma: no cover - the error that brought us here is the one to raise
                pass

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
                self._rollback()
            raise
        if own and self._checkpointer is not None:
            self._checkpointer.committed(self.conn)

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

    def close(self) -> None:
        """Index what a writer left unindexed in FTS5, close the connection and release the writer lock.

        In a process other than the one that opened it (a fork), the connection and the
        lock are the parent's: the connection is left open (kept referenced, so it is never
        finalised here) and the lock is left held. (Lock descriptors are never closed; see
        :class:`~vxmem.store.files._WriterLocks`.)
        """
        conn = getattr(self, "conn", None)
        forked = os.getpid() != self.pid
        if conn is not None and not forked and self._opened:
            self._opened = False
            try:
                self.index_pending()  # a file at rest has every document in FTS5
            except sqlite3.Error:  # a full disk: the next writable open indexes them
                pass
        checkpointer = getattr(self, "_checkpointer", None)
        if checkpointer is not None:
            checkpointer.close(forked)  # before the connection: its close makes the last checkpoint
            self._checkpointer = None
        if conn is not None:
            close_connection(conn, forked)
        if self._lock_fd is not None:
            if not forked:
                _WRITER_LOCKS.release(self._lock_fd)
            self._lock_fd = None
