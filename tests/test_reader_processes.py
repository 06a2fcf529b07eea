"""Readers in one process, a writer in another (tests/writer_child.py, driven line by line):
while the writer builds and saves its index, migrates an older file, or dies inside a
transaction, a read-only handle never sees a half-written state, and the first read after
the writer commits sees the commit whole.

The writer is held at exact points (a public function's nth call, an SQL statement about
to run) and released by the test; every step waits for the writer's answer on its pipe,
never on a clock.
"""

import signal
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from test_readers import make_version_2

from vxmem import Vectrix

from helpers import TESTS, WordHashEmbedder

CHILD = f"{TESTS}/writer_child.py"


def _embedder():
    return WordHashEmbedder(dim=64)


class Writer:
    """The writer process: ``call`` sends a command and returns its answer; ``start`` sends
    one that will be held, and returns once the writer says it is."""

    def __init__(self, path):
        self.proc = subprocess.Popen([sys.executable, CHILD, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def _line(self):
        line = self.proc.stdout.readline()
        assert line, f"the writer died: {self.proc.stderr.read()}"
        return line.split()

    def send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def call(self, cmd):
        self.send(cmd)
        got = self._line()
        assert got[0] == "ok", got
        return got[1:]

    def start(self, cmd, also_ok=False):
        """Send ``cmd`` and wait until the writer is held (and, with ``also_ok``, until the
        command itself answered too: a background thread is the one held)."""
        self.send(cmd)
        seen = [self._line()[0] for _ in range(2 if also_ok else 1)]
        assert sorted(seen) == sorted(["held", "ok"] if also_ok else ["held"]), seen

    def release(self, answers=True):
        self.send("release")
        return self._line() if answers else None

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        assert self.proc.returncode == -signal.SIGKILL

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.proc.stdout.close()
        self.proc.stderr.close()


def _view(db):
    return sorted((r.id, r.text, r.metadata) for r in db.scan())


def _fresh(path):
    with Vectrix(path, embedder=_embedder(), read_only=True) as db:
        return _view(db)


def _answers(db):
    out = []
    for q in ("tea coffee", "dark mode", "summary of turns about paris"):
        for mode in ("dense", "lexical", "hybrid"):
            out.append([(r.id, round(r.score, 5)) for r in db.search(q, limit=5, mode=mode)])
    return out


def _same_as_fresh(reader, path):
    """The reader's very next reads equal a reader opened now: rows and answers."""
    view = _view(reader)
    assert view == _fresh(path)
    with Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=0) as fresh:
        threshold, reader.exact_threshold = reader.exact_threshold, 0
        assert _answers(reader) == _answers(fresh)
        reader.exact_threshold = threshold
    return view


def _index_is_exact(db):
    """Searching through ``db``'s index (loaded from the file or rebuilt) scores exactly, and
    the index holds exactly the database's rows."""
    db.exact_threshold = 4
    got = db.search("tea coffee", limit=5)
    cache = db.engine.index
    assert cache.index is not None
    with db.engine.locked() as m:
        live = sorted(m.rowid[m.live_positions()].tolist())
    assert sorted({int(k) for k in cache.index.keys} | set(cache.pending)) == live
    db.exact_threshold = 0
    exact = {r.id: round(r.score, 5) for r in db.search("tea coffee", limit=db.count())}
    assert [round(r.score, 5) for r in got] == [exact[r.id] for r in got]
    db.exact_threshold = 4


@pytest.mark.timeout(120)
def test_a_reader_follows_a_writer_building_and_saving_its_index(tmp_path):
    path = tmp_path / "build.db"
    writer = Writer(path)
    try:
        writer.call("open")
        writer.call("add 30 a")
        reader = Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=4)
        before = _same_as_fresh(reader, path)
        writer.call("hold HnswCache build_graph 1")
        writer.start("build", also_ok=True)  # the build thread is held; the writer goes on
        assert _same_as_fresh(reader, path) == before
        writer.call("add 5 b")  # lands while the build is held: logged for it
        assert "b-4" in reader  # the first read after the commit
        assert _same_as_fresh(reader, path) != before
        writer.release(answers=False)
        writer.call("hold_after os replace 1")
        writer.start("close")  # held between the index file's move and its sidecar's
        with Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=4) as late:
            _index_is_exact(late)  # an index file its sidecar does not name: rebuilt, not trusted
            assert _view(late) == _view(reader)
        assert writer.release() == ["ok", "closed"]
        with Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=4) as after:
            _index_is_exact(after)
        _index_is_exact(reader)
        reader.close()
    finally:
        writer.close()


def _schema_version(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.timeout(120)
def test_a_reader_sees_an_older_file_whole_while_a_writer_in_another_process_migrates_it(tmp_path):
    path = tmp_path / "old.db"
    with Vectrix(path, embedder=_embedder()) as db:
        db.add([f"old doc {i} tea" for i in range(12)], ids=[f"old-{i}" for i in range(12)])
    make_version_2(path)
    reader = Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=4)
    before = _same_as_fresh(reader, path)
    writer = Writer(path)
    try:
        writer.call("hold_sql UPDATE vx_meta SET value = ? WHERE key = 'schema_version'")
        writer.start("open")  # inside the migration's transaction: the change log made, not committed
        assert _schema_version(path) == "2"
        assert _same_as_fresh(reader, path) == before
        assert writer.release() == ["ok", "opened"]
        assert _schema_version(path) != "2"
        assert _same_as_fresh(reader, path) == before  # the migration changed no document
        writer.call("add 3 new")
        assert "new-2" in reader and reader.count() == 15  # the first read after the commit
        _same_as_fresh(reader, path)
        writer.call("close")
    finally:
        writer.close()
        reader.close()


@pytest.mark.timeout(120)
def test_a_reader_never_sees_the_transaction_a_writer_died_in_and_follows_the_next_writer(tmp_path):
    path = tmp_path / "died.db"
    writer = Writer(path)
    reader = None
    try:
        writer.call("open")
        writer.call("add 10 a")
        writer.call("remember 6 s")
        reader = Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=4)
        before = _same_as_fresh(reader, path)
        # Died in a transaction: two of six documents written, nothing committed.
        writer.call("hold Transaction insert 3")
        writer.start("add 6 b")
        assert _same_as_fresh(reader, path) == before
        writer.kill()
        assert _same_as_fresh(reader, path) == before
        writer.close()
        # The next writer: a consolidation held between its facts and its turns' deletion.
        writer = Writer(path)
        writer.call("open")
        assert _same_as_fresh(reader, path) == before
        writer.call("hold Transaction delete 1")
        writer.start("consolidate s")
        assert _same_as_fresh(reader, path) == before
        assert writer.release() == ["ok", "consolidated", "2"]
        after = _same_as_fresh(reader, path)
        texts = [t for _, t, _ in after]
        assert "summary too" in texts and not any(t.startswith("turn ") for t in texts)
        # Died right after a commit, before its own mirror followed: the reader has it all.
        writer.call("hold Engine follow 1")
        writer.start("add 4 c")
        assert "c-3" in reader and "c-0" in reader
        committed = _same_as_fresh(reader, path)
        writer.kill()
        assert _same_as_fresh(reader, path) == committed
        assert not any(id.startswith("b-") for id, _, _ in committed)
        _index_is_exact(reader)
        np.testing.assert_equal(reader.count(), len(committed))
    finally:
        writer.close()
        if reader is not None:
            reader.close()
