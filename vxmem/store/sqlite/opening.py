"""Opening a database file: the connection, the writer lock, the schema, ``vx_meta``, closing.

:class:`DatabaseFile` is what :class:`~vxmem.store.sqlite.database.Database` stands on. It opens
the file (the schema made in a fresh one, an older one migrated once: :mod:`vxmem.store.sqlite.schema`;
a file that is not a vxmem database refused), reads ``vx_meta``'s state, and does a
writer's upkeep of the file at open and close: the change log kept to its last
:data:`CHANGE_WINDOW` generations, every document indexed in FTS5.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ...core.errors import DatabaseLockedError, InvalidDatabaseError
from ..lexical.fts import scope_token
from . import schema
from .checkpoint import JOURNAL_SIZE_LIMIT, Checkpointer
from .files import (
    close_connection,
    creation_temp,
    log_files_gone,
    read_only_uri,
    read_sidecar,
    remove_stale_temps,
    remove_writer_note,
    rollback,
    snapshot_read,
    write_writer_note,
)
from .jsonio import loads_all
from .locks import (
    hold_file,
    let_go_file,
    names_file,
    out_of_descriptors,
    release_writer_lock,
    take_writer_lock,
    writer_open,
)
from .schema import FORMAT_NAME, SCHEMA_VERSION

CHANGE_WINDOW = 10_000  # generations of vx_changes the writer keeps for read-only handles


def create_whole(path: str) -> None:
    """Make a new database at ``path`` whole before anyone can see it: its schema is made
    under a temporary name beside it, then linked to ``path`` (which fails, leaving the
    file there alone, when another process made one first). A reader never finds the file
    half made, an empty file it would call no vxmem database. Where hard links are not to be
    had, the file is made in place, as it was."""
    tmp = creation_temp(path)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            schema.create(conn)
        finally:
            conn.close()
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    except (sqlite3.Error, OSError):  # made in place instead, which says what is wrong, if anything
        emfile = out_of_descriptors(path)
        if emfile is not None:
            raise emfile from None
    finally:
        for name in (tmp, tmp + "-journal"):
            with contextlib.suppress(OSError):
                os.remove(name)


def refuse_lost_log(path: str) -> None:
    """Refuse to read ``path`` when the write-ahead log of its open writer was deleted (or
    replaced) under it: that writer still writes into the deleted file, and a reader would
    see the database as it was at its last checkpoint, perhaps empty, without a word."""
    gone = log_files_gone(path)
    if not gone or not writer_open(path):
        return
    raise InvalidDatabaseError(
        f"{path} is open for writing, but its writer's {' and '.join(gone)} {'were' if len(gone) > 1 else 'was'} "
        "deleted or replaced under it: "
        f"what it wrote since its last checkpoint is only in the deleted file, so a reader here would see an "
        f"older (perhaps empty) database. Close that writer normally (its close writes everything into {path}; "
        "killed, it loses what the deleted file held), then open this again; never delete the -wal and -shm "
        "files of an open database")


class DatabaseFile:
    """The open file under a :class:`~vxmem.store.sqlite.database.Database` (whose docstring says
    what its attributes hold): the connection, ``vx_meta``'s state and, for a writer, the
    lock and the WAL checkpoints."""

    def __init__(self, path: str | None, read_only: bool = False, durability: str = "normal"):
        self.path = path
        self.read_only = read_only
        self.durability = durability  # "full": every commit synced to the disk before it returns
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
        self._held: tuple[int, int] | None = None  # a read-only handle's count in the file's handles
        self._data_version: int | None = None
        self._has_changes = False
        self.saved_at: int | None = None  # the generation the mirror file holds, when this handle knows it
        self.counts_mixed = False  # the token counter changed on this open handle: its mirror saves no file
        self.checkpointer: Checkpointer | None = None
        # A writer's: FTS5 holds every document up to this rowid, none above (see database.FTS_BATCH).
        self.fts_upto = 0
        self._opened = False  # the schema is read: close() may index what is left
        existing_empty = path is not None and not read_only and os.path.isfile(path) and os.path.getsize(path) == 0
        self.conn = self._connect(path)
        try:
            with self._damage_is_invalid():
                self._init_schema(existing_empty)
            if self._lock_fd is not None and not names_file(path, self._lock_fd):
                raise DatabaseLockedError(f"{path} was replaced by another file while it was being opened; "
                                          "open it again")
            if self._lock_fd is not None:
                with contextlib.suppress(OSError):  # a note is a help to readers; a writer opens without it
                    write_writer_note(path)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening

    def _connect(self, path: str | None) -> sqlite3.Connection:
        """The connection to ``path`` (a writer's once it holds the lock); a process out of
        descriptors gets an :class:`OSError` that says so, not a file called damaged."""
        if path is None:
            return sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        if self.read_only:
            if not os.path.exists(path):
                raise FileNotFoundError(f"no database at {path}")
            self._held = hold_file(path)
        else:
            if not os.path.lexists(path):
                create_whole(path)
            self._take_writer_lock(path)
        try:
            if self.read_only:
                refuse_lost_log(path)  # before connecting, which would make a new, empty log there
                return sqlite3.connect(read_only_uri(path), uri=True, check_same_thread=False, isolation_level=None)
            return sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        except sqlite3.Error as exc:
            error: Exception | None = out_of_descriptors(path)  # before the close frees a descriptor
            if error is None and self.read_only:
                error = InvalidDatabaseError(f"{path} cannot be opened read-only: {exc}")
            self.close()
            if error is not None:
                raise error from None
            raise
        except BaseException:
            self.close()
            raise

    def _take_writer_lock(self, path: str) -> None:
        self._lock_fd = take_writer_lock(path)
        remove_writer_note(path)  # a killed writer's, if any: this writer writes its own once its log is open

    def _init_schema(self, existing_empty: bool) -> None:
        c = self.conn
        tables = schema.tables(c)
        if tables and "vx_meta" not in tables:
            raise InvalidDatabaseError(f"{self.path} is an SQLite database but not a vxmem one "
                                       f"(its tables: {', '.join(sorted(tables)[:5])})")
        if not tables and existing_empty:
            self._refuse_truncated()  # before the WAL pragma writes a header over the evidence
        if not self.read_only:
            if self.path is not None:
                c.execute("PRAGMA journal_mode = WAL")
            # NORMAL in WAL mode: safe against a process crash; FULL also against a power loss.
            c.execute("PRAGMA synchronous = FULL" if self.durability == "full" else "PRAGMA synchronous = NORMAL")
            if self.path is not None:
                c.execute("PRAGMA wal_autocheckpoint = 0")
                c.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
                self.checkpointer = Checkpointer(self.path)
        if not tables:
            if self.read_only:
                raise InvalidDatabaseError(f"{self.path} is empty: not a vxmem database")
            schema.create(c)
        meta = self._read_meta()
        if self.schema_version < SCHEMA_VERSION and not self.read_only:
            schema.migrate(c, self.schema_version, self.generation)
            meta = self._read_meta()
        self._has_changes = self.schema_version >= 3 and "vx_changes" in schema.tables(c)
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

    @contextmanager
    def _damage_is_invalid(self) -> Iterator[None]:
        """What a damaged file raises while it is read, as an :class:`InvalidDatabaseError`."""
        name = self.path or ":memory:"
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise out_of_descriptors(self.path) or InvalidDatabaseError(
                f"{name} is not a readable vxmem database: {exc}") from None
        except InvalidDatabaseError:
            raise
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # a damaged row or vx_meta value
            raise InvalidDatabaseError(f"{name} is damaged: {type(exc).__name__}: {exc}") from exc

    def _snapshot(self) -> contextlib.AbstractContextManager[None]:
        """One read transaction: every read inside sees the same committed state (inside a
        write transaction of this handle, a search made while writing, that transaction's)."""
        return snapshot_read(self.conn)

    def _probe(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    # ------------------------------------------------------------------ a writer's upkeep

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
                rollback(self.conn)
            raise

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
            rollback(self.conn)
            raise
        self.fts_upto = indexed
        if self.checkpointer is not None:
            self.checkpointer.committed(self.conn)

    def indexed_upto(self) -> int | None:
        """The rowid FTS5 holds every document up to (and none above), as the current
        transaction sees it; None when it holds every document (a file of schema 5 or older,
        read as it is)."""
        if not self.read_only:
            return self.fts_upto
        row = self.conn.execute("SELECT value FROM vx_meta WHERE key = 'fts_upto'").fetchone()
        return None if row is None else int(row[0])

    def close(self) -> None:
        """Index what a writer left unindexed in FTS5, close the connection and release the writer lock.

        In a process other than the one that opened it (a fork), the connection and the
        lock are the parent's: the connection is left open (kept referenced, so it is never
        finalised here) and the lock is left held. (The lock descriptor is closed with the
        file's last handle in this process; see :mod:`~vxmem.store.sqlite.locks`.)
        """
        conn = getattr(self, "conn", None)
        forked = os.getpid() != self.pid
        if conn is not None and not forked and self._opened:
            self._opened = False
            try:
                self.index_pending()  # a file at rest has every document in FTS5
            except sqlite3.Error:  # a full disk: the next writable open indexes them
                pass
        checkpointer = getattr(self, "checkpointer", None)
        if checkpointer is not None:
            checkpointer.close(forked)  # before the connection: its close makes the last checkpoint
            self.checkpointer = None
        if self._lock_fd is not None and not forked and self.path is not None:
            remove_writer_note(self.path)  # before the close removes the log: no reader takes it for lost
        if conn is not None:
            close_connection(conn, forked)
        if self._lock_fd is not None:
            if not forked:
                release_writer_lock(self._lock_fd)
            self._lock_fd = None
        if self._held is not None:
            if not forked:
                let_go_file(self._held)
            self._held = None
