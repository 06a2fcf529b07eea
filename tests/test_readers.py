"""Read-only handles: they see every commit (whole, never half), follow the change log
incrementally, fall back to a full reload when the log cannot say, and open any path.

Writers and readers here are handles in one process on one file (a read-only handle takes
no lock), so every interleaving is forced by the test, never left to timing.
"""

import os
import shutil
import sqlite3
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vxmem import InvalidDatabaseError, Vectrix
from vxmem.memory import K_SESSION
from vxmem.store.sqlite import database, opening

from helpers import T0, WordHashEmbedder, run_python

WORDS = "tea coffee paris london dark light mode pdf csv report cat dog".split()


def _embedder():
    return WordHashEmbedder()


def _view(db):
    return [(r.id, r.text, r.metadata) for r in db.scan()]


def _fresh_view(path):
    with Vectrix(path, embedder=_embedder(), read_only=True) as fresh:
        return _view(fresh)


def test_a_commit_landing_while_a_reader_reloads_is_seen_by_its_next_read(tmp_path):
    path = tmp_path / "race.db"
    writer = Vectrix(path, embedder=_embedder())
    writer.add(["first"], ids=["a"])
    armed = []

    def counter(text):
        if armed:  # the reader is counting what it just read: a writer commits right now
            armed.clear()
            writer.add(["landed mid-reload"], ids=["late"])
        return len(text.split())

    reader = Vectrix(path, embedder=_embedder(), token_counter=counter, read_only=True)
    writer.add(["second"], ids=["b"])
    armed.append(True)
    reader.count()  # the reload during which "late" commits
    assert not armed
    assert reader.count() == 3 == len(_fresh_view(path))
    assert "late" in reader
    writer.close()
    reader.close()


def test_a_reader_opening_while_the_first_write_commits_sees_a_healthy_file(tmp_path, monkeypatch):
    path = tmp_path / "new.db"
    writer = Vectrix(path, embedder=_embedder())  # the schema, no vector yet: no dimension either
    load = database.Database.load

    def load_after_a_commit(self, token_counter):
        if self.read_only and writer.count() == 0:
            writer.add(["the very first document"])  # commits between the reader's open and its load
        return load(self, token_counter)

    monkeypatch.setattr(database.Database, "load", load_after_a_commit)
    with Vectrix(path, embedder=_embedder(), read_only=True) as reader:
        assert reader.count() == 1
        assert reader.search("very first", limit=1)[0].text == "the very first document"
    writer.close()


def test_history_and_in_see_writes_committed_after_the_reader_opened(tmp_path):
    path = tmp_path / "h.db"
    with Vectrix(path, embedder=_embedder()) as writer:
        old = writer.remember("alice lives in rome", session="a", kind="fact", timestamp=T0)
        with Vectrix(path, embedder=_embedder(), read_only=True) as reader:
            assert [e.id for e in reader.history(old)] == [old]
            new = writer.feedback(old, "corrected", correction="alice lives in milan", timestamp=T0 + 1)
            assert new in reader
            assert [e.id for e in reader.history(old)] == [old, new]
            writer.forget(ids=[new])
            assert new not in reader


def test_a_reader_takes_in_only_the_rows_a_commit_touched(tmp_path):
    path = tmp_path / "inc.db"
    with Vectrix(path, embedder=_embedder()) as writer:
        writer.add([f"doc {w}" for w in WORDS])
        with Vectrix(path, embedder=_embedder(), read_only=True) as reader:
            with reader.engine.locked() as before:
                pass
            changes = []
            writer.add(["a newcomer"], ids=["new"])
            writer.update_metadata("new", {"tag": 1})
            with reader.engine.locked() as after:  # the same mirror, moved on: no full reload
                assert after is before
                changes.append(after.n_alive)
            assert changes == [len(WORDS) + 1]
            assert reader.get("new").metadata == {"tag": 1}
            assert _view(reader) == _fresh_view(path)


def test_a_reader_further_behind_than_the_change_log_reloads_in_full(tmp_path, monkeypatch):
    monkeypatch.setattr(opening, "CHANGE_WINDOW", 5)
    monkeypatch.setattr(database, "PRUNE_EVERY", 2)
    path = tmp_path / "behind.db"
    with Vectrix(path, embedder=_embedder()) as writer:
        writer.add(["before the reader"])
        with Vectrix(path, embedder=_embedder(), read_only=True) as reader:
            with reader.engine.locked() as before:
                pass
            for i in range(12):  # the log now starts past the reader's generation
                writer.add([f"commit {i}"], ids=[f"c{i}"])
            since = int(writer.engine.database.conn.execute(
                "SELECT value FROM vx_meta WHERE key = 'changes_since'").fetchone()[0])
            assert since > 1
            with reader.engine.locked() as after:
                assert after is not before  # read in full
            assert _view(reader) == _fresh_view(path)
            writer.delete(["c3"])
            with reader.engine.locked() as again:
                assert again is after  # and incremental again from there
            assert "c3" not in reader and reader.count() == 12


def test_a_reader_follows_moves_deletes_reused_ids_corrections_and_consolidation(tmp_path):
    path = tmp_path / "follow.db"
    with Vectrix(path, embedder=_embedder(), exact_threshold=4) as writer:
        with Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=4) as reader:
            steps = [
                lambda: writer.add([f"plain {w}" for w in WORDS], ids=[f"p{i}" for i in range(len(WORDS))]),
                lambda: [writer.remember(f"turn {i} about {WORDS[i]}", session="s", timestamp=T0 + i)
                         for i in range(10)],
                lambda: writer.update_metadata("p1", {K_SESSION: "moved"}),
                lambda: writer.delete(["p2", "p3"]),
                lambda: writer.add(["p2 again, another row"], ids=["p2"]),
                lambda: writer.feedback(writer.remember("bob likes csv", session="b", kind="fact", timestamp=T0),
                                        "corrected", correction="bob likes parquet", timestamp=T0 + 1),
                lambda: writer.consolidate("s", lambda items: [f"{len(items)} turns"], keep_recent=2,
                                           now=T0 + 100),
                lambda: writer.forget(session="s", kinds=("turn",)),
            ]
            for step in steps:
                step()
                assert _view(reader) == _fresh_view(path)
                with Vectrix(path, embedder=_embedder(), read_only=True, exact_threshold=4) as fresh:
                    for mode in ("dense", "lexical", "hybrid"):
                        for threshold in (0, 4):  # exact, then through the reader's HNSW index
                            reader.exact_threshold = fresh.exact_threshold = threshold
                            got = reader.search("turn about paris pdf", limit=5, mode=mode)
                            want = fresh.search("turn about paris pdf", limit=5, mode=mode)
                            # Through the graph, ties at the cut may go either way: the scores agree.
                            key = (lambda r: (r.id, round(r.score, 6))) if threshold == 0 else (
                                lambda r: round(r.score, 6))
                            assert [key(r) for r in got] == [key(r) for r in want]


def _is_memory(db, id):
    with db.engine.locked() as m:
        return m.memory_position(id) is not None


OPS = st.lists(st.tuples(st.sampled_from(["add", "remember", "update", "delete", "feedback"]),
                         st.integers(0, 10 ** 6)), min_size=1, max_size=12)


@settings(max_examples=15, deadline=None)
@given(ops=OPS)
def test_after_any_commits_a_reader_equals_a_fresh_reader(ops):
    d = tempfile.mkdtemp(prefix="vxreaders")
    path = os.path.join(d, "p.db")
    try:
        with Vectrix(path, embedder=_embedder()) as writer:
            writer.add(["seed document"], ids=["seed"])
            with Vectrix(path, embedder=_embedder(), read_only=True) as reader:
                for op, n in ops:
                    ids = [r.id for r in writer.scan()]
                    pick = ids[n % len(ids)] if ids else None
                    if op == "add":
                        writer.add([f"added {WORDS[n % len(WORDS)]} {n}"])
                    elif op == "remember":
                        writer.remember(f"said {WORDS[n % len(WORDS)]}", session=f"s{n % 3}", timestamp=T0 + n)
                    elif op == "update" and pick:
                        writer.update_metadata(pick, {"n": n})
                    elif op == "delete" and pick:
                        writer.delete([pick])
                    elif op == "feedback" and pick and _is_memory(writer, pick):
                        writer.feedback(pick, "useful", timestamp=T0 + n)
                    if n % 2:  # sometimes several commits land between two reads
                        assert _view(reader) == _fresh_view(path)
                assert _view(reader) == _fresh_view(path)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def make_version_2(path):
    """What a vxmem of schema 2 left: no change log."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE IF EXISTS vx_changes")
    conn.execute("DELETE FROM vx_meta WHERE key = 'changes_since'")
    conn.execute("UPDATE vx_meta SET value = '2' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def _old_writer_adds(path, id, text, dim):
    """A write as a schema-2 vxmem made it: the row, its FTS row, the generation; no change log."""
    conn = sqlite3.connect(path)
    vec = np.zeros(dim, dtype=np.float32)
    vec[0] = 1.0
    cur = conn.execute("INSERT INTO vx_docs (id, text, metadata, vector) VALUES (?, ?, '{}', ?)",
                       (id, text, vec.tobytes()))
    conn.execute("INSERT INTO vx_fts (rowid, text, scope) VALUES (?, ?, '')", (cur.lastrowid, text))
    conn.execute("UPDATE vx_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    conn.commit()
    conn.close()


def test_a_reader_of_a_version_2_file_reloads_in_full_and_a_writable_open_adds_the_change_log(tmp_path):
    path = str(tmp_path / "v2.db")
    with Vectrix(path, embedder=_embedder()) as writer:
        writer.add(["from before"], ids=["old"])
    make_version_2(path)
    with Vectrix(path, embedder=_embedder(), read_only=True) as reader:
        assert reader.count() == 1
        _old_writer_adds(path, "by-v2", "written by an older vxmem", _embedder().dim)
        assert "by-v2" in reader  # no log to follow: read in full
        with Vectrix(path, embedder=_embedder()) as writer:  # a writable open migrates the file
            version = writer.engine.database.conn.execute(
                "SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0]
            assert version == str(database.SCHEMA_VERSION)
            assert "by-v2" in reader
            with reader.engine.locked() as before:
                pass
            writer.add(["after the migration"], ids=["new"])
            assert "new" in reader
            with reader.engine.locked() as after:
                assert after is before  # incremental from the migration on
        assert _view(reader) == _fresh_view(path)


# ------------------------------------------------------------------ the path of a read-only handle


@pytest.mark.parametrize("name", ["notes#2.db", "a?mode=rwc.db", "100%.db", "%23x.db", "with space.db",
                                  "ünïcødé 日本.db", "semi;colon&amp=1.db"])
def test_a_read_only_handle_opens_exactly_the_file_named_whatever_its_characters(tmp_path, name):
    plain = tmp_path / "notes"  # what "notes#2.db" unescaped would open
    with Vectrix(plain, embedder=_embedder()) as db:
        db.add(["the wrong database"])
    with Vectrix(tmp_path / name, embedder=_embedder()) as db:
        db.add(["the right database", "twice"])
    before = sorted(os.listdir(tmp_path))
    with Vectrix(tmp_path / name, embedder=_embedder(), read_only=True) as ro:
        assert sorted(r.text for r in ro.scan()) == ["the right database", "twice"]
    made = set(os.listdir(tmp_path)) - set(before)
    assert made <= {name + "-wal", name + "-shm"}  # SQLite's own WAL files of that file, no stray one


def test_a_cleanly_closed_database_in_a_read_only_directory_opens_read_only():
    d = tempfile.mkdtemp(prefix="vxro")
    try:
        os.chmod(d, 0o755)
        path = os.path.join(d, "frozen.db")
        with Vectrix(path, embedder=_embedder()) as db:
            db.remember("kept in a read-only place", session="s", timestamp=T0)
        assert sorted(os.listdir(d)) == ["frozen.db"]
        os.chmod(d, 0o555)
        out = run_python("""
            import os, sys
            from helpers import WordHashEmbedder
            from vxmem import Vectrix
            embedder = WordHashEmbedder()
            if os.geteuid() == 0:  # root writes anywhere: become nobody to see the directory as others do
                os.setgid(65534)
                os.setuid(65534)
            assert not os.access(os.path.dirname(sys.argv[1]), os.W_OK)
            with Vectrix(sys.argv[1], embedder=embedder, read_only=True) as ro:
                print(ro.count(), ro.recall("read-only place", session="s", now=2e9)[0].text)
        """, path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "1 kept in a read-only place"
        assert sorted(os.listdir(d)) == ["frozen.db"]
    finally:
        os.chmod(d, 0o755)
        shutil.rmtree(d, ignore_errors=True)


def test_a_directory_as_a_read_only_path_gets_a_clear_error(tmp_path):
    with pytest.raises((InvalidDatabaseError, OSError)):
        Vectrix(tmp_path, embedder=_embedder(), read_only=True)


def test_the_change_log_is_written_in_the_transaction_it_describes(tmp_path):
    path = tmp_path / "log.db"
    with Vectrix(path, embedder=_embedder()) as writer:
        (a,) = writer.add(["one"])
        writer.update_metadata(a, {"k": 1})
        writer.delete([a])
        conn = writer.engine.database.conn
        rows = conn.execute("SELECT generation, op FROM vx_changes ORDER BY generation").fetchall()
        generation = int(conn.execute("SELECT value FROM vx_meta WHERE key = 'generation'").fetchone()[0])
    assert rows == [(1, "insert"), (2, "update"), (3, "delete")]
    assert generation == 3



def test_a_nested_block_does_not_move_the_mirror_under_the_outer_one(tmp_path):
    path = tmp_path / "nested.db"
    with Vectrix(path, embedder=_embedder()) as writer:
        writer.add(["first", "second"])
    make_version_2(path)  # no change log: a change means a whole new mirror
    with Vectrix(path, embedder=_embedder(), read_only=True) as reader:
        with reader.engine.locked() as outer:
            n = outer.n
            _old_writer_adds(path, "late", "committed inside the outer block", _embedder().dim)
            with reader.engine.locked() as inner:  # what recall() does: candidate_pool() inside recall()'s block
                assert inner is outer and inner.n == n
            assert reader.count() == 2  # still the outer block's snapshot
        assert reader.count() == 3 and "late" in reader


def test_a_reader_whose_catch_up_failed_takes_the_commit_in_on_the_next_read(tmp_path):
    path = tmp_path / "retry.db"
    with Vectrix(path, embedder=_embedder()) as writer:
        writer.add(["one"])
        failing = []

        def counter(text):
            if failing:
                raise RuntimeError("token counter down")
            return 1

        with Vectrix(path, embedder=_embedder(), token_counter=counter, read_only=True) as reader:
            failing.append(True)
            writer.add(["two"], ids=["two"])
            with pytest.raises(RuntimeError, match="down"):
                reader.count()
            failing.clear()
            assert "two" in reader and reader.count() == 2


def test_a_reader_that_cannot_write_the_directory_reads_immutably_only_when_no_writer_has_the_file(
        tmp_path, monkeypatch):
    """A writer of another user may write where this reader cannot: while it has the file
    open (its shared-memory file is there, even before its first commit) the reader must
    follow its commits, not read the file as if nothing could change it."""
    from vxmem.store.sqlite import files

    path = tmp_path / "db.vxdb"
    link = tmp_path / "link.vxdb"
    Vectrix(str(path), embedder="hashing").close()
    link.symlink_to(path)
    monkeypatch.setattr(files.os, "access", lambda p, mode: False)  # as a reader of another user
    assert "immutable=1" in files.read_only_uri(str(path))  # nobody has it open
    writer = Vectrix(str(path), embedder="hashing")  # open, nothing committed yet: its WAL is empty
    try:
        assert os.path.exists(str(path) + "-shm") and os.path.getsize(str(path) + "-wal") == 0
        assert "immutable=1" not in files.read_only_uri(str(path))
        assert "immutable=1" not in files.read_only_uri(str(link))  # the files beside the link's target
    finally:
        writer.close()
    assert "immutable=1" in files.read_only_uri(str(link))
