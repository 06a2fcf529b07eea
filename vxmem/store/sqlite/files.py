"""The files of a database beside ``db.vxdb``, and what this process holds of them.

The writer lock, the connections (opened read-only, read in one snapshot, rolled back,
closed, or kept in a fork), and the sample of rows a check of a saved cache compares.
A writer's close also leaves the mirror file ``db.vxdb.mirror`` and the lexical postings
``db.vxdb.lexical`` there (caches, like the index). The HNSW cache keeps ``db.vxdb.usearch``
and its sidecar ``db.vxdb.usearch.json``
(``{"uid", "generation", "count", "dim", "size", "crc32"}``), which ties the index file to
this database (``uid``) at this state (``generation``) and to its own content (``size``,
``crc32``). An open writer keeps the note ``db.vxdb.writer`` (:func:`writer_note_path`).
A read-only handle opens the file through :func:`read_only_uri`. One process
writes a database file at a time: the writer lock is in :mod:`~vxmem.store.sqlite.locks`.
A connection a fork inherited is never closed here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np


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


def writer_note_path(path: str) -> str:
    """The note an open writer keeps beside the database at ``path``: which ``-wal`` and
    ``-shm`` files it has open (their device and inode), so a reader can tell when they were
    deleted or replaced under it. Removed by the writer's close."""
    return path + ".writer"


def _identity(name: str) -> list[int] | None:
    try:
        st = os.stat(name)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def write_writer_note(path: str) -> None:
    """A writer's: record the ``-wal`` and ``-shm`` files it has open (none when either is
    missing: a file not in WAL mode). Replaced whole, never half written."""
    wal, shm = _identity(path + "-wal"), _identity(path + "-shm")
    if wal is None or shm is None:
        return
    note = writer_note_path(path)
    with replaced_when_whole(note + ".tmp", note), open(note + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "wal": wal, "shm": shm}, f)


def remove_writer_note(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(writer_note_path(path))


def log_files_gone(path: str) -> list[str]:
    """The ``-wal`` and ``-shm`` files the writer's note names that are no longer at their
    path (deleted, or another file put there); [] when there is no note. Whether that writer
    is still open is the caller's to ask: a killed one leaves its note behind."""
    try:
        with open(writer_note_path(path), encoding="utf-8") as f:
            note = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(note, dict):
        return []
    return [path + s for s in ("-wal", "-shm") if _identity(path + s) != note.get(s[1:])]


def remove_caches(path: str) -> None:
    """Remove every cache saved beside the database (the index and its sidecar, the mirror
    file, the postings) and what a killed save of them left: the next open rebuilds them."""
    for name in (*index_files(path), mirror_path(path), postings_path(path)):
        for each in (name, name + ".tmp"):
            with contextlib.suppress(OSError):
                os.remove(each)


def remove_stale_temps(path: str) -> None:
    """Remove the temporary files a save or a restore killed halfway left beside the database."""
    for name in (*index_files(path), mirror_path(path), postings_path(path), writer_note_path(path)):
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


def creation_temp(path: str) -> str:
    """The temporary name a writer makes a new database under before it links it to ``path``
    (so no reader ever finds the file half made): ``.NAME.creating-PID-XXXXXXXX``."""
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{tail}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def remove_abandoned_restores(path: str) -> None:
    """Remove what restores into ``path`` (or the creation of a new file there) left beside it
    when they were killed: the files of a :func:`restore_temp` or :func:`creation_temp`
    whose process is gone (a live one's are left alone)."""
    head, tail = os.path.split(os.path.abspath(path))
    pattern = re.compile(rf"\.{re.escape(tail)}\.(?:restoring|creating)-(\d+)-[0-9a-f]{{8}}(?:-wal|-shm|-journal"
                         r"|\.mirror|\.lexical|\.writer"
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
