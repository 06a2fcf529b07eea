"""vxmem's own errors: what a caller may want to catch apart from bad arguments."""

from __future__ import annotations

import os
import shutil
import sqlite3


def one_line(text: str, limit: int = 300) -> str:
    """A message on one line (its whitespace runs made single spaces), cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class VectrixError(RuntimeError):
    """Base class of vxmem's own errors."""


class DatabaseLockedError(VectrixError):
    """Another process (or handle) already has this database open for writing."""


class InvalidDatabaseError(VectrixError, ValueError):
    """The file is not a vxmem database, or it is damaged."""


class ExportFileError(VectrixError, ValueError):
    """A file ``restore()`` refuses: not a vxmem export, of a newer format version, truncated,
    damaged, or holding a malformed line or an id twice. Nothing was written."""


class ReadOnlyError(VectrixError, PermissionError):
    """A write was attempted on a handle opened with ``read_only=True``."""


class ConflictError(VectrixError, ValueError):
    """A write names something already taken: an id another document holds, or a turn number
    its session already used. Nothing was written (a ``ValueError``, as any refused argument)."""


class ForkedHandleError(VectrixError):
    """A handle was used in a process other than the one that opened it (after a fork):
    its lock, connection and caches belong to the parent. Open a new handle instead."""


class DiskFullError(VectrixError, sqlite3.OperationalError):
    """The disk holding the database is full: the write that raised it stored nothing, the
    database stays readable with every earlier write, and writing works again once space
    is freed. (A ``sqlite3.OperationalError`` too, as SQLite raised it.)"""


def disk_full(path: str | None, exc: BaseException) -> DiskFullError:
    """The :class:`DiskFullError` for SQLite's ``exc`` on the database at ``path``, naming the
    disk and the space left on it."""
    if path is None:
        return DiskFullError(f"out of memory for the in-memory database ({exc}); nothing of this write was stored")
    where = os.path.dirname(os.path.abspath(path)) or "."
    try:
        free = f"{shutil.disk_usage(where).free:,} bytes free"
    except OSError:
        free = "free space unknown"
    return DiskFullError(f"the disk holding {where} is full ({free}); SQLite could not write {path} ({exc}); "
                         "nothing of this write was stored: free some space and write again")


def is_disk_full(exc: BaseException) -> bool:
    """Whether SQLite raised ``exc`` because the disk (or memory) is full."""
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
