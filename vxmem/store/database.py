"""The database file: SQLite schema and FTS5 DDL, opening, the writer lock, migration, loading.

SQLite (WAL) is the source of truth for text, metadata and vectors; everything else the
process holds (the mirror, the HNSW index, the lexical postings) is rebuilt from it. One
process writes a database file at a time: a second writer gets
:class:`~vxmem.store.errors.DatabaseLockedError` at open. ``read_only=True`` opens without
the lock and sees what writers have committed.

Beside ``db.vxdb`` the HNSW cache keeps ``db.vxdb.usearch`` and its sidecar
``db.vxdb.usearch.json`` (``{"uid", "generation", "count", "dim"}``), which ties the
index file to this database (``uid``) at this state (``generation`` moves on with every
committed write).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from .errors import DatabaseLockedError, InvalidDatabaseError, ReadOnlyError
from .lexical import TOKENIZE, scope_token
from .mirror import Mirror

try:  # POSIX advisory locks keep a second writer out.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 2  # 2: the FTS5 lexical index (a version-1 database gains it on open)
FORMAT_NAME = "vxmem"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vx_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS vx_docs (
        rowid INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        vector BLOB NOT NULL
    )""",
    "CREATE TABLE IF NOT EXISTS vx_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)

# The lexical index: a contentless FTS5 table over each document's text plus a "scope"
# column holding one token per session (see vxmem.store.lexical). Porter stemming over
# unicode61 with diacritics removed: case, accents, punctuation and inflections
# ("running" ~ "run", "Café" ~ "cafe") match.
_FTS_SCHEMA = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS vx_fts USING fts5(text, scope, content='', tokenize='{TOKENIZE}')",
    "INSERT INTO vx_fts (vx_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)')",
)


def index_files(path: str) -> tuple[str, str]:
    """The HNSW index file of the database at ``path`` and its JSON sidecar."""
    return path + ".usearch", path + ".usearch.json"


def read_sidecar(path: str) -> dict[str, Any] | None:
    """The index sidecar of the database at ``path``; None when missing or unreadable."""
    try:
        with open(index_files(path)[1]) as f:
            side = json.load(f)
    except (OSError, ValueError):
        return None
    return side if isinstance(side, dict) else None


def _dumps(meta: dict[str, Any]) -> str:
    return json.dumps(meta, ensure_ascii=False, allow_nan=False)


class Transaction:
    """Writes inside one SQLite transaction, recorded as ops for the mirror to follow after COMMIT.

    Every document write also writes the FTS5 table, so the two can never disagree.
    """

    def __init__(self, database: Database, mirror: Mirror):
        self.database = database
        self.conn = database.conn
        self.mirror = mirror
        self.ops: list[tuple[Any, ...]] = []
        self.scopes: dict[str, str] = {}  # FTS scope of documents whose session moved in this transaction

    def insert(self, id: str, text: str, meta: dict[str, Any], vec: np.ndarray) -> None:
        """Add a document (its vector's dimension becomes the collection's, if it has none yet)."""
        self.database.set_dim(self, vec.shape[0])
        cur = self.conn.execute("INSERT INTO vx_docs (id, text, metadata, vector) VALUES (?, ?, ?, ?)",
                                (id, text, _dumps(meta), vec.astype(np.float32).tobytes()))
        self.conn.execute("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)",
                          (cur.lastrowid, text, scope_token(meta)))
        self.ops.append(("insert", cur.lastrowid, id, text, meta, vec))

    def update_meta(self, id: str, meta: dict[str, Any]) -> None:
        """Replace a document's metadata (moving its FTS scope if its session changed)."""
        self.conn.execute("UPDATE vx_docs SET metadata = ? WHERE id = ?", (_dumps(meta), id))
        m = self.mirror
        p = m.pos_of_id.get(id)
        if p is not None:
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
        self.conn.executemany("DELETE FROM vx_docs WHERE id = ?", [(i,) for i in ids])
        # A contentless FTS5 row is deleted by restating what was indexed.
        self.conn.executemany(
            "INSERT INTO vx_fts (vx_fts, rowid, text, scope) VALUES ('delete', ?, ?, ?)",
            [(int(m.rowid[p]), m.texts[p], self.scopes[i] if i in self.scopes else scope_token(m.metas[p]))
             for i, p in ((i, m.pos_of_id.get(i)) for i in ids) if p is not None])
        self.ops.append(("delete", list(ids)))

    def take_counter(self, name: str) -> int:
        """The counter's value, moved on by one, in one statement."""
        return int(self.conn.execute(
            "INSERT INTO vx_counters (name, value) VALUES (?, 1) "
            "ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value - 1", (name,)).fetchone()[0])

    def raise_counter(self, name: str, value: int) -> None:
        """Move the counter up to at least ``value`` (never down)."""
        self.conn.execute(
            "INSERT INTO vx_counters (name, value) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET value = max(value, excluded.value)", (name, int(value)))


class Database:
    """One open database: the connection, its ``vx_meta`` state and, for a writer, the lock.

    ``path=None`` is an in-memory database. Opening creates the schema in a fresh file,
    refuses a file that is not a vxmem database (:class:`InvalidDatabaseError`, never an
    empty store), and gives a version-1 database its FTS5 table once. ``dim`` (None until
    the first vector), ``generation`` and ``uid`` mirror ``vx_meta``.
    """

    def __init__(self, path: str | None, read_only: bool = False):
        self.path = path
        self.read_only = read_only
        self.dim: int | None = None
        self.generation = 0
        self.uid: str | None = None
        self._lock_fd: int | None = None
        self._data_version = None
        existing_empty = False
        if path is None:
            self.conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        elif read_only:
            if not os.path.exists(path):
                raise FileNotFoundError(f"no database at {path}")
            self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False,
                                        isolation_level=None)
        else:
            existing_empty = os.path.isfile(path) and os.path.getsize(path) == 0
            self._take_writer_lock(path)
            self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
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
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "vx_meta" not in tables:
            raise InvalidDatabaseError(f"{self.path} is an SQLite database but not a vxmem one "
                                       f"(its tables: {', '.join(sorted(tables)[:5])})")
        if not tables and existing_empty:
            self._refuse_truncated()  # before the WAL pragma writes a header over the evidence
        if not self.read_only:
            if self.path is not None:
                c.execute("PRAGMA journal_mode = WAL")
            c.execute("PRAGMA synchronous = NORMAL")
        if not tables:
            if self.read_only:
                raise InvalidDatabaseError(f"{self.path} is empty: not a vxmem database")
            c.execute("BEGIN IMMEDIATE")
            for ddl in _SCHEMA + _FTS_SCHEMA:
                c.execute(ddl)
            c.executemany("INSERT OR IGNORE INTO vx_meta (key, value) VALUES (?, ?)",
                          [("format", FORMAT_NAME), ("schema_version", str(SCHEMA_VERSION)),
                           ("generation", "0"), ("uid", uuid.uuid4().hex)])
            c.execute("COMMIT")
        meta = self._read_meta()
        if meta.get("format") != FORMAT_NAME:
            raise InvalidDatabaseError(f"{self.path} is not a vxmem database (format {meta.get('format')!r})")
        if int(meta.get("schema_version", 0)) > SCHEMA_VERSION:
            raise InvalidDatabaseError(f"{self.path} was written by a newer vxmem (schema "
                                       f"{meta['schema_version']}, this one reads {SCHEMA_VERSION})")
        if int(meta.get("schema_version", 0)) < 2:
            self._migrate_fts()
        self.uid = meta.get("uid")  # ties a saved index file to this database, not one made at the same path

    def _read_meta(self) -> dict[str, str]:
        meta = dict(self.conn.execute("SELECT key, value FROM vx_meta"))
        self.dim = int(meta["dim"]) if "dim" in meta else None
        self.generation = int(meta.get("generation", 0))
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

    def _migrate_fts(self) -> None:
        """Give a database made before the lexical index its FTS5 table, once, in one transaction."""
        if self.read_only:
            return  # lexical search will say the index is missing
        from tqdm.auto import tqdm

        c = self.conn
        total = c.execute("SELECT count(*) FROM vx_docs").fetchone()[0]
        c.execute("BEGIN IMMEDIATE")
        try:
            for ddl in _FTS_SCHEMA:
                c.execute(ddl)
            last, step = 0, 5000
            with tqdm(total=total, desc="building the lexical index", unit="doc", disable=total < 20_000) as bar:
                while True:
                    rows = c.execute("SELECT rowid, text, metadata FROM vx_docs WHERE rowid > ? ORDER BY rowid "
                                     "LIMIT ?", (last, step)).fetchall()
                    if not rows:
                        break
                    c.executemany("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, ?)",
                                  [(r, t, scope_token(json.loads(mj))) for r, t, mj in rows])
                    last = rows[-1][0]
                    bar.update(len(rows))
            c.execute("UPDATE vx_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ reading

    def load(self, token_counter: Callable[[str], int]) -> Mirror:
        """Every document, read into a fresh :class:`Mirror` (``token_counter`` counts each text).

        A damaged row or ``vx_meta`` value is an :class:`InvalidDatabaseError`.
        """
        with self._damage_is_invalid():
            return self._load(token_counter)

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

    def _load(self, token_counter: Callable[[str], int]) -> Mirror:
        m = Mirror(self.dim)
        if self.dim is not None:
            m.set_dim(self.dim)
        rows = self.conn.execute("SELECT rowid, id, text, metadata, vector FROM vx_docs ORDER BY rowid").fetchall()
        m.reserve(len(rows))
        for rowid, id, text, meta_json, blob in rows:
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape[0] != self.dim:
                raise InvalidDatabaseError(f"{self.path}: document {id!r} has a {vec.shape[0]}-d vector, "
                                           f"expected {self.dim}")
            m.append(rowid, id, text, json.loads(meta_json), vec, int(token_counter(text)))
        self._data_version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        return m

    def changed(self) -> bool:
        """For a read-only handle: True (and ``vx_meta`` read again) when a writer has
        committed since the last :meth:`load`. A writer's own data never changes under it."""
        if not self.read_only:
            return False
        if self.conn.execute("PRAGMA data_version").fetchone()[0] == self._data_version:
            return False
        self._read_meta()
        return True

    # ------------------------------------------------------------------ writing

    @contextmanager
    def transaction(self, mirror: Mirror) -> Iterator[Transaction]:
        """One SQLite transaction (``BEGIN IMMEDIATE``); ``generation`` moves on if it wrote."""
        if self.read_only:
            raise ReadOnlyError(f"{self.path} is open read_only")
        tx = Transaction(self, mirror)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield tx
            if tx.ops:
                self.conn.execute("UPDATE vx_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        if tx.ops:
            self.generation += 1

    def set_dim(self, tx: Transaction, dim: int) -> None:
        """Fix the collection's vector dimension with its first vector, in ``tx``."""
        if self.dim is None:
            tx.conn.execute("INSERT OR REPLACE INTO vx_meta (key, value) VALUES ('dim', ?)", (str(dim),))
            self.dim = dim
            tx.mirror.set_dim(dim)

    def close(self) -> None:
        """Close the connection and release the writer lock (its descriptor stays open:
        see :class:`_WriterLocks`)."""
        conn = getattr(self, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover
                pass
        if self._lock_fd is not None:
            _WRITER_LOCKS.release(self._lock_fd)
            self._lock_fd = None


class _WriterLocks:
    """This process's writer locks: ``flock`` on one descriptor per database file.

    Closing *any* descriptor of a file drops every POSIX lock this process holds on it,
    SQLite's own included (a reader's shared lock in the same process, say): a writer that
    closed its lock descriptor made another process's writer believe it was alone, and a
    checkpoint then corrupted the file under a reader. So a lock descriptor is never
    closed: it is kept per file (device and inode) for the life of the process, unlocked
    on ``close()``, and locked again by the next writer of that file. A second writer in
    the same process is refused here (``flock`` would grant it the lock it already holds);
    one in another process by ``flock``. A forked child starts a registry of its own and
    leaves the inherited descriptors as they are.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._pid = os.getpid()
        self._fds: dict[tuple[int, int], int] = {}
        self._held: set[int] = set()

    def take(self, path: str) -> int | None:
        if fcntl is None:  # pragma: no cover - Windows
            return None
        with self._guard:
            if os.getpid() != self._pid:  # a fork: the parent's descriptors and locks are the parent's
                self._pid, self._fds, self._held = os.getpid(), {}, set()
            try:
                st = os.stat(path)
                fd = self._fds.get((st.st_dev, st.st_ino))
            except FileNotFoundError:
                fd = None
            if fd is None:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                st = os.fstat(fd)
                fd = self._fds.setdefault((st.st_dev, st.st_ino), fd)  # never closed, whichever is kept
            if fd in self._held:
                raise _locked_error(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise _locked_error(path) from None
            self._held.add(fd)
            return fd

    def release(self, fd: int) -> None:
        with self._guard:
            if os.getpid() != self._pid or fd not in self._held:
                return
            self._held.discard(fd)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)


def _locked_error(path: str) -> DatabaseLockedError:
    return DatabaseLockedError(f"{path} is already open for writing by another process or handle; "
                               "close it first, or open this one with read_only=True")


_WRITER_LOCKS = _WriterLocks()
