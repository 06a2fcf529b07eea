"""Recency refreshed on access: ``recency_from="accessed"`` (LangChain's time-weighted retriever)."""

import sqlite3

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxmem import ConversationMemory, Vectrix
from vxmem.store.sqlite import database
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.policies import POLICIES
from vxmem.workbench.sweep.run import rankings, sweep
from vxmem.workbench.synth import generate

from helpers import DAY, T0, WordHashEmbedder

HOUR = 3600.0
MODES = ("dense", "lexical", "hybrid")


def _access_rows(db):
    return db.engine.database.conn.execute("SELECT doc, at FROM vx_access ORDER BY doc, at").fetchall()


def _two_twins(db):
    """Two equally relevant memories, both stored at T0."""
    a = db.remember("my cat is called Miso", session="s", timestamp=T0)
    b = db.remember("my cat is called Tofu", session="s", timestamp=T0)
    return a, b


def test_a_recalled_memory_ages_from_its_last_recall(word_embedder):
    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    a, b = _two_twins(db)
    db.recall("Miso", session="s", limit=1, now=T0 + 30 * DAY)  # returns a only
    got = db.recall("my cat is called", session="s", now=T0 + 31 * DAY, limit=2)
    ages = {r.id: r.metadata["_vx_scoring"]["age_days"] for r in got}
    assert ages == {a: pytest.approx(1.0), b: pytest.approx(31.0)}
    assert got.ids == [a, b]  # equally relevant: the one in use is the fresher
    assert {r.metadata["_vx_scoring"]["recency_from"] for r in got} == {"accessed"}
    # the same collection ranked from creation: a tie, which goes to the newer (the later stored)
    created = db.recall("my cat is called", session="s", now=T0 + 31 * DAY, limit=2, recency_from="created")
    assert [r.metadata["_vx_scoring"]["age_days"] for r in created] == [pytest.approx(31.0)] * 2


def test_an_access_counts_from_the_moment_after_it(word_embedder):
    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    a, _ = _two_twins(db)
    t = T0 + 3 * DAY
    first = db.recall("Miso", session="s", limit=1, now=t)
    again = db.recall("Miso", session="s", limit=1, now=t)  # the same moment: the first call's access unseen
    assert first.ids == again.ids == [a]
    assert again[0].metadata["_vx_scoring"]["age_days"] == pytest.approx(3.0)
    later = db.recall("Miso", session="s", limit=1, now=t + HOUR)
    assert later[0].metadata["_vx_scoring"]["age_days"] == pytest.approx(1 / 24)


def test_the_access_log_of_probes_at_one_moment_matches_the_memory():
    from vxmem.ranking.pool import AccessLog

    log = AccessLog()
    log.returned(["a"], 10.0)
    assert log.seen(["a", "b"], 10.0).tolist() == [-np.inf, -np.inf]
    log.returned(["a"], 10.0)
    log.returned(["a"], 20.0)
    assert log.seen(["a"], 20.0).tolist() == [10.0]
    assert log.seen(["a"], 21.0).tolist() == [20.0]


def test_the_default_ages_from_creation_and_records_nothing(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    a, _ = _two_twins(db)
    assert db.memory.recency_from == "created"
    db.recall("Miso", session="s", now=T0 + DAY)
    db.context("Miso", session="s", now=T0 + DAY)
    assert _access_rows(db) == []
    assert db.recall("Miso", session="s", now=T0 + 2 * DAY)[0].metadata["_vx_scoring"]["age_days"] == \
        pytest.approx(2.0)


def test_a_memory_made_with_created_can_rank_by_the_recorded_accesses_without_adding_any(word_embedder):
    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    a, b = _two_twins(db)
    db.recall("Miso", session="s", limit=1, now=T0 + 10 * DAY)
    look = ConversationMemory(db)  # recency_from="created": reads, never records
    before = _access_rows(db)
    got = look.recall("my cat", session="s", now=T0 + 12 * DAY, recency_from="accessed")
    assert got.ids[0] == a and got[0].metadata["_vx_scoring"]["age_days"] == pytest.approx(2.0)
    assert _access_rows(db) == before


def test_accesses_are_durable_and_read_only_handles_read_them_but_record_none(tmp_path, word_embedder):
    path = str(tmp_path / "m.vxdb")
    with Vectrix(path, embedder=word_embedder, recency_from="accessed") as db:
        a, b = _two_twins(db)
        db.recall("Miso", session="s", limit=1, now=T0 + 5 * DAY)
    with Vectrix(path, embedder=word_embedder, recency_from="accessed", read_only=True) as ro:
        got = ro.recall("my cat is called", session="s", now=T0 + 6 * DAY, limit=2)
        assert [r.metadata["_vx_scoring"]["age_days"] for r in got] == [pytest.approx(1.0), pytest.approx(6.0)]
    with Vectrix(path, embedder=word_embedder, recency_from="accessed") as db:  # reopened: still there
        assert len(_access_rows(db)) == 1
        got = db.recall("my cat is called", session="s", now=T0 + 6 * DAY, limit=2)
        assert got.ids == [a, b]


def test_as_of_recall_reads_only_the_accesses_made_by_then(word_embedder):
    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    a, b = _two_twins(db)
    db.recall("Miso", session="s", limit=1, now=T0 + 20 * DAY)
    look = ConversationMemory(db, recency_from="created")
    then = look.recall("my cat is called", session="s", now=T0 + 10 * DAY, recency_from="accessed")
    assert [r.metadata["_vx_scoring"]["age_days"] for r in then] == [pytest.approx(10.0)] * 2
    later = look.recall("my cat is called", session="s", now=T0 + 21 * DAY, recency_from="accessed")
    assert later.ids[0] == a and later[0].metadata["_vx_scoring"]["age_days"] == pytest.approx(1.0)


def test_context_records_the_recalled_memories_that_made_the_block_only(word_embedder):
    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    pin = db.remember("the user is vegetarian", session="s", pinned=True, timestamp=T0)
    old = db.remember("we talked about the cat Miso", session="s", timestamp=T0)
    for i in range(3):
        db.remember(f"filler turn number {i}", session="s", timestamp=T0 + (i + 1) * HOUR)
    block = db.context("cat Miso", session="s", recent_turns=2, now=T0 + DAY)
    assert old in [r.id for r in block.recalled] and pin in [r.id for r in block.pinned]
    recorded = {db.engine.mirror.ids[db.engine.mirror.pos_of_rowid[doc]] for doc, _ in _access_rows(db)}
    assert recorded == {r.id for r in block.recalled}
    assert not recorded & {r.id for r in block.pinned + block.recent}


def test_forgetting_a_memory_drops_its_accesses(word_embedder):
    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    a, b = _two_twins(db)
    db.remember("another session's memory about cats", session="t", timestamp=T0)
    db.recall("cat", now=T0 + DAY)
    assert {doc for doc, _ in _access_rows(db)} == {1, 2, 3}
    db.forget(session="s")
    assert {doc for doc, _ in _access_rows(db)} == {3}


def test_bad_recency_from_is_refused_and_nothing_is_written(word_embedder):
    with pytest.raises(ValueError, match="recency_from"):
        Vectrix(None, embedder=word_embedder, recency_from="touched")
    db = Vectrix(None, embedder=word_embedder, recency_from="accessed")
    _two_twins(db)
    with pytest.raises(TypeError, match="recency_from"):
        db.recall("cat", recency_from=1)
    with pytest.raises(ValueError, match="recency_from"):
        db.context("cat", session="s", recency_from="never")
    assert _access_rows(db) == []


def test_a_version_3_file_gains_the_access_log_on_a_writable_open(tmp_path, word_embedder):
    path = str(tmp_path / "v3.vxdb")
    with Vectrix(path, embedder=word_embedder) as db:
        a, _ = _two_twins(db)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE vx_access")
    conn.execute("UPDATE vx_meta SET value = '3' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Vectrix(path, embedder=word_embedder, read_only=True, recency_from="accessed") as ro:  # read as it is
        assert ro.recall("Miso", session="s", now=T0 + DAY).ids[0] == a
    with Vectrix(path, embedder=word_embedder, recency_from="accessed") as db:
        conn = db.engine.database.conn
        version = conn.execute("SELECT value FROM vx_meta WHERE key = 'schema_version'").fetchone()[0]
        assert version == str(database.SCHEMA_VERSION)
        db.recall("Miso", session="s", limit=1, now=T0 + DAY)
        assert len(_access_rows(db)) == 1


# ---------------------------------------------------------------- as of, with accesses as events

WORD = st.sampled_from("tea coffee paris london dark light mode pdf csv report user prefers likes".split())
TEXT = st.lists(WORD, min_size=1, max_size=6).map(" ".join)
SESSION = st.sampled_from(["a", "b"])
EVENT = st.one_of(
    st.tuples(st.just("remember"), SESSION, TEXT),
    st.tuples(st.just("recall"), st.none() | SESSION, TEXT),
)
STREAM = st.lists(st.tuples(EVENT, st.integers(1, 72)), min_size=1, max_size=20)


def _apply(db, stream):
    ids, times, t = [], [], T0
    for (op, session, text), gap in stream:
        t += gap * HOUR
        times.append(t)
        if op == "remember":
            ids.append(db.remember(text, session=session, timestamp=t))
        else:
            db.recall(text, session=session, limit=3, now=t)
    return times, {m: i for i, m in enumerate(ids)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=STREAM, cut=st.integers(0, 10**6), between=st.floats(0, 0.99), query=TEXT,
       session=st.none() | SESSION)
def test_recall_as_of_with_accesses_equals_recall_on_a_database_that_only_saw_the_past(stream, cut, between,
                                                                                      query, session):
    emb = WordHashEmbedder()
    full = Vectrix(None, embedder=emb, recency_from="accessed", recency_weight=1.0, half_life_days=1.0)
    times, full_ids = _apply(full, stream)
    k = cut % len(times)
    past = Vectrix(None, embedder=emb, recency_from="accessed", recency_weight=1.0, half_life_days=1.0)
    _, past_ids = _apply(past, stream[: k + 1])
    gap = times[k + 1] - times[k] if k + 1 < len(times) else HOUR
    now = times[k] + between * gap
    for mode in MODES:
        # a look that records nothing, so the full database's history stays what it was
        got = ConversationMemory(full, recency_weight=1.0, half_life_days=1.0).recall(
            query, session=session, mode=mode, now=now, recency_from="accessed")
        want = ConversationMemory(past, recency_weight=1.0, half_life_days=1.0).recall(
            query, session=session, mode=mode, now=now, recency_from="accessed")
        assert [full_ids[i] for i in got.ids] == [past_ids[i] for i in want.ids]
        np.testing.assert_allclose([r.score for r in got], [r.score for r in want], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- the workbench


@pytest.fixture(scope="module")
def drift():
    return generate("preference_drift", users=2)


def test_a_replay_that_ages_from_access_sweeps_exactly_as_its_live_recall(drift, hashing_embedder):
    rep = replay(drift, {"recency_from": "accessed", "recency_weight": 1.0, "half_life_days": 1.0},
                 embedder=hashing_embedder)
    live = [p["recalled_ids"] for p in rep.probes]
    assert rep.recency_for("blend") == "accessed"
    assert rankings(rep) == live  # the sweep engine, probe after probe
    assert rep.rank() == live  # the one-pool-at-a-time path
    res = sweep(rep, {"half_life_days": [1.0, 7.0], "recency_weight": [1.0, 0.25]})
    at = res.per_probe.query("half_life_days == 1.0 and recency_weight == 1.0")
    frame = rep.to_frames()["probes"]
    for m in ("hit", "recall", "rr", "ndcg", "stale_leak"):
        np.testing.assert_allclose(at[m].to_numpy(), frame[m].to_numpy(), equal_nan=True)
    # ranked from creation instead, the same pools rank differently somewhere
    assert rankings(rep, recency_from="created") != live


@pytest.mark.parametrize("policy", ["langchain", "generative_agents"])
def test_langchain_and_generative_agents_age_from_their_own_accesses(drift, hashing_embedder, policy):
    assert POLICIES[policy].recency_from == "accessed"
    rep = replay(drift, embedder=hashing_embedder, policy=policy)
    live = [p["ranked_ids"] for p in rep.probes]  # the replay ranked each probe with the policy, in order
    assert rep.rank(policy) == live
    assert rankings(rep, policy) == live
    assert rankings(rep, policy, recency_from="created") == rep.rank(policy, recency_from="created")


def test_langchain_ages_count_from_the_probe_that_last_returned_the_memory(hashing_embedder):
    from vxmem.workbench.datasets import Conversation, Event

    events = [
        Event(type="turn", time=T0, session="s", text="my cat is called Miso", label="miso"),
        Event(type="turn", time=T0, session="s", text="my cat is called Tofu", label="tofu"),
        Event(type="probe", time=T0 + 10 * DAY, session="s", query="Miso", limit=1, relevant=["miso"]),
        Event(type="probe", time=T0 + 10 * DAY + HOUR, session="s", query="is my cat called Tofu", limit=1,
              relevant=["tofu"]),
    ]
    rep = replay(Conversation(name="twins", events=events), embedder=hashing_embedder, policy="langchain",
                 settings={"mode": "dense", "rerank": False})
    miso = rep.probes[0]["ranked_ids"]
    tofu = rep.rank("langchain", recency_from="created")[1]
    assert miso != tofu  # by relevance (and from creation, both 241 hours old) Tofu wins the second probe
    # returned an hour before, Miso gains (1 - 0.01) ** 1 against Tofu's ** 241: more than the cosine gap
    assert rep.probes[1]["ranked_ids"] == miso == rankings(rep, "langchain")[1]


def test_a_narrowed_replay_still_sees_the_accesses_of_the_probes_left_out(drift, hashing_embedder):
    rep = replay(drift, embedder=hashing_embedder, policy="langchain")
    keep = [i % 2 == 1 for i in range(rep.n_probes)]
    part = rep.select(keep)
    whole = rankings(rep, "langchain")
    assert rankings(part, "langchain") == [r for r, k in zip(whole, keep) if k]
    assert part.rank("langchain") == [r for r, k in zip(rep.rank("langchain"), keep) if k]
    res = sweep(part, {"decay_rate": [0.01]}, "langchain")
    full = sweep(rep, {"decay_rate": [0.01]}, "langchain").per_probe
    np.testing.assert_allclose(res.per_probe["ndcg"].to_numpy(), full["ndcg"].to_numpy()[np.array(keep)])


def test_probes_at_one_moment_sweep_as_the_live_recall_ranks_them(hashing_embedder):
    from vxmem.workbench.datasets import Conversation, Event

    t = T0 + 10 * DAY
    events = [
        Event(type="turn", time=T0, session="s", text="my cat is called Miso", label="miso"),
        Event(type="turn", time=T0, session="s", text="my cat is called Tofu", label="tofu"),
        Event(type="turn", time=T0, session="s", text="my cat is called Pixel", label="pixel"),
        Event(type="probe", time=t, session="s", query="Miso", limit=1, relevant=["miso"], label="p1"),
        Event(type="probe", time=t, session="s", query="is my cat called Tofu", limit=1, relevant=["tofu"],
              label="p2"),
        Event(type="probe", time=t + HOUR, session="s", query="is my cat called Pixel", limit=1,
              relevant=["pixel"], label="p3"),
    ]
    settings = {"mode": "dense", "rerank": False, "recency_from": "accessed", "recency_weight": 5.0,
                "half_life_days": 0.5}
    rep = replay(Conversation(name="moment", events=events), settings, embedder=hashing_embedder)
    label = {m["id"]: m["labels"][0] for m in rep.memories}
    live = [p["recalled_ids"] for p in rep.probes]
    assert [label[i] for ids in live for i in ids][:2] == ["miso", "tofu"]  # p2 does not see p1's access yet
    assert label[live[2][0]] != "pixel"  # an hour later both accesses are seen: recency (weight 5) beats relevance
    assert rankings(rep) == live
    assert rep.rank() == live


def test_why_recalled_of_a_replay_aging_from_access_returns_what_its_recall_returned(drift, hashing_embedder):
    from vxmem.workbench.analysis.why import why_recalled

    rep = replay(drift, {"recency_from": "accessed", "recency_weight": 1.0, "half_life_days": 1.0, "limit": 4},
                 embedder=hashing_embedder)
    point = {"half_life_days": 3.0, "recency_weight": 2.0, "limit": 3}
    other = rankings(rep, **point)
    for i, probe in enumerate(rep.probes):
        f = why_recalled(rep, i, conversation=drift)
        assert f[f["reason"] == "returned"].sort_values("rank")["id"].tolist() == probe["recalled_ids"], i
        g = why_recalled(rep, i, point, conversation=drift)
        assert g[g["reason"] == "returned"].sort_values("rank")["id"].tolist() == other[i], i


def test_the_pools_frame_of_a_replay_aging_from_access_ranks_as_its_recall(drift, hashing_embedder):
    rep = replay(drift, {"recency_from": "accessed", "recency_weight": 1.0, "half_life_days": 1.0, "limit": 4},
                 embedder=hashing_embedder)
    pools = rep.to_frames()["pools"]
    for i, probe in enumerate(rep.probes):
        top = pools[pools["probe"] == i].sort_values("rank")["id"].tolist()[: len(probe["recalled_ids"])]
        assert top == probe["recalled_ids"], i


def test_a_full_disk_leaves_the_accesses_out_with_a_warning_and_the_recall_answers(tmp_path, word_embedder):
    with Vectrix(tmp_path / "full.vxdb", embedder=word_embedder, recency_from="accessed") as db:
        a, b = _two_twins(db)
        conn = db.engine.database.conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite now reports SQLITE_FULL on growth
        before = _access_rows(db)
        with pytest.warns(RuntimeWarning, match="could not record"):
            for i in range(2000):  # until the access log needs a page of its own
                got = db.recall("my cat is called", session="s", limit=2, now=T0 + (i + 1) * HOUR)
                assert set(got.ids) == {a, b}
        conn.execute("PRAGMA max_page_count = 1073741823")
        rows = _access_rows(db)
        assert len(rows) >= len(before)
        assert len(rows) % 2 == 0  # a recall's accesses are recorded whole or not at all
