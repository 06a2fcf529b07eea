"""Issue 11: each defect adversarial testing found, as the behaviour that now holds.

Reserved keys checked by type, callables that fail before anything is written, index
files that must prove they are this database's, forget's narrowing, full disks, slow
callbacks outside the lock, forked handles, and the smaller ones.
"""

import json
import os
import sqlite3
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from vxmem import ForkedHandleError, Vectrix
from vxmem.cli import main as cli_main
from vxmem.memory import (
    K_CONSOLIDATED_FROM,
    K_FEEDBACK,
    K_SESSION,
    K_SUPERSEDED_BY,
    K_SUPERSEDES,
    K_TURN,
    feedback_score,
)
from vxmem.ranking.scoring import OUTCOME_SIGN, decay
from vxmem.workbench.datasets import DatasetError, load
from vxmem.workbench.views import load_bytes

from helpers import DAY, T0, WordHashEmbedder, run_python


def _embedder():
    return WordHashEmbedder()


@pytest.fixture
def db(make_db):
    return make_db(embedder=_embedder())


def _file_rows(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT id, text, metadata FROM vx_docs ORDER BY rowid").fetchall()
    finally:
        conn.close()


# ------------------------------------------------------------------ 1. reserved keys, CI determinism


@pytest.mark.parametrize("meta", [
    {"_vx_session": []}, {"_vx_session": 3}, {"_vx_turn": True}, {"_vx_turn": -1}, {"_vx_turn": 2**62},
    {"_vx_turn": 1.5}, {"_vx_ts": "yesterday"}, {"_vx_ts": 1e300}, {"_vx_ts": False}, {"_vx_kind": "memo"},
    {"_vx_kind": None}, {"_vx_role": 3}, {"_vx_expires": "never"}, {"_vx_superseded_by": 5},
    {"_vx_supersedes": "abc"}, {"_vx_supersedes": ["a", 1]}, {"_vx_consolidated_from": [None]},
    {"_vx_feedback": [["great", 1.0]]}, {"_vx_feedback": [["useful"]]}, {"_vx_feedback": "useful"},
    {"_vx_superseded_at": True}, {"_vx_scoring": []}, {"_vx_anything": 1}, {"_vx_": None},
], ids=lambda m: json.dumps(m))
def test_add_refuses_reserved_keys_of_the_wrong_type_and_changes_nothing(db, meta):
    db.add(["already here"])
    with pytest.raises((TypeError, ValueError), match="_vx_"):
        db.add(["0"], metadata=meta)
    with pytest.raises((TypeError, ValueError), match="_vx_"):
        db.add(["0", "1"], metadata=[None, meta])
    (doc,) = [r.id for r in db.scan()]
    with pytest.raises((TypeError, ValueError), match="_vx_"):
        db.update_metadata(doc, meta)
    assert [(r.text, r.metadata) for r in db.scan()] == [("already here", {})]


def test_add_accepts_well_typed_reserved_keys_and_the_memory_reads_them_back(db):
    (mid,) = db.add(["written through the collection"], metadata={
        "_vx_kind": "fact", "_vx_session": "s", "_vx_role": "user", "_vx_ts": T0, "_vx_expires": T0 + DAY,
        "_vx_feedback": [["useful", T0]], "_vx_supersedes": [], "_vx_superseded_by": None})
    assert [e.id for e in db.history(mid)] == [mid]
    assert db.recall("written collection", session="s", now=T0)[0].id == mid
    (plain,) = db.add(["a plain document in a session"], metadata={"_vx_session": None})
    assert db.get(plain).metadata == {"_vx_session": None}


def test_the_hypothesis_profile_is_derandomized_with_no_example_database_and_prints_blobs():
    assert settings.default.derandomize is True
    assert settings.default.database is None
    assert settings.default.print_blob is True


# ------------------------------------------------------------------ 4. callables fail before the transaction


def test_a_token_counter_that_raises_changes_nothing_and_a_retry_with_the_same_ids_works(tmp_path):
    path = tmp_path / "tok.db"

    def counter(text):
        if text == "BOOM":
            raise RuntimeError("counter down")
        return 1

    with Vectrix(path, embedder=_embedder(), token_counter=counter) as db:
        with pytest.raises(RuntimeError, match="counter down"):
            db.add(["ok", "BOOM", "ok2"], ids=["a", "b", "c"])
        assert db.count() == 0 and _file_rows(path) == []
        with pytest.raises(RuntimeError):
            db.remember("BOOM", session="s", timestamp=T0)
        assert db.count() == 0
        db.token_counter = lambda text: 1
        assert db.add(["ok", "BOOM", "ok2"], ids=["a", "b", "c"]) == ["a", "b", "c"]
        assert db.get(db.remember("first turn", session="s", timestamp=T0)).metadata[K_TURN] == 0


@pytest.mark.parametrize("bad", [-3, 2.5, 1.0, True, 2**70, "3", None, complex(1, 0), np.float64(2.0)],
                         ids=repr)
def test_token_counts_that_are_not_non_negative_ints_are_refused_before_anything_is_written(tmp_path, bad):
    path = tmp_path / "bad.db"
    with Vectrix(path, embedder=_embedder()) as db:
        db.add(["kept"], ids=["kept"])
        db.token_counter = lambda text: bad
        with pytest.raises((TypeError, ValueError), match="token_counter"):
            db.add(["refused"], ids=["x"])
        with pytest.raises((TypeError, ValueError), match="token_counter"):
            db.remember("refused too", session="s", timestamp=T0)
        db.token_counter = lambda text: 2
        assert [r.id for r in db.scan()] == ["kept"] == [row[0] for row in _file_rows(path)]
        db.add(["retried"], ids=["x"])
        assert db.get("x").text == "retried"


def test_numpy_integer_token_counts_are_accepted(db):
    db.token_counter = lambda text: np.int64(len(text.split()))
    db.add(["three words here"])
    assert db.search("three", limit=1).token_estimate == 3


# ------------------------------------------------------------------ 5. the index file must prove itself

INDEX_N = 200


def _memory_text(i):
    words = "tea coffee paris london dark light mode pdf csv report cat dog blue red".split()
    return f"memory {i} {words[i % 14]} {words[(i // 3) % 14]} {words[(i * 5) % 14]}"


def _indexed_db(path, texts):
    with Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=8) as db:
        db.add(texts)
        db.build_index()


CHILD = """
    import json, sys
    from helpers import WordHashEmbedder
    from vxmem import Vectrix
    with Vectrix(sys.argv[1], embedder=WordHashEmbedder(dim=64), exact_threshold=8) as db:
        hnsw = db.search(sys.argv[2], limit=5)
        db.exact_threshold = 0
        exact = db.search(sys.argv[2], limit=5)
        print(json.dumps({"hnsw": [[r.id, round(r.score, 5)] for r in hnsw],
                          "exact": [[r.id, round(r.score, 5)] for r in exact], "size": len(db.engine.index)}))
"""


def _search_in_child(path, query):
    out = run_python(CHILD, str(path), query)  # a damaged index must not take pytest down with it
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    d = tmp_path_factory.mktemp("indexed")
    ours, other = d / "ours.db", d / "other.db"
    _indexed_db(ours, [_memory_text(i) for i in range(INDEX_N)])
    _indexed_db(other, [f"unrelated {i} zebra quartz" for i in range(INDEX_N)])  # same count, same dimension
    return ours, other


def _copy_ours(indexed, tmp_path):
    ours, _ = indexed
    path = tmp_path / "copy.db"
    for ext in ("", ".usearch", ".usearch.json"):
        path.with_name("copy.db" + ext).write_bytes(Path(str(ours) + ext).read_bytes())
    return path


@pytest.mark.parametrize("damage", ["foreign-index", "foreign-index-and-matching-digest", "flipped-bytes",
                                    "truncated", "grown"])
def test_an_index_file_that_is_not_this_databases_is_rebuilt_never_trusted(indexed, tmp_path, damage):
    path = _copy_ours(indexed, tmp_path)
    idx, side = Path(str(path) + ".usearch"), Path(str(path) + ".usearch.json")
    body = idx.read_bytes()
    if damage.startswith("foreign-index"):
        idx.write_bytes(Path(str(indexed[1]) + ".usearch").read_bytes())  # beside this database's own sidecar
        if damage == "foreign-index-and-matching-digest":  # the sidecar rewritten to describe the foreign file
            import zlib

            s = json.loads(side.read_text())
            s["size"], s["crc32"] = idx.stat().st_size, zlib.crc32(idx.read_bytes())
            side.write_text(json.dumps(s))
    elif damage == "flipped-bytes":
        mid = len(body) // 2
        idx.write_bytes(body[:mid] + bytes(b ^ 0xFF for b in body[mid:mid + 512]) + body[mid + 512:])
    elif damage == "truncated":
        idx.write_bytes(body[: len(body) * 3 // 4])
    else:
        idx.write_bytes(body + b"\0" * 4096)
    got = _search_in_child(path, _memory_text(7))
    assert got["hnsw"] == got["exact"]
    assert got["exact"][0][1] == pytest.approx(1.0, abs=1e-5)
    assert got["size"] == INDEX_N


def test_a_saved_index_that_is_this_databases_is_loaded_not_rebuilt(indexed, tmp_path):
    path = _copy_ours(indexed, tmp_path)
    with Vectrix(path, embedder=WordHashEmbedder(dim=64), exact_threshold=8) as db:
        assert db.engine.index.load_saved()
        assert len(db.engine.index) == INDEX_N


# ------------------------------------------------------------------ 6. forget's selection narrows ids


def test_forget_with_ids_leaves_alone_the_ids_outside_the_session_kinds_age_or_superseded_selection(db):
    bob = db.remember("bob's secret", session="bob", timestamp=T0)
    alice = db.remember("alice's note", session="alice", timestamp=T0)
    fact = db.remember("alice likes tea", session="alice", kind="fact", timestamp=T0)
    new = db.feedback(fact, "corrected", correction="alice likes coffee", timestamp=T0 + DAY)
    assert db.forget(session="alice", ids=[bob]) == 0
    assert bob in db
    assert db.forget(ids=[fact, alice], kinds=["fact"], now=T0 + 2 * DAY) == 1  # kinds given: only the fact
    assert alice in db and fact not in db
    assert db.forget(ids=[new, alice], superseded=True) == 0  # neither was replaced
    assert db.forget(ids=[alice], older_than=10, now=T0 + 2 * DAY) == 0  # not that old
    assert db.forget(ids=[new, bob], session="alice") == 1  # default kinds: ids of every kind
    assert db.forget(ids=[alice, bob]) == 2


# ------------------------------------------------------------------ 7. a full disk


def test_a_full_disk_raises_the_real_error_and_changes_nothing(tmp_path):
    path = tmp_path / "full.db"
    with Vectrix(path, embedder=_embedder()) as db:
        db.add(["seed"], ids=["seed"])
        conn = db.engine.database.conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite now reports SQLITE_FULL
        with pytest.raises(sqlite3.OperationalError, match="full") as info:
            db.add(["x " * 5000] * 50)
        assert "cannot rollback" not in str(info.value)
        with pytest.raises(sqlite3.OperationalError, match="full"):
            db.remember("y " * 20000, session="s", timestamp=T0)
        assert [r.id for r in db.scan()] == ["seed"]
        conn.execute("PRAGMA max_page_count = 1073741823")
        db.remember("room again", session="s", timestamp=T0)
        assert db.get(db.remember("next", session="s", timestamp=T0)).metadata[K_TURN] == 1


def test_close_never_raises_for_an_index_it_could_not_save_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "nospace.db"
    db = Vectrix(path, embedder=_embedder(), exact_threshold=4)
    db.add([f"doc {i}" for i in range(30)])
    db.build_index()
    tmp = Path(str(path) + ".usearch.tmp")
    tmp.symlink_to("/dev/full")  # the index is written there: ENOSPC on a real write
    db.close()
    assert not tmp.exists() and not tmp.is_symlink()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    with Vectrix(path, embedder=_embedder(), exact_threshold=4) as again:
        assert again.count() == 30
        assert again.search("doc 7", limit=1)[0].text == "doc 7"


def test_temp_files_a_killed_index_save_left_are_removed_at_the_next_writable_open(tmp_path):
    path = tmp_path / "killed.db"
    with Vectrix(path, embedder=_embedder()) as db:
        db.add(["x"])
    for name in (".usearch.tmp", ".usearch.json.tmp"):
        Path(str(path) + name).write_bytes(b"half a save")
    with Vectrix(path, embedder=_embedder(), read_only=True):  # a reader never touches them
        assert Path(str(path) + ".usearch.tmp").exists()
    with Vectrix(path, embedder=_embedder()):
        assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


# ------------------------------------------------------------------ 8. callbacks run outside the lock

WAIT = 30  # seconds an Event waits before the test calls it a deadlock (never reached when it passes)


def _other_thread_recalls(db, started, done, errors):
    def run():
        try:
            assert started.wait(WAIT)
            db.recall("anything at all", session="other", now=T0 + 100)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            done.set()
    t = threading.Thread(target=run)
    t.start()
    return t


def _seeded(db):
    for i in range(8):
        db.remember(f"turn {i} about tea", session="mine", timestamp=T0 + i)
    db.remember("someone else's turn", session="other", timestamp=T0)


def test_a_summarizer_waiting_for_another_threads_recall_does_not_deadlock(db):
    _seeded(db)
    started, done, errors = threading.Event(), threading.Event(), []
    thread = _other_thread_recalls(db, started, done, errors)

    def summarize(items):
        started.set()
        assert done.wait(WAIT), "the other thread's recall was held up by the summarizer"
        return [f"{len(items)} turns about tea"]

    report = db.consolidate("mine", summarize, keep_recent=2, now=T0 + 100)
    thread.join(WAIT)
    assert errors == [] and report.completed and len(report.facts) == 1


def test_a_judge_waiting_for_another_threads_recall_does_not_deadlock(db):
    _seeded(db)
    db.remember("I live in rome", session="mine", kind="fact", timestamp=T0)
    started, done, errors = threading.Event(), threading.Event(), []
    thread = _other_thread_recalls(db, started, done, errors)

    def judge(new, olds):
        started.set()
        assert done.wait(WAIT), "the other thread's recall was held up by the judge"
        return [True] * len(olds)

    db.memory.judge = judge
    new = db.remember("I live in milan", session="mine", kind="fact", timestamp=T0 + 1)
    thread.join(WAIT)
    assert errors == [] and db.get(new).metadata[K_SUPERSEDES]


def test_an_embedder_waiting_for_another_threads_recall_does_not_deadlock(db):
    _seeded(db)
    started, done, errors = threading.Event(), threading.Event(), []
    thread = _other_thread_recalls(db, started, done, errors)
    inner = db.embedder

    def embedder(texts):
        if texts == ["the slow one"]:
            started.set()
            assert done.wait(WAIT), "the other thread's recall was held up by the embedder"
        return inner(texts)

    db.embedder = embedder
    db.add(["the slow one"])
    thread.join(WAIT)
    assert errors == [] and db.count() == 10


def test_a_consolidation_batch_whose_turns_changed_while_the_summarizer_ran_is_skipped(db):
    _seeded(db)
    victim = db.turns("mine", now=T0 + 100)[0].id

    def summarize(items):  # another write lands while the summarizer works
        db.forget(ids=[victim])
        return ["a fact nobody should store"]

    report = db.consolidate("mine", summarize, keep_recent=2, now=T0 + 100)
    assert report.batches_skipped == 1 and report.facts == [] and report.turns_consolidated == []
    assert db.count({"_vx_kind": "fact"}) == 0
    assert len(db.turns("mine", now=T0 + 100)) == 7  # only the forgotten one went


def test_a_judge_verdict_on_a_fact_superseded_meanwhile_is_not_applied(db):
    old = db.remember("the office is in rome", session="s", kind="fact", timestamp=T0)
    corrected = []

    def judge(new, olds):  # while the judge thinks, someone corrects the fact
        corrected.append(db.feedback(old, "corrected", correction="the office is in turin", timestamp=T0 + 1))
        return [True] * len(olds)

    db.memory.judge = judge
    new = db.remember("the office is in milan", session="s", kind="fact", timestamp=T0 + 2)
    assert db.get(old).metadata[K_SUPERSEDED_BY] == corrected[0]  # the correction's link stands
    assert old not in (db.get(new).metadata.get(K_SUPERSEDES) or [])


# ------------------------------------------------------------------ 9. a forked handle


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_cannot_use_the_handle_and_its_close_keeps_the_parents_writer_lock(tmp_path):
    path = str(tmp_path / "fork.db")
    out = run_python("""
        import os, subprocess, sys
        from helpers import WordHashEmbedder
        from vxmem import ForkedHandleError, Vectrix
        path = sys.argv[1]
        db = Vectrix(path, embedder=WordHashEmbedder())
        db.remember("before the fork", session="s", timestamp=1)
        pid = os.fork()
        if pid == 0:  # the child
            try:
                db.count()
                print("child: count worked", flush=True)
            except ForkedHandleError as exc:
                print("child: refused:", exc, flush=True)
            db.close()
            print("child: closed", flush=True)
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status), flush=True)
        second = subprocess.run([sys.executable, "-c",
            "import sys; from vxmem import Vectrix, DatabaseLockedError\\n"
            "try:\\n    Vectrix(sys.argv[1], embedder=lambda t: [[1.0, 0.0]] * len(t))\\n"
            "except DatabaseLockedError:\\n    print('locked')\\nelse:\\n    print('opened')", path],
            capture_output=True, text=True)
        print("second writer:", (second.stdout.strip() + " " + second.stderr.strip()[-300:]).strip(), flush=True)
        db.remember("after the child closed", session="s", timestamp=2)
        print("parent count", db.count(), flush=True)
        db.close()
        again = Vectrix(path, embedder=WordHashEmbedder())
        print("reopened count", again.count(), [r.text for r in again.turns("s", now=3)], flush=True)
        again.close()
    """, path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("child: refused:") and "process" in lines[0]
    assert lines[1:] == ["child: closed", "child exit 0", "second writer: locked", "parent count 2",
                         "reopened count 2 ['before the fork', 'after the child closed']"]


def test_forked_handle_error_is_a_vectrix_error():
    from vxmem import VectrixError

    assert issubclass(ForkedHandleError, VectrixError)


# ------------------------------------------------------------------ 11. the smaller ones


def test_a_token_counter_returning_a_non_number_at_open_is_named_not_called_damage(tmp_path):
    path = tmp_path / "open.db"
    with Vectrix(path, embedder=_embedder()) as db:
        db.add(["some text"])
    with pytest.raises(TypeError, match="token_counter") as info:
        Vectrix(path, embedder=_embedder(), token_counter=lambda text: "many")
    assert "damaged" not in str(info.value)
    with Vectrix(path, embedder=_embedder()) as again:  # and the file is fine
        assert again.count() == 1


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_a_limit_of_ten_to_the_thirty_returns_everything_without_overflow(db, mode):
    db.add(["e_mail me at once", "an e_mail address", "nothing here"])
    for i in range(3):
        db.remember(f"my e_mail number {i}", session="s", timestamp=T0 + i)
    hits = db.search("e_mail", limit=10**30, mode=mode)
    assert len(hits) == (5 if mode == "lexical" else 6)  # lexical: only documents sharing a word
    assert len(db.recall("e_mail", session="s", limit=10**30, mode=mode, now=T0 + 10)) == 3


def test_consolidating_after_a_dry_run_never_summarises_the_same_turns_again(db):
    for i in range(10):
        db.remember(f"turn {i} I like tea", session="s", timestamp=T0 + i)
    calls = []

    def summarize(items):
        calls.append([i["text"] for i in items])
        return [f"a fact from {len(items)} turns"]

    dry = db.consolidate("s", summarize, keep_recent=2, delete=False, now=T0 + 100)
    assert len(dry.facts) == 1 and len(db.turns("s", now=T0 + 100)) == 10
    again = db.consolidate("s", summarize, keep_recent=2, delete=False, now=T0 + 100)
    assert again.facts == [] and len(calls) == 1
    real = db.consolidate("s", summarize, keep_recent=2, now=T0 + 100)  # drops what the dry run summarised
    assert real.facts == [] and real.turns_deleted == 8 and len(calls) == 1
    assert db.count({"_vx_kind": "fact"}) == 1
    assert len(db.turns("s", now=T0 + 100)) == 2
    (fact,) = db.scan({"_vx_kind": "fact"})
    assert len(fact.metadata[K_CONSOLIDATED_FROM]) == 8


def test_a_summarizer_returning_nothing_keeps_its_turns_and_the_report_says_so(db):
    ids = [db.remember(f"turn {i}", session="s", timestamp=T0 + i) for i in range(10)]
    report = db.consolidate("s", lambda items: [], keep_recent=2, batch_turns=4, now=T0 + 100)
    assert report.completed and report.facts == [] and report.turns_deleted == 0
    assert report.turns_kept == ids[:8] and report.turns_consolidated == []
    assert [r.id for r in db.turns("s", now=T0 + 100)] == ids
    later = db.consolidate("s", lambda items: ["now there is a fact"], keep_recent=2, batch_turns=8, now=T0 + 100)
    assert later.turns_consolidated == ids[:8]  # offered again, and consolidated this time


def _much_graded(db, n, seed):
    """A memory graded ``n`` times at random times over 200 days (out of order too), and its
    events as (sign, time)."""
    mid = db.remember("a much-graded memory", session="s", kind="fact", timestamp=T0)
    rng = np.random.default_rng(seed)
    events = []
    for _ in range(n):
        outcome = ("useful", "dead_end", "useful")[int(rng.integers(3))]
        ts = T0 + float(rng.uniform(0, 200)) * DAY
        db.feedback(mid, outcome, timestamp=ts)
        events.append((OUTCOME_SIGN[outcome], ts))
    return mid, events


def test_folded_feedback_scores_exactly_as_the_whole_history_and_stays_bounded(db):
    mid, events = _much_graded(db, 500, seed=3)
    meta = db.get(mid).metadata
    assert len(meta[K_FEEDBACK]) <= 64
    now = T0 + 250 * DAY
    half_life = db.memory.feedback_half_life_days
    exact = sum(s * float(decay((now - ts) / DAY, half_life)) for s, ts in events)
    assert feedback_score(meta, now, half_life) == pytest.approx(exact, rel=1e-12, abs=1e-12)
    got = db.recall("much-graded memory", session="s", now=now)[0].metadata["_vx_scoring"]["feedback"]
    assert got == pytest.approx(exact, rel=1e-12, abs=1e-12)


def test_folded_feedback_reads_as_of_any_earlier_time_exactly(db):
    mid, events = _much_graded(db, 300, seed=5)
    meta = db.get(mid).metadata
    half_life = db.memory.feedback_half_life_days
    assert meta["_vx_feedback_folded"]["ts"] > T0 + 100 * DAY  # the days below read the fold's log
    for day in (0.5, 10, 50, 100, 150, 199, 250):
        now = T0 + day * DAY
        exact = sum(s * float(decay((now - ts) / DAY, half_life)) for s, ts in events if ts <= now)
        assert feedback_score(meta, now, half_life) == pytest.approx(exact, rel=1e-12, abs=1e-12), day
        got = db.recall("much-graded memory", session="s", now=now)[0].metadata["_vx_scoring"]["feedback"]
        assert got == pytest.approx(exact, rel=1e-12, abs=1e-12), day


def test_feedback_folded_meets_the_reserved_key_checks_when_written_back(db):
    mid = db.remember("graded", session="s", kind="fact", timestamp=T0)
    for i in range(100):
        db.feedback(mid, "useful", timestamp=T0 + i)
    meta = db.get(mid).metadata
    (copy,) = db.add(["a copy"], metadata=meta)
    assert db.get(copy).metadata == meta


@pytest.mark.parametrize("scale", [1e20, 1e-25, 1e300, 5e-324])
def test_embeddings_scaled_far_up_or_down_keep_their_direction(scale):
    direction = np.array([3.0, 4.0, 0.0, 0.0])

    def embedder(texts):
        return np.array([direction * scale for _ in texts], dtype=np.float64)

    with Vectrix(None, embedder=embedder) as db:
        (i,) = db.add(["x"])
        with db.engine.locked() as m:
            assert np.allclose(m.vector(m.pos_of_id[i]), [0.6, 0.8, 0.0, 0.0])
        assert db.search("x")[0].score == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("bad, error", [(np.full((1, 4), 1 + 1j), TypeError), (np.array([["a", "b"]]), TypeError),
                                        (np.array([[np.inf, 1.0]]), ValueError),
                                        (np.array([[np.nan, 1.0]]), ValueError)], ids=["complex", "str", "inf", "nan"])
def test_embeddings_that_are_not_finite_real_numbers_are_refused(bad, error):
    with Vectrix(None, embedder=lambda texts: bad) as db:
        with pytest.raises(error, match="embedder"):
            db.add(["x"])
        assert db.count() == 0


DEEP = 200_000


@pytest.mark.parametrize("suffix, body", [
    (".json", "[" * DEEP + "]" * DEEP),
    (".jsonl", '{"format": "vxmem-conversation/1", "name": "deep"}\n' + '{"a": ' * DEEP + "1" + "}" * DEEP + "\n"),
], ids=["json", "jsonl"])
def test_json_nested_200k_deep_is_a_dataset_error_in_the_loader_the_cli_and_the_dashboard(tmp_path, capsys,
                                                                                          suffix, body):
    path = tmp_path / ("deep" + suffix)
    path.write_text(body)
    fmt = None if suffix == ".jsonl" else "locomo"
    with pytest.raises(DatasetError, match="nested too deeply"):
        load(path, format=fmt)
    args = ["replay", str(path)] + (["--format", fmt] if fmt else [])
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vxmem: error: ") and "nested too deeply" in err
    with pytest.raises(DatasetError, match="nested too deeply"):
        load_bytes("deep" + suffix, body.encode(), format=fmt)


def test_an_explicit_turn_can_never_reuse_a_forgotten_turn_number(db):
    first = db.remember("a", session="s", timestamp=T0)
    db.remember("b", session="s", timestamp=T0 + 1)
    db.forget(ids=[first])
    with pytest.raises(ValueError, match="never reused"):
        db.remember("c", session="s", turn=0, timestamp=T0 + 2)
    assert db.get(db.remember("d", session="s", turn=7, timestamp=T0 + 3)).metadata[K_TURN] == 7
    with pytest.raises(ValueError, match="never reused"):
        db.remember("e", session="s", turn=5, timestamp=T0 + 4)
    assert db.get(db.remember("f", session="s", timestamp=T0 + 5)).metadata[K_TURN] == 8
    assert db.get(db.remember("g", session="other", turn=0, timestamp=T0)).metadata[K_TURN] == 0


def test_context_without_a_session_holds_every_sessions_pinned_facts_and_no_recent_turns(db):
    a = db.remember("alice is vegetarian", session="alice", pinned=True, timestamp=T0)
    b = db.remember("bob is allergic to nuts", session="bob", pinned=True, timestamp=T0 + 1)
    db.remember("alice said hello", session="alice", timestamp=T0 + 2)
    block = db.context("dinner", session=None, now=T0 + 10)
    assert [r.id for r in block.pinned] == [a, b] and block.recent == []
    only_alice = db.context("dinner", session="alice", now=T0 + 10)
    assert [r.id for r in only_alice.pinned] == [a]
    assert all(r.metadata[K_SESSION] == "alice" for r in only_alice.recent + only_alice.recalled)


def test_the_smallest_half_lives_decay_to_zero_without_a_numpy_warning():
    with Vectrix(None, embedder=_embedder(), half_life_days=5e-324, feedback_half_life_days=5e-324) as db:
        mid = db.remember("tea in paris", timestamp=T0)
        db.feedback(mid, "useful", timestamp=T0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = db.recall("tea", now=T0 + DAY)
            assert decay([1.0, 0.0], 5e-324).tolist() == [0.0, 1.0]
    assert got.ids == [mid]
    assert got[0].metadata["_vx_scoring"]["recency"] == 0.0
