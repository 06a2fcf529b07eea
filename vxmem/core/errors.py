"""vxmem's own errors: what a caller may want to catch apart from bad arguments."""

from __future__ import annotations


class VectrixError(RuntimeError):
    """Base class of vxmem's own errors."""


class DatabaseLockedError(VectrixError):
    """Another process (or handle) already has this database open for writing."""


class InvalidDatabaseError(VectrixError, ValueError):
    """The file is not a vxmem database, or it is damaged."""


class ReadOnlyError(VectrixError, PermissionError):
    """A write was attempted on a handle opened with ``read_only=True``."""


class ForkedHandleError(VectrixError):
    """A handle was used in a process other than the one that opened it (after a fork):
    its lock, connection and caches belong to the parent. Open a new handle instead."""
