"""A writer in a process of its own, driven line by line: the other side of
tests/test_reader_processes.py.

``python writer_child.py PATH`` reads commands on stdin and answers each on stdout with one
line (``ok ...``). ``hold OWNER NAME NTH`` arms a public function or method of
``vxmem.store`` so that its ``nth`` call (in whichever thread makes it) says ``held`` on
stdout and waits, inside whatever it was doing, until the parent sends ``release``; the
command that made the call then answers as usual. Nothing here waits on a clock.
"""

import os
import queue
import sqlite3
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from vxmem import Vectrix  # noqa: E402
from vxmem.store import engine  # noqa: E402
from vxmem.store.sqlite import database, schema  # noqa: E402
from vxmem.store.vector import hnsw  # noqa: E402

from helpers import WordHashEmbedder  # noqa: E402

hnsw.BACKGROUND_BUILD_MIN = 16  # a build of a few dozen vectors runs in a thread of its own
OWNERS = {"Transaction": database.Transaction, "Engine": engine.Engine, "HnswCache": hnsw.HnswCache,
          "schema": schema, "os": os}

commands: queue.Queue = queue.Queue()
release = threading.Event()
out_lock = threading.Lock()


def say(*parts):
    with out_lock:
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()


def read_stdin():
    for line in sys.stdin:
        if line.strip() == "release":
            release.set()
        else:
            commands.put(line.split())
    commands.put(["exit"])


def hold(owner, name, nth):
    real = getattr(owner, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth:
            release.clear()
            say("held", name)
            release.wait()
        return real(*args, **kwargs)

    setattr(owner, name, wrapper)


def hold_after(owner, name, nth):
    """Hold after the ``nth`` call returned (a file moved into place, a commit made)."""
    real = getattr(owner, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        out = real(*args, **kwargs)
        calls[0] += 1
        if calls[0] == nth:
            release.clear()
            say("held", name)
            release.wait()
        return out

    setattr(owner, name, wrapper)


def run(db, path, cmd):
    op = cmd[0]
    if op == "open":
        return Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=4), "opened"
    if op == "add":  # add N TAG: one transaction of N documents
        n, tag = int(cmd[1]), cmd[2]
        db.add([f"{tag} doc {i} tea coffee" if i % 2 else f"{tag} doc {i} dark mode" for i in range(n)],
               ids=[f"{tag}-{i}" for i in range(n)])
        return db, "added"
    if op == "remember":  # remember N SESSION
        for i in range(int(cmd[1])):
            db.remember(f"turn {i} of {cmd[2]} about paris", session=cmd[2], timestamp=1000 + i)
        return db, "remembered"
    if op == "consolidate":
        rep = db.consolidate(cmd[1], lambda items: [f"summary of {len(items)} turns", "summary too"],
                             keep_recent=0, batch_turns=100, now=10_000)
        return db, f"consolidated {len(rep.facts)}"
    if op == "build":  # starts a background build of the index
        db.search("tea coffee", limit=3)
        return db, f"building {db.engine.index.building}"
    if op == "close":
        db.close()
        return None, "closed"
    if op == "hold":
        hold(OWNERS[cmd[1]], cmd[2], int(cmd[3]))
        return db, "armed"
    if op == "hold_after":
        hold_after(OWNERS[cmd[1]], cmd[2], int(cmd[3]))
        return db, "armed"
    raise ValueError(f"unknown command {cmd}")


class PausingConnection(sqlite3.Connection):
    """A connection whose statements a test can hold: ``hold_sql TEXT`` holds the first
    statement that contains TEXT, before it runs (inside whatever transaction is open)."""

    marker: "str | None" = None

    def execute(self, sql, *args):
        if PausingConnection.marker is not None and PausingConnection.marker in sql:
            PausingConnection.marker = None
            release.clear()
            say("held", "sql")
            release.wait()
        return super().execute(sql, *args)


def main():
    path = sys.argv[1]
    real_connect = sqlite3.connect
    sqlite3.connect = lambda *a, **k: real_connect(*a, factory=PausingConnection, **k)
    threading.Thread(target=read_stdin, daemon=True).start()
    db = None
    while True:
        cmd = commands.get()
        if cmd[0] == "exit":
            return
        if cmd[0] == "hold_sql":
            PausingConnection.marker = " ".join(cmd[1:])
            say("ok", "armed")
            continue
        db, reply = run(db, path, cmd)
        say("ok", reply)


if __name__ == "__main__":
    main()
