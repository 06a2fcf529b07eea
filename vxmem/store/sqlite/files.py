"""The files of a database beside ``db.vxdb``, and what this process holds of them.

The writer lock, the connections (opened read-only, read in one snapshot, rolled back,
closed, or kept in a fork), and the sample of rows a check of a saved cache compares.
A writer's close also leaves the mirror file ``db.vxdb.mirror`` and the lexical postings
``db.vxdb.lexical`` there (caches, like the index). The HNSW cache keeps ``db.vxdb.usearch``
and its sidecar ``db.vxdb.usearch.json``
(``{"uid", "generation", "count", "dim", "size", "crc32"}``), which ties the index file to
this database (``uid``) at this state (``generation``) and to its own content (``size``,
``crc32``). A read-only handle opens the file through :func:`read_only_uri`. One process
writes a database file at a time: :func:`take_writer_lock` takes the writer lock, and
neither a lock descriptor nor a connection a fork inherited is ever closed here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.errors import DatabaseLockedError

try:  # POSIX advisory locks keep a second writer out.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def index_files(path: str) -> tuple[str, str]:
    """The HNSW index file of the database at ``path`` and its JSON sidecar."""
    return path + ".usearch", path + ".usearch.json"


def mirror_path(path: str) -> str:
    """The mirror file of the database at ``path`` (see :mod:`vxmem.store.mirror.file`)."""
    return path + ".mirror"


def postings_path(path: str) -> str:
    """The saved lexical postings of the database at ``path`` (see :mod:`vxmem.store.lexical.bm25`)."""
    return path + ".lexical"


@contextlib.contextmanager
def replaced_when_whole(tmp: str, target: str) -> Iterator[None]:
    """Write ``tmp`` inside the block; it becomes ``target`` (an atomic rename) only when the
    block finishes, and is removed when it fails, so ``target`` is never half written."""
    try:
        yield
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def remove_caches(path: str) -> None:
    """Remove every cache saved beside the database (the index and its sidecar, the mirror
    file, the postings) and what a killed save of them left: the next open rebuilds them."""
    for name in (*index_files(path), mirror_path(path), postings_path(path)):
        for each in (name, name + ".tmp"):
            with contextlib.suppress(OSError):
                os.remove(each)


def remove_stale_temps(path: str) -> None:
    """Remove the temporary files a save or a restore killed halfway left beside the database."""
    for name in (*index_files(path), mirror_path(path), postings_path(path)):
        try:
            os.remove(name + ".tmp")
        except OSError:
            pass
    remove_abandoned_restores(path)


def restore_temp(path: str) -> str:
    """The temporary name a restore into ``path`` builds its database under, beside it:
    ``.NAME.restoring-PID-XXXXXXXX`` (the process's id, so a later one can tell it abandoned)."""
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{tail}.restoring-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def remove_abandoned_restores(path: str) -> None:
    """Remove what restores into ``path`` left beside it when they were killed: the files of a
    :func:`restore_temp` whose process is gone (a live restore's are left alone)."""
    head, tail = os.path.split(os.path.abspath(path))
    pattern = re.compile(rf"\.{re.escape(tail)}\.restoring-(\d+)-[0-9a-f]{{8}}(?:-wal|-shm|\.mirror|\.lexical"
                         r"|\.usearch|\.usearch\.json)?(?:\.tmp)?")
    try:
        names = os.listdir(head)
    except OSError:
        return
    for name in names:
        got = pattern.fullmatch(name)
        if got is None or int(got.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(got.group(1)), 0)
        except ProcessLookupError:  # gone: its restore can never finish
            with contextlib.suppress(OSError):
                os.remove(os.path.join(head, name))
        except (OSError, OverflowError):  # alive (another user's), or not a process id: left alone
            pass


def read_only_uri(path: str) -> str:
    """The SQLite URI that opens ``path`` read-only, every character of the path escaped
    (``#``, ``?`` and ``%`` are URI syntax).

    In a directory this process cannot write, SQLite could not make the WAL's shared-memory
    file: a file there is opened ``immutable=1`` when nothing says a writer has it, neither a
    shared-memory file (every open writer keeps one, even before its first commit; a writer
    of another user may well write where this reader cannot) nor an unfinished write-ahead
    log. Beside those SQLite reads through the existing shared memory, and sees each commit.
    The files are looked for beside the real file, where SQLite keeps them (a link's target).
    """
    absolute = os.path.abspath(path)
    uri = "file:" + urllib.parse.quote(absolute) + "?mode=ro"
    real = os.path.realpath(absolute)
    wal, shm = real + "-wal", real + "-shm"
    writer = os.path.exists(shm) or (os.path.exists(wal) and os.path.getsize(wal) > 0)
    if not writer and not os.access(os.path.dirname(real) or ".", os.W_OK):
        uri += "&immutable=1"
    return uri


def read_sidecar(path: str) -> dict[str, Any] | None:
    """The index sidecar of the database at ``path``; None when missing or unreadable."""
    try:
        with open(index_files(path)[1]) as f:
            side = json.load(f)
    except (OSError, ValueError):
        return None
    return side if isinstance(side, dict) else None


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
            if not names_file(path, fd):  # another file was moved to the path meanwhile: not the one locked
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise DatabaseLockedError(f"{path} was replaced by another file while it was being opened; "
                                          "open it again")
            self._held.add(fd)
            return fd

    def release(self, fd: int) -> None:
        with self._guard:
            if os.getpid() != self._pid or fd not in self._held:
                return
            self._held.discard(fd)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)


def names_file(path: str, fd: int) -> bool:
    """Whether ``path`` names the very file open at ``fd`` (the same device and inode)."""
    try:
        st, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def _locked_error(path: str) -> DatabaseLockedError:
    return DatabaseLockedError(f"{path} is already open for writing by another process or handle; "
                               "close it first, or open this one with read_only=True")


_WRITER_LOCKS = _WriterLocks()


def take_writer_lock(path: str) -> int | None:
    """Take this process's writer lock on the database file at ``path`` (see
    :class:`_WriterLocks`): the lock descriptor to release, None where there are no POSIX
    locks. A second writer, in this process or another, gets :class:`DatabaseLockedError`."""
    return _WRITER_LOCKS.take(path)


def release_writer_lock(fd: int) -> None:
    """Release the writer lock ``fd`` holds (the descriptor stays open: see :class:`_WriterLocks`)."""
    _WRITER_LOCKS.release(fd)


# Connections a forked child inherited and must not close (closing one runs SQLite's
# shutdown of a connection the parent is still using).
_FORKED_CONNECTIONS: list[sqlite3.Connection] = []


def close_connection(conn: sqlite3.Connection, forked: bool) -> None:
    """Close ``conn``, or in a forked child keep it referenced and open (see above)."""
    if forked:
        _FORKED_CONNECTIONS.append(conn)
        return
    try:
        conn.close()
    except sqlite3.Error:  # pragma: no cover
        pass


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if there still is one; never masks the error being handled."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # pragma: no cover - the error that brought us here is the one to raise
            pass


@contextlib.contextmanager
def snapshot_read(conn: sqlite3.Connection) -> Iterator[None]:
    """The reads inside see one committed state: a read transaction of their own, or the
    one already open."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def spread_sample(n: int, spread: int, newest: int) -> np.ndarray:
    """Indices into ``n`` items, ascending and each once: up to ``spread`` spread evenly over
    them, and the last ``newest`` (what the checks of a saved file compare)."""
    picks = set(np.linspace(0, n - 1, min(spread, n)).astype(np.int64).tolist()) if n else set()
    return np.array(sorted(picks | set(range(max(0, n - newest), n))), dtype=np.int64)
