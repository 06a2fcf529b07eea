"""Concurrency: threads on one handle, and other processes on the same file."""

import sqlite3
import threading

import pytest

from vxmem import DatabaseLockedError, ReadOnlyError, Vectrix
from vxmem.memory import K_FEEDBACK, K_SESSION, K_TURN

from helpers import WordHashEmbedder, run_python

THREADS = 4
ROUNDS = 60
WORDS = "tea coffee paris london dark light mode pdf csv report cat dog".split()


def _run_threads(target):
    """Run ``target(k, barrier)`` on THREADS threads; return the exceptions they raised."""
    errors = []
    barrier = threading.Barrier(THREADS)

    def wrap(k):
        try:
            target(k, barrier)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def test_threads_remembering_into_one_session_never_share_a_turn_number(tmp_path):
    db = Vectrix(tmp_path / "t.db", embedder=WordHashEmbedder())
    got = [[] for _ in range(THREADS)]

    def work(k, barrier):
        barrier.wait()
        for i in range(ROUNDS):
            mid = db.remember(f"thread {k} says {WORDS[i % len(WORDS)]}", session="shared", timestamp=1000 + i)
            got[k].append(mid)

    assert _run_threads(work) == []
    turns = db.turns("shared", now=10**6)
    numbers = [r.metadata[K_TURN] for r in turns]
    assert len(turns) == THREADS * ROUNDS
    assert sorted(numbers) == list(range(THREADS * ROUNDS))
    db.close()


@pytest.mark.parametrize("exact_threshold", [20_000, 8], ids=["exact", "hnsw"])
def test_threads_remembering_recalling_grading_and_forgetting_lose_no_acknowledged_write(tmp_path, exact_threshold):
    path = tmp_path / "mix.db"
    db = Vectrix(path, embedder=WordHashEmbedder(), exact_threshold=exact_threshold)
    live = [dict() for _ in range(THREADS)]       # id -> session, per thread
    forgotten = [set() for _ in range(THREADS)]
    graded = [dict() for _ in range(THREADS)]     # id -> number of grades

    def work(k, barrier):
        own = f"own-{k}"
        barrier.wait()
        for i in range(ROUNDS):
            ts = 1000 + i
            text = f"{WORDS[(i + k) % len(WORDS)]} {WORDS[(3 * i) % len(WORDS)]} from {k} at {i}"
            session = own if i % 3 else "shared"
            mid = db.remember(text, session=session, timestamp=ts)
            live[k][mid] = session
            res = db.recall(text, session=session, limit=5, now=ts)
            assert 1 <= len(res) <= 5
            assert all(r.metadata[K_SESSION] == session for r in res)
            db.recall(text, limit=5, now=ts)
            if i % 4 == 1:
                db.feedback(mid, "useful", timestamp=ts)
                graded[k][mid] = graded[k].get(mid, 0) + 1
            if i % 5 == 4:
                victim = next(iter(live[k]))
                assert db.forget(ids=[victim]) == 1
                del live[k][victim]
                graded[k].pop(victim, None)
                forgotten[k].add(victim)
            db.context(text, session=own, token_budget=200, now=ts)

    assert _run_threads(work) == []

    def check(handle):
        for k in range(THREADS):
            for mid, session in live[k].items():
                meta = handle.get(mid).metadata
                assert meta[K_SESSION] == session
                assert len(meta.get(K_FEEDBACK, [])) == graded[k].get(mid, 0)
            for mid in forgotten[k]:
                assert mid not in handle
        assert handle.count() == sum(len(x) for x in live)
        numbers = [r.metadata[K_TURN] for r in handle.turns("shared", now=10**6)]
        assert len(numbers) == len(set(numbers))

    check(db)
    db.close()
    with Vectrix(path, embedder=WordHashEmbedder()) as again:
        check(again)


def test_second_writer_handle_in_the_same_process_gets_database_locked_error(tmp_path):
    path = tmp_path / "lock.db"
    with Vectrix(path, embedder=WordHashEmbedder()):
        with pytest.raises(DatabaseLockedError, match="already open for writing"):
            Vectrix(path, embedder=WordHashEmbedder())


def test_writer_lock_is_released_on_close(tmp_path):
    path = tmp_path / "lock.db"
    Vectrix(path, embedder=WordHashEmbedder()).close()
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        db.remember("still writable", timestamp=1)
        assert db.count() == 1


def test_second_writer_process_gets_database_locked_error(tmp_path):
    path = str(tmp_path / "lock.db")
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        db.remember("the first writer holds the file", timestamp=1)
        out = run_python("""
            import sys
            from vxmem import Vectrix, DatabaseLockedError
            try:
                Vectrix(sys.argv[1], embedder=lambda texts: [[1.0, 0.0]] * len(texts))
            except DatabaseLockedError as exc:
                print("locked:", exc)
            else:
                print("opened")
        """, path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("locked:"), out.stdout
        assert "read_only=True" in out.stdout  # the message says what to do instead
        assert db.count() == 1


def test_read_only_process_sees_what_the_writer_committed(tmp_path):
    path = str(tmp_path / "ro.db")
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        ids = [db.remember(f"note {w}", session="a", timestamp=i) for i, w in enumerate(WORDS[:5])]
        out = run_python("""
            import sys
            from helpers import WordHashEmbedder
            from vxmem import Vectrix
            with Vectrix(sys.argv[1], embedder=WordHashEmbedder(), read_only=True) as ro:
                for r in ro.turns("a", now=100):
                    print(r.id, r.text)
        """, path)
        assert out.returncode == 0, out.stderr
        seen = [line.split(" ", 1) for line in out.stdout.splitlines()]
        assert [s[0] for s in seen] == ids
        assert [s[1] for s in seen] == [f"note {w}" for w in WORDS[:5]]


def test_read_only_handle_sees_writes_committed_after_it_opened(tmp_path):
    path = tmp_path / "ro.db"
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        db.remember("before the reader", session="a", timestamp=1)
        with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as ro:
            assert ro.count() == 1
            later = db.remember("after the reader opened", session="a", timestamp=2)
            assert ro.count() == 2
            assert ro.get(later).text == "after the reader opened"
            assert [r.id for r in ro.recall("after the reader", session="a", now=3)][0] == later


def test_read_only_handle_refuses_writes(tmp_path):
    path = tmp_path / "ro.db"
    with Vectrix(path, embedder=WordHashEmbedder()) as db:
        mid = db.remember("kept", timestamp=1)
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.remember("not kept", timestamp=2)
        with pytest.raises(ReadOnlyError):
            ro.feedback(mid, "useful", timestamp=2)
        assert ro.count() == 1


def test_read_only_handle_searching_through_the_index_sees_new_writes(tmp_path):
    path = tmp_path / "ro.db"
    with Vectrix(path, embedder=WordHashEmbedder(), exact_threshold=8) as db:
        for i in range(30):
            db.remember(f"filler {WORDS[i % len(WORDS)]} {i}", session="a", timestamp=i)
        db.search("filler", limit=3)  # builds the index, saved on close
    with Vectrix(path, embedder=WordHashEmbedder(), exact_threshold=8) as db:
        with Vectrix(path, embedder=WordHashEmbedder(), read_only=True, exact_threshold=8) as ro:
            assert len(ro.search("filler", limit=3)) == 3
            new = db.add(["zebra xylophone quartz"])[0]
            hit = ro.search("zebra xylophone quartz", limit=1)
            assert hit.ids == [new]


def test_a_writer_closing_beside_a_reader_in_one_process_keeps_the_file_sound_for_other_processes(tmp_path):
    # Closing any descriptor of a file drops every POSIX lock the process holds on it,
    # SQLite's reader lock included: another process's writer then thought it was alone,
    # checkpointed and removed the WAL under the reader, and the file read as malformed.
    path = str(tmp_path / "shared.db")
    with Vectrix(path, embedder=WordHashEmbedder()) as writer:
        writer.add(["first"])
    with Vectrix(path, embedder=WordHashEmbedder(), read_only=True) as reader:
        assert reader.count() == 1
        Vectrix(path, embedder=WordHashEmbedder()).close()  # a writer of this process opens and closes
        for round in range(1, 4):
            out = run_python("""
                import sys
                from helpers import WordHashEmbedder
                from vxmem import Vectrix
                with Vectrix(sys.argv[1], embedder=WordHashEmbedder()) as w:
                    w.add([f"doc {i}" for i in range(300)])
            """, path)
            assert out.returncode == 0, out.stderr
            assert reader.count() == 1 + 300 * round
            conn = sqlite3.connect(path)
            try:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                assert conn.execute("SELECT count(*) FROM vx_docs").fetchone()[0] == 1 + 300 * round
            finally:
                conn.close()


def test_threads_writing_turns_store_each_read_after_the_turn_it_follows_and_recall_scores_them_alike():
    import numpy as np

    from vxmem.memory.late_stage import CONTEXT_SHARE, context_text
    from vxmem.models.late import default_late_interaction

    db = Vectrix(embedder=WordHashEmbedder(), rerank=True)  # the default's late interaction: token vectors stored
    late = default_late_interaction()
    query = "what did the threads say about tea"

    def work(k, barrier):
        barrier.wait()
        for i in range(6):  # a session of its own, and one all threads race into
            db.remember(f"thread {k} says {WORDS[(i + k) % len(WORDS)]} and {WORDS[i]}",
                        session=f"own-{k}" if i % 2 else "shared", timestamp=1000 + i)

    assert _run_threads(work) == []
    conn = db.engine.database.conn
    by_rowid = dict(conn.execute("SELECT rowid, id FROM vx_docs").fetchall())
    texts, after = {}, {}
    for session in ["shared"] + [f"own-{k}" for k in range(THREADS)]:
        turns = db.turns(session, now=10**6)  # by turn number
        order = [r.id for r in turns]
        texts.update((r.id, r.text) for r in turns)
        after.update((order[n], order[n - 1]) for n in range(1, len(order)))
    own = {by_rowid[d]: b for d, b in conn.execute("SELECT doc, bits FROM vx_late").fetchall()}
    assert own == {i: late.encode([t])[0] for i, t in texts.items()}
    read = conn.execute("SELECT doc, prev, bits FROM vx_late_context").fetchall()
    assert len(read) >= THREADS * 2  # each thread's own session: two turns follow one of its own, unraced
    for doc, prev, bits in read:  # and in the shared one, only a turn read after the turn it really follows
        mid = by_rowid[doc]
        assert by_rowid[prev] == after[mid]
        assert bits == late.encode([context_text(texts[after[mid]], texts[mid])])[0]
    ids = list(texts)  # every turn scores as if read in order, its context stored or read at recall
    want = [(1 - CONTEXT_SHARE) * late(query, [texts[i]])[0]
            + CONTEXT_SHARE * late(query, [context_text(texts[after[i]] if i in after else None, texts[i])])[0]
            for i in ids]
    np.testing.assert_allclose(db.memory.stage_scores(query, ids), want, atol=1e-6)
    db.close()
