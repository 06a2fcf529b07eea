"""The HNSW index and the WAL off the caller's path: a saved index is reused after
writes, pending vectors join the graph in the background without changing any result, WAL
checkpoints run in a thread of their own with a cap, and the first write after open does
not grow the mirror."""

import os
import sqlite3
import threading

import numpy as np

from vxmem import Vectrix
from vxmem.store.sqlite import checkpoint, database, opening
from vxmem.store.vector import hnsw

from helpers import WordHashEmbedder

N = 300
WORDS = "tea coffee paris london dark light mode pdf csv report cat dog blue red green river".split()


def _text(i):
    return f"memory {i} about {WORDS[i % 16]} {WORDS[(i // 5) % 16]} {WORDS[(i * 7) % 16]}"


def _open(path, **kw):
    return Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=8, **kw)


def _saved(tmp_path):
    path = tmp_path / "live.db"
    with _open(path) as db:
        db.add([_text(i) for i in range(N)])
        db.build_index()  # saved on close
    return path


def _hnsw_and_exact(db, query, limit=10):
    """The index's answer and the exact scan's, as (id, score) lists; documents whose scores
    tie to 5 places are ordered by id (the last bit of a float32 dot product depends on the
    memory layout, so true ties may come in either order)."""
    def answer():
        rows = [(round(r.score, 5), r.id) for r in db.search(query, limit=limit + 5)]
        cut = rows[limit - 1][0] if len(rows) >= limit else None
        rows = [r for r in rows if cut is None or r[0] > cut]  # ties across the limit may go either way
        return [(i, s) for s, i in sorted(rows, key=lambda r: (-r[0], r[1]))]

    got = answer()
    threshold, db.exact_threshold = db.exact_threshold, 0
    exact = answer()
    db.exact_threshold = threshold
    return got, exact


def _graph_keys(db):
    with db.engine.index.graph_lock:
        return sorted(int(k) for k in db.engine.index.index.keys)


def _live_rowids(db):
    with db.engine.locked() as m:
        return sorted(int(r) for r in m.rowid[m.live_positions()])


def test_a_saved_index_is_reused_after_writes_made_before_the_first_search(tmp_path):
    path = _saved(tmp_path)
    with _open(path) as db:
        new = db.add(["quokka newcomer one", "quokka newcomer two"])
        gone = db.scan().__next__().id
        db.delete([gone])
        got, exact = _hnsw_and_exact(db, "quokka newcomer")
        assert db.engine.index.rebuilds == 0 and db.engine.index.index is not None
        assert got == exact and {i for i, _ in got[:2]} == set(new)
        with db.engine.locked():
            db.engine.index.flush()
        assert _graph_keys(db) == _live_rowids(db)
    with _open(path) as again:  # and the file saved then holds them
        assert again.engine.index.load_saved() and _graph_keys(again) == _live_rowids(again)


def test_a_saved_index_is_reused_by_a_later_process_after_writes_of_a_process_that_never_searched(tmp_path):
    path = _saved(tmp_path)
    with _open(path) as db:
        db.exact_threshold = 10**9  # this one never touches the index
        db.add(["a platypus arrives"])
        db.delete([db.scan().__next__().id])
    with _open(path) as db:
        got, exact = _hnsw_and_exact(db, "platypus arrives")
        assert db.engine.index.rebuilds == 0 and got == exact and db.get(got[0][0]).text == "a platypus arrives"


def test_a_saved_index_older_than_the_change_log_reaches_is_rebuilt(tmp_path, monkeypatch):
    path = _saved(tmp_path)
    monkeypatch.setattr(opening, "CHANGE_WINDOW", 3)
    monkeypatch.setattr(database, "PRUNE_EVERY", 1)
    with _open(path) as db:
        db.exact_threshold = 10**9
        for i in range(6):
            db.add([f"pruned away {i}"])
    with _open(path) as db:
        got, exact = _hnsw_and_exact(db, "pruned away 4")
        assert db.engine.index.rebuilds == 1 and got == exact and db.get(got[0][0]).text == "pruned away 4"


def test_a_saved_index_whose_graph_misses_a_row_the_log_does_not_name_is_rebuilt(tmp_path):
    path = _saved(tmp_path)
    with _open(path) as db:
        db.build_index()
        with db.engine.locked() as m:
            victim = int(m.rowid[5])
        with db.engine.index.graph_lock:
            db.engine.index.index.remove(np.array([victim], dtype=np.uint64))
        db.engine.index.dirty = True  # saved without that row, as a foreign or damaged file would be
    with _open(path) as db:
        assert db.engine.index.load_saved() is False


def _hold_the_background_flush(monkeypatch, batch):
    """Flush from 20 pending vectors, ``batch`` at a time, the flush thread holding inside
    its first graph add until the returned ``release`` is set (``started`` says it got there)."""
    monkeypatch.setattr(hnsw, "PENDING_FLUSH", 20)
    monkeypatch.setattr(hnsw, "FLUSH_BATCH", batch)
    started, release = threading.Event(), threading.Event()
    real_add = hnsw.HnswCache.add_to_graph

    def held_add(self, index, keys, vecs, threads=1):
        if threading.current_thread().name == "vxmem-index-flush":
            started.set()
            assert release.wait(30)
        real_add(self, index, keys, vecs, threads)

    monkeypatch.setattr(hnsw.HnswCache, "add_to_graph", held_add)
    return started, release


def test_the_background_flush_never_changes_a_result_and_never_holds_up_a_write(tmp_path, monkeypatch):
    started, release = _hold_the_background_flush(monkeypatch, batch=4)
    db = _open(tmp_path / "flush.db")
    db.add([_text(i) for i in range(N)])
    db.build_index()
    fresh = db.add([f"fresh quokka {i}" for i in range(25)])  # crosses the flush size
    assert started.wait(30)  # the flush holds its first batch
    more = db.add(["written while the flush is held"])  # a write does not wait for it
    with db.engine.locked() as m:
        first = sorted(db.engine.index.pending)[0]
        flushing = m.ids[m.rowid_pos[first]]
    db.delete([flushing, fresh[-1]])  # one in the held batch, one still waiting
    for q in ("fresh quokka 3", "written while the flush is held", "memory 17 about"):
        got, exact = _hnsw_and_exact(db, q)
        assert got == exact
    release.set()
    db.build_index()
    assert not db.engine.index.pending and _graph_keys(db) == _live_rowids(db)
    for q in ("fresh quokka 3", "written while the flush is held", "memory 17 about"):
        got, exact = _hnsw_and_exact(db, q)
        assert got == exact
    assert more[0] in {i for i, _ in _hnsw_and_exact(db, "written while the flush is held")[0]}
    db.close()


def _wal_frames(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    finally:
        conn.close()


def _frames_after(tmp_path, monkeypatch, cap, commits=60):
    monkeypatch.setattr(checkpoint, "CHECKPOINT_CAP", cap)
    path = tmp_path / f"wal{cap}.db"
    db = Vectrix(path, embedder=WordHashEmbedder(dim=16))
    for i in range(commits):
        db.add([f"row {i}"])
    frames = _wal_frames(str(path))
    db.close()
    return frames


def test_the_writer_checkpoints_itself_past_the_cap_when_the_background_falls_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint.Checkpointer, "request", lambda self: None)  # a background that never runs
    unbounded = _frames_after(tmp_path, monkeypatch, 10**9)
    capped = _frames_after(tmp_path, monkeypatch, 25)  # checkpointed at commits 25 and 50: 10 commits since
    assert capped * 3 < unbounded


def test_a_writer_rewinds_its_wal_once_a_checkpoint_finds_it_large(tmp_path, monkeypatch):
    """PASSIVE checkpoints alone never rewind the WAL of a writer that keeps committing (it
    grew by 58 MB per 1,000 remember() calls, without bound): once the thread's checkpoint
    finds more than REWIND_AT bytes in use, the writer's next commit rewinds it."""
    monkeypatch.setattr(checkpoint.Checkpointer, "request", lambda self: None)  # the thread's rounds run here, in turn
    monkeypatch.setattr(checkpoint, "REWIND_AT", 64 << 10)
    path = tmp_path / "rewind.db"
    db = Vectrix(path, embedder=WordHashEmbedder(dim=16))
    cp = db.engine.database.checkpointer
    for i in range(30):
        db.add([f"row {i} " + "word " * 50])
    # A checkpoint that cannot copy the newest frames (what commits made while the thread's
    # checkpoint ran do to it; here, a reader on an older snapshot): SQLite alone then never
    # rewinds, as every later transaction begins with frames left to copy.
    reader = sqlite3.connect(str(path), isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM vx_docs").fetchone()
    for i in range(30, 60):
        db.add([f"row {i} " + "word " * 50])
    used = cp.checkpoint()  # the thread's round
    reader.execute("COMMIT")
    reader.close()
    assert used > checkpoint.REWIND_AT
    size = os.path.getsize(str(path) + "-wal")
    cp.checked(used)
    for i in range(60, 65):
        db.add([f"row {i}"])  # the first of these rewinds, the rest write from the WAL's start
    assert _wal_frames(str(path)) * 4120 < used / 5
    assert os.path.getsize(str(path) + "-wal") < size * 1.1  # reused: grown by the one commit before the rewind
    assert db.count() == 65
    db.close()
    with Vectrix(path, embedder=WordHashEmbedder(dim=16), read_only=True) as again:
        assert again.count() == 65


def test_a_rewind_waits_for_no_reader(tmp_path, monkeypatch):
    """A reader on an older snapshot keeps the WAL's frames: the rewind gives up at once
    (the writer's call returns without waiting) and a later round rewinds."""
    monkeypatch.setattr(checkpoint.Checkpointer, "request", lambda self: None)
    path = tmp_path / "held.db"
    db = Vectrix(path, embedder=WordHashEmbedder(dim=16))
    db.add(["first"])
    reader = sqlite3.connect(str(path), isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM vx_docs").fetchone()[0] == 1  # holds that snapshot
    for i in range(20):
        db.add([f"row {i}"])
    conn = db.engine.database.conn
    assert checkpoint.Checkpointer.rewind(conn) is False
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000  # the writer's own, restored
    reader.execute("COMMIT")
    reader.close()
    assert checkpoint.Checkpointer.rewind(conn) is True
    db.add(["after"])
    assert _wal_frames(str(path)) < 20
    db.close()


def test_wal_checkpoints_run_in_a_thread_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 5)
    ran = threading.Event()
    where = []
    real = checkpoint.Checkpointer.checkpoint

    def recorded(self):
        where.append(threading.current_thread().name)
        used = real(self)
        ran.set()
        return used

    monkeypatch.setattr(checkpoint.Checkpointer, "checkpoint", recorded)
    with Vectrix(tmp_path / "bg.db", embedder=WordHashEmbedder(dim=16)) as db:
        assert db.engine.database.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        for i in range(5):
            db.add([f"row {i}"])
        assert ran.wait(30)
    assert where and set(where) == {"vxmem-checkpoint"}
    with Vectrix(tmp_path / "bg.db", embedder=WordHashEmbedder(dim=16)) as db:
        assert db.count() == 5


def test_the_first_write_after_open_does_not_grow_the_mirror(tmp_path):
    path = tmp_path / "grow.db"
    with Vectrix(path, embedder=WordHashEmbedder(dim=16)) as db:
        db.add([f"row {i}" for i in range(500)])
    with Vectrix(path, embedder=WordHashEmbedder(dim=16)) as db:
        with db.engine.locked() as m:
            before = m.heap
        db.add(["one more"])
        with db.engine.locked() as m:
            assert m.heap is before and len(m.rowid) >= 1000


def test_close_saves_every_pending_vector_even_while_the_background_flush_runs(tmp_path, monkeypatch):
    started, release = _hold_the_background_flush(monkeypatch, batch=2)
    path = tmp_path / "close.db"
    db = _open(path)
    db.add([_text(i) for i in range(N)])
    db.build_index()
    db.add([f"late quokka {i}" for i in range(30)])
    assert started.wait(30)
    release.set()  # the flush is mid-way: close() stops it after this batch and adds the rest itself
    db.close()
    with _open(path) as again:
        assert again.engine.index.load_saved() and not again.engine.index.pending
        assert _graph_keys(again) == _live_rowids(again)
