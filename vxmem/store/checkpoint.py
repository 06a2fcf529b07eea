"""The writer's WAL checkpoints, off the writer's path, in a thread of their own."""

from __future__ import annotations

import sqlite3
import threading

from .files import close_connection

# WAL checkpoints run off the writer's path: SQLite's automatic one (every ~1,000 pages, in
# the committing call) cost 10-100 ms about every 64 remember() calls. A thread of the
# writer's own, on a connection of its own, runs a PASSIVE checkpoint (which never blocks a
# writer or a reader) every CHECKPOINT_EVERY commits; should those fall behind (a starved
# thread), the writer checkpoints itself after CHECKPOINT_CAP commits, so the WAL cannot
# grow without bound. Durability is unchanged: a commit is in the WAL either way.
CHECKPOINT_EVERY = 256
CHECKPOINT_CAP = 4_096
JOURNAL_SIZE_LIMIT = 64 << 20  # a WAL file grown past this is truncated back when it restarts


class Checkpointer:
    """The writer's WAL checkpoints, in a thread of their own (see :data:`CHECKPOINT_EVERY`).

    The thread starts at the first request and keeps a connection of its own; ``close()``
    stops it. ``completed`` is the commit count at the last checkpoint that was run.
    """

    def __init__(self, path: str):
        self.path = path
        self.commits = 0
        self.completed = 0
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None

    def committed(self, conn: sqlite3.Connection) -> None:
        """Count a commit of the writer's connection ``conn``; ask for a checkpoint every
        :data:`CHECKPOINT_EVERY`, or run one on ``conn`` past :data:`CHECKPOINT_CAP`."""
        self.commits += 1
        if self.commits - self.completed >= CHECKPOINT_CAP:
            self.completed = self.commits
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:  # pragma: no cover - a checkpoint is an optimisation; the next one retries
                pass
        elif self.commits % CHECKPOINT_EVERY == 0:
            self.request()

    def request(self) -> None:
        """Wake the thread (starting it the first time) to run a PASSIVE checkpoint."""
        if self._stop:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vxmem-checkpoint", daemon=True)
            self._thread.start()
        self._wake.set()

    def checkpoint(self) -> None:
        """One PASSIVE checkpoint on the thread's connection (a method, so a test can hold it)."""
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=0)
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop:
                return
            target = self.commits
            try:
                self.checkpoint()
            except sqlite3.Error:  # busy or failed: the next request retries, the cap still holds
                continue
            self.completed = max(self.completed, target)

    def close(self, forked: bool = False) -> None:
        """Stop the thread and close its connection (in a fork: leave it, it is the parent's)."""
        self._stop = True
        thread = self._thread
        if thread is not None and not forked:
            self._wake.set()
            thread.join()
        conn, self._conn = self._conn, None
        if conn is not None:
            close_connection(conn, forked)
