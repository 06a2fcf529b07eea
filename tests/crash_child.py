"""The child process of tests/test_crash_points.py: one scenario on one database file, and
a SIGKILL of itself at a chosen point.

``python crash_child.py PATH SCENARIO SEED [ARG]``, or ``python crash_child.py --forks``: a
fork server that imports all this once and then runs each trial that stdin asks for in a
process of its own forked from it (see :func:`fork_trials`). The seed picks the workload and the
point; every call that returned is acknowledged on stdout (one line, written before the
next call starts, so whatever a kill leaves in the pipe was acknowledged). The child
always ends by killing itself: a run that never reached its point still ends as a crash.

The point is hit exactly: a public function or method is wrapped so that its ``nth`` call
kills the process before or after the real call runs (``os.kill(getpid(), SIGKILL)`` from
whatever thread makes the call). Where another thread must have made progress first, an
event says so; nothing waits on a clock.
"""

import json
import os
import random
import signal
import sys
import threading
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from vxmem import Vectrix  # noqa: E402
from vxmem.store import engine  # noqa: E402
from vxmem.store.mirror import file as mirror_file
from vxmem.store.mirror import loading  # noqa: E402
from vxmem.store.portable import restore as restoring  # noqa: E402
from vxmem.store.sqlite import database  # noqa: E402
from vxmem.store.sqlite.files import index_files  # noqa: E402
from vxmem.store.vector import hnsw  # noqa: E402

from helpers import WordHashEmbedder  # noqa: E402

WORDS = "tea coffee paris london dark light mode pdf csv report cat dog blue red".split()
SESSIONS = ("s0", "s1", "s2")
DIM = 64
# Small enough that a database of a few dozen memories takes every path: the background
# build, the background flush in batches, the mirror file, restores of several batches.
hnsw.BACKGROUND_BUILD_MIN = 16
hnsw.PENDING_FLUSH = 6
hnsw.FLUSH_BATCH = 2
mirror_file.MIN_DOCUMENTS = 8
loading.RESAVE_GENERATIONS = loading.RESAVE_ROWS = 1  # every close that follows a write saves the mirror file
restoring.BATCH = 7


def ack(*parts):
    os.write(1, (" ".join(str(p) for p in parts) + "\n").encode())


def die(hit=False):
    if hit:
        ack("hit")  # the kill came at the chosen point, not at the end of the run
    os.kill(os.getpid(), signal.SIGKILL)


def kill_at(owner, name, nth, before=False, gate=None):
    """Wrap ``owner.name`` so that its ``nth`` call (counted from now) kills the process,
    before the real call (``before``) or after it returned; ``gate`` (an event) must be set
    first."""
    real = getattr(owner, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        hit = calls[0] == nth
        if hit and gate is not None:
            gate.wait()
        if hit and before:
            die(hit=True)
        out = real(*args, **kwargs)
        if hit:
            die(hit=True)
        return out

    setattr(owner, name, wrapper)


def kill_at_file_step(nth):
    """Kill at the ``nth`` os.replace or os.fsync from now, after it ran (a save's steps)."""
    calls = [0]
    for name in ("replace", "fsync"):
        real = getattr(os, name)

        def wrapper(*args, _real=real, **kwargs):
            out = _real(*args, **kwargs)
            calls[0] += 1
            if calls[0] == nth:
                die(hit=True)
            return out

        setattr(os, name, wrapper)


def opendb(path):
    return Vectrix(path, embedder=WordHashEmbedder(dim=DIM), exact_threshold=4)


class Writer:
    """Random writes, each acknowledged once it returned: ``mem ID EXPIRES``, ``corr OLD
    NEW``, ``gone ID`` (announced as ``forgetting ID`` before the call)."""

    def __init__(self, rng, seed):
        self.rng, self.seed, self.i = rng, seed, 0
        self.mine = []

    def text(self):
        self.i += 1
        return f"w{self.seed}x{self.i} " + " ".join(self.rng.choice(WORDS) for _ in range(3))

    def ts(self):
        return 1_000_000 * self.seed + self.i

    def remember(self, db, session=None, ttl_days=None, kind=None):
        text = self.text()
        mid = db.remember(text, session=session or self.rng.choice(SESSIONS), timestamp=self.ts(), kind=kind,
                          ttl_days=ttl_days)
        self.mine.append(mid)
        expires = db.get(mid).metadata.get("_vx_expires")
        ack("mem", mid, "none" if expires is None else repr(float(expires)))
        return mid

    def step(self, db):
        op = self.rng.random()
        if op < 0.6 or not self.mine:
            self.remember(db)
        elif op < 0.75:
            self.remember(db, kind="fact")
        elif op < 0.87:
            old = self.mine.pop(self.rng.randrange(len(self.mine)))
            at = max(self.ts(), db.get(old).metadata["_vx_ts"])  # never before what it corrects
            new = db.feedback(old, "corrected", correction="actually " + self.text(), timestamp=at)
            ack("corr", old, new)  # neither is forgotten or corrected again: the links stay whole
        else:
            mid = self.mine.pop(self.rng.randrange(len(self.mine)))
            ack("forgetting", mid)  # from here it may be gone, acknowledged or not
            db.forget(ids=[mid])
            ack("gone", mid)


def summarize(items):
    return ["summary of " + " / ".join(i["text"].split()[0] for i in items), "summary also " + items[-1]["text"]]


def scenario_build(path, rng, w):
    """A background build of the index (its file gone), writes landing while it runs; a kill
    in the build (before or after the graph is made), or after it, in the close that saves it."""
    for name in index_files(path):
        if os.path.exists(name):
            os.remove(name)
    db = opendb(path)
    for _ in range(max(0, 18 - db.count())):
        w.remember(db)
    go = threading.Event()
    where = ["before", "after", "close"][w.seed % 3]
    ack("point", where)
    if where == "close":  # the build waits for the writes, installs its graph, and the close saves it
        real = hnsw.HnswCache.build_graph

        def held(self, *args):
            go.wait()
            return real(self, *args)

        hnsw.HnswCache.build_graph = held
    else:
        kill_at(hnsw.HnswCache, "build_graph", 1, before=where == "before", gate=go)
    db.search("tea coffee", limit=3)  # starts the build in its thread
    assert db.engine.index.building
    for _ in range(rng.randint(0, 5)):
        w.step(db)
    go.set()
    if where != "close":
        threading.Event().wait()  # the build kills the process
    kill_at_file_step(rng.randint(1, 8))
    db.close()
    ack("closed")


def scenario_flush(path, rng, w):
    """The background flush of pending vectors into the graph, killed at its nth batch (or
    in close()'s flush of the rest), while writes and deletes go on."""
    db = opendb(path)
    db.build_index()
    nth, before = rng.randint(1, 3), w.seed % 2 == 0
    ack("point", "before" if before else "after")
    kill_at(hnsw.HnswCache, "add_to_graph", nth, before=before)
    for _ in range(rng.randint(6, 30)):
        w.step(db)
    db.close()
    ack("closed")


def scenario_close(path, rng, w):
    """close() saving the index, the mirror file and the postings, killed at its nth file step."""
    db = opendb(path)
    for _ in range(max(0, 10 - db.count())):
        w.remember(db)
    for _ in range(rng.randint(3, 15)):
        w.step(db)
    if rng.random() < 0.7:
        db.build_index()
        w.step(db)
    db.search("dark mode", limit=3, mode="lexical")  # the postings, read: the close saves them
    nth = 1 + w.seed % 8  # the index file and its sidecar, the mirror file, the postings: two steps each
    ack("point", nth)
    kill_at_file_step(nth)
    db.close()
    ack("closed")


def scenario_consolidate(path, rng, w):
    """consolidate() with a summarizer, killed in the summarizer, mid-transaction (facts
    written, turns not yet deleted or marked) or after a batch committed."""
    db = opendb(path)
    session = f"c{w.seed}"
    for _ in range(rng.randint(5, 14)):
        w.remember(db, session=session)
    delete = rng.random() < 0.6
    point = ["summarize", "delete", "follow", "none"][w.seed % 4]
    nth = rng.randint(1, 4)
    summarizer = summarize
    ack("point", point)
    if point == "summarize":
        calls = [0]

        def summarizer(items):
            calls[0] += 1
            if calls[0] == nth:
                die(hit=True)
            return summarize(items)
    elif point == "delete":
        kill_at(database.Transaction, "delete" if delete else "update_meta", nth, before=rng.random() < 0.5)
    elif point == "follow":
        kill_at(engine.Engine, "follow", nth)
    rep = db.consolidate(session, summarizer, keep_recent=2, batch_turns=3, delete=delete,
                         now=1_000_000 * w.seed + 10_000)
    ack("cons", " ".join(rep.facts), "|", " ".join(rep.turns_consolidated))


def scenario_expire(path, rng, w):
    """expire() of every memory past its TTL (one transaction), killed before or after its
    deletes ran in the transaction, or after it committed."""
    db = opendb(path)
    for _ in range(rng.randint(3, 12)):
        w.remember(db, ttl_days=rng.choice([None, 1, 1, 30]))
    now = 1_000_000 * w.seed + 5 * 86_400
    point = ["delete", "follow", "none"][w.seed % 3]
    ack("point", point)
    if point == "delete":
        kill_at(database.Transaction, "delete", 1, before=rng.random() < 0.5)
    elif point == "follow":
        kill_at(engine.Engine, "follow", 1)
    ack("expiring", now)
    n = db.expire(now=now)
    ack("expired", n)


def scenario_restore(path, rng, w, source):
    """Vectrix.restore of an export into ``path``, killed at the nth document written (in
    a batch's transaction) or at the nth file step (the closes, the moves into place)."""
    point = ["insert", "file"][w.seed // 2 % 2]
    ack("point", point)
    if point == "insert":
        kill_at(database.Transaction, "insert", rng.randint(1, 25), before=rng.random() < 0.5)
    else:
        kill_at_file_step(rng.randint(1, 4))  # the mirror file saved, the moves into place
    db = Vectrix.restore(source, path, embedder=WordHashEmbedder(dim=DIM), exact_threshold=4)
    ack("restored", db.count())


def main():
    path, scenario, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    w = Writer(rng, seed)
    ack("start")
    if scenario == "restore":
        scenario_restore(path, rng, w, sys.argv[4])
    else:
        globals()["scenario_" + scenario](path, rng, w)
    die()


def fork_trials():
    """One trial per line of stdin (JSON: ``{"argv": [...], "out": PATH, "err": PATH}``), each run
    by ``main()`` in a child forked from this process, with its stdout and stderr on those files;
    the answer, one line on stdout, is the child's exit code as ``subprocess`` gives it (``-9``:
    killed). Importing vxmem is most of a fresh interpreter's start (about 0.3 s of a 0.5 s
    trial); a fork starts from the imported modules, before any database was opened, so each
    trial still opens its file as a new process after a crash would."""
    for line in sys.stdin:
        trial = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                for fd, name in ((1, trial["out"]), (2, trial["err"])):
                    os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
                sys.argv = [__file__, *trial["argv"]]
                main()
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(1)  # main() ends in SIGKILL: here only after an error
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    fork_trials() if sys.argv[1:] == ["--forks"] else main()
