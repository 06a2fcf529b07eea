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
#
#
#
# A PASSIVE checkpoint copies the WAL into the database but never rewinds it: SQLite writes
# the WAL from its start again only when a transaction begins with the log wholly copied,
# which a writer committing every half millisecond never lets happen. So a writer's WAL grew
# without bound (58 MB per 1,000 remember() calls: 31 GB, and a full disk, two thirds of the
# way through writing a million memories). Now, once the WAL holds REWIND_AT bytes of frames
# at one of the thread's checkpoints, the writer itself, right after its next commit, runs a
# RESTART checkpoint on its own connection: only the frames written since the thread's
# checkpoint are left to copy, and the next transaction writes the WAL from its start. It
# waits for no lock (a busy timeout of 0 for that call): when a reader in another process
# still reads an older snapshot, or the thread has begun its next checkpoint, it gives up
# at once and the next round tries again. (Not TRUNCATE: cutting a 128 MB file took 225 ms
# here. The file keeps its size, about REWIND_AT plus a round of commits, and is reused;
# JOURNAL_SIZE_LIMIT only trims one that grew far past it while rewinds were refused.)
CHECKPOINT_EVERY = 256
CHECKPOINT_CAP = 4_096
REWIND_AT = 128 << 20  # a WAL with this many bytes in use is rewound by the writer (see above)
JOURNAL_SIZE_LIMIT = 4 * REWIND_AT  # a WAL file grown past this is cut back when it restarts


class Checkpointer:
    """The writer's WAL checkpoints, in a thread of their own (see :data:`CHECKPOINT_EVERY`).

    The thread starts at the first request; ``close()`` stops it. Its connection is opened
    here, with the writer's, so it reads and writes the very file the writer locked: opened
    later by path, it would open whatever file had been moved to that path since, with the
    writer's WAL and shared memory beside it, and copy the writer's pages into it.
    ``completed`` is the commit count at the last checkpoint that was run.
    """

    def __init__(self, path: str):
        self.path = path
        self.commits = 0
        self.completed = 0
        self._rewind = False  # the thread asks the writer to rewind the WAL (see REWIND_AT)
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = sqlite3.connect(path, check_same_thread=False,
                                                                isolation_level=None, timeout=0)
        self._frame = int(self._conn.execute("PRAGMA page_size").fetchone()[0]) + 24  # a WAL frame: page, header

    def committed(self, conn: sqlite3.Connection) -> None:
        """Count a commit of the writer's connection ``conn``; ask for a checkpoint every
        :data:`CHECKPOINT_EVERY`, or run one on ``conn`` past :data:`CHECKPOINT_CAP`."""
        self.commits += 1
        if self._rewind:
            self._rewind = False
            self.rewind(conn)
        elif self.commits - self.completed >= CHECKPOINT_CAP:
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

    def checkpoint(self) -> int:
        """One PASSIVE checkpoint on the thread's connection (a method, so a test can hold
        it); the bytes of WAL in use (its frames, which a rewind lets the next ones overwrite)."""
        if self._conn is None:  # closed
            return 0
        _, frames, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return max(int(frames), 0) * self._frame

    def checked(self, used: int) -> None:
        """After a checkpoint of the thread: ask the writer to rewind a WAL of more than
        :data:`REWIND_AT` bytes in use (at its next commit)."""
        self._rewind = used > REWIND_AT

    @staticmethod
    def rewind(conn: sqlite3.Connection) -> bool:
        """A RESTART checkpoint on the writer's connection ``conn``, waiting for no lock:
        whether the next transaction writes the WAL from its start."""
        (wait,) = conn.execute("PRAGMA busy_timeout").fetchone()
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        except sqlite3.Error:  # pragma: no cover - a checkpoint is an optimisation; the next one retries
            busy = 1
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(wait)}")
        return bool(busy == 0)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop:
                return
            target = self.commits
            try:
                used = self.checkpoint()
            except sqlite3.Error:  # busy or failed: the next request retries, the cap still holds
                continue
            self.completed = max(self.completed, target)
            self.checked(used)

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
