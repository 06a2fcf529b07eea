"""What this process holds of each database file: the writer lock, and a count of its handles.

One process writes a database file at a time: :func:`take_writer_lock` takes ``flock`` on a
descriptor of the file, refusing a second writer in this process or another. Read-only
handles announce themselves with :func:`hold_file`. The lock descriptor is closed with the
last handle of its file in this process, never before: closing *any* descriptor of a file
drops every POSIX lock this process holds on it, SQLite's own included (a reader's shared
lock in the same process, say), and a writer that closed its lock descriptor under an open
reader made another process's writer believe it was alone, whose checkpoint then
corrupted the file under that reader. Closed with the last handle, it is neither leaked
(one descriptor per database ever opened, a deleted file held open) nor closed under one.
A forked child starts a registry of its own and leaves the inherited descriptors as they are.
"""

from __future__ import annotations

import errno
import os
import resource
import threading

from ...core.errors import DatabaseLockedError

try:  # POSIX advisory locks keep a second writer out.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

Key = tuple[int, int]  # a file: its device and inode


def names_file(path: str, fd: int) -> bool:
    """Whether ``path`` names the very file open at ``fd`` (the same device and inode)."""
    try:
        st, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def out_of_descriptors(path: str | None) -> OSError | None:
    """The error to raise when this process cannot open one more file (its limit of open
    descriptors reached: EMFILE, or the system's: ENFILE), naming it as such; else None."""
    try:
        os.close(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            return too_many_open_files(path, exc.errno)
    return None


def too_many_open_files(path: str | None, code: int = errno.EMFILE) -> OSError:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = "the system's limit" if code == errno.ENFILE else f"its limit of {soft} open descriptors"
    return OSError(code, f"cannot open {path or ':memory:'}: too many open files (this process "
                         f"has reached {limit}); close some, or raise the limit (ulimit -n)")


class _FileHandles:
    """This process's handles per database file: the lock descriptor (and any other one
    opened on the file by a race with a rename), whether a writer holds the lock, and how
    many handles are open (see the module docstring)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._pid = os.getpid()
        self._fds: dict[Key, list[int]] = {}
        self._count: dict[Key, int] = {}
        self._held: set[Key] = set()
        self._key_of: dict[int, Key] = {}

    def _here(self) -> None:
        if os.getpid() != self._pid:  # a fork: the parent's descriptors and locks are the parent's
            self._pid, self._fds, self._count, self._held, self._key_of = os.getpid(), {}, {}, set(), {}

    def _descriptor(self, path: str) -> tuple[Key, int]:
        try:
            st = os.stat(path)
            key: Key = (st.st_dev, st.st_ino)
            if key in self._fds:
                return key, self._fds[key][0]
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                raise too_many_open_files(path, exc.errno) from None
            raise
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        self._fds.setdefault(key, []).append(fd)  # a second one (the path renamed meanwhile) is kept too
        self._key_of[fd] = key
        return key, self._fds[key][0]

    def _forget_if_unused(self, key: Key) -> None:
        if self._count.get(key, 0) or key in self._held:
            return
        self._count.pop(key, None)
        for fd in self._fds.pop(key, []):
            self._key_of.pop(fd, None)
            os.close(fd)

    def take(self, path: str) -> int | None:
        if fcntl is None:  # pragma: no cover - Windows
            return None
        with self._guard:
            self._here()
            key, fd = self._descriptor(path)
            if key in self._held:
                raise _locked_error(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._forget_if_unused(key)
                raise _locked_error(path) from None
            if not names_file(path, fd):  # another file was moved to the path meanwhile: not the one locked
                fcntl.flock(fd, fcntl.LOCK_UN)
                self._forget_if_unused(key)
                raise DatabaseLockedError(f"{path} was replaced by another file while it was being opened; "
                                          "open it again")
            self._held.add(key)
            self._count[key] = self._count.get(key, 0) + 1
            return fd

    def release(self, fd: int) -> None:
        with self._guard:
            key = self._key_of.get(fd)
            if os.getpid() != self._pid or key is None or key not in self._held:
                return
            self._held.discard(key)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            self._count[key] -= 1
            self._forget_if_unused(key)

    def writer_open(self, path: str) -> bool:
        """Whether a writer, in this process or another, holds the lock of the file at ``path``.
        Probed with a shared lock taken and dropped at once, on this process's descriptor of
        the file (kept open with the file's handles here, never closed under them)."""
        with self._guard:
            self._here()
            try:
                st = os.stat(path)
            except OSError:
                return False
            key: Key = (st.st_dev, st.st_ino)
            if key in self._held:
                return True
            if fcntl is None:  # pragma: no cover - Windows
                return False
            if key not in self._fds:
                fd = os.open(path, os.O_RDONLY)  # a reader may not be allowed to write the file
                self._fds[key], self._key_of[fd] = [fd], key
            fd = self._fds[key][0]
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                held = False
            except OSError:
                held = True
            self._forget_if_unused(key)
            return held

    def hold(self, path: str) -> Key | None:
        with self._guard:
            self._here()
            try:
                st = os.stat(path)
            except OSError:
                return None
            key = (st.st_dev, st.st_ino)
            self._count[key] = self._count.get(key, 0) + 1
            return key

    def let_go(self, key: Key) -> None:
        with self._guard:
            if os.getpid() != self._pid or not self._count.get(key):
                return
            self._count[key] -= 1
            self._forget_if_unused(key)


def _locked_error(path: str) -> DatabaseLockedError:
    return DatabaseLockedError(f"{path} is already open for writing by another process or handle; "
                               "close it first, or open this one with read_only=True")


_HANDLES = _FileHandles()


def take_writer_lock(path: str) -> int | None:
    """Take this process's writer lock on the database file at ``path`` (one more handle of
    it): the lock descriptor to release, None where there are no POSIX locks. A second
    writer, in this process or another, gets :class:`DatabaseLockedError`; a process out of
    descriptors an :class:`OSError` that says so."""
    return _HANDLES.take(path)


def release_writer_lock(fd: int) -> None:
    """Release the writer lock ``fd`` holds (one handle fewer: the descriptor is closed with
    the file's last handle in this process)."""
    _HANDLES.release(fd)


def writer_open(path: str) -> bool:
    """Whether some process (this one included) holds the writer lock of the file at ``path``."""
    return _HANDLES.writer_open(path)


def hold_file(path: str) -> Key | None:
    """Count a read-only handle of the file at ``path``, so the lock descriptor outlives it;
    the key to let go of it with (None: no file there)."""
    return _HANDLES.hold(path)


def let_go_file(key: Key) -> None:
    """A read-only handle of :func:`hold_file` is closed."""
    _HANDLES.let_go(key)
