"""Recall as of a moment: every time-reading call sees the collection as it stood then."""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxmem import ConversationMemory, Vectrix
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import rankings
from vxmem.workbench.synth import generate

from helpers import DAY, T0, WordHashEmbedder

HOUR = 3600.0
MODES = ("dense", "lexical", "hybrid")


@pytest.fixture
def db(make_db, word_embedder):
    return make_db(embedder=word_embedder)


def test_memory_created_after_now_is_not_recalled(db):
    old = db.remember("the user likes tea", session="s", timestamp=T0)
    db.remember("the user likes green tea", session="s", timestamp=T0 + DAY)
    for mode in MODES:
        assert db.recall("tea", session="s", now=T0 + HOUR, mode=mode).ids == [old]


def test_memory_superseded_after_now_is_live_at_now(db):
    old = db.remember("I prefer dark mode", session="s", kind="fact", timestamp=T0)
    new = db.feedback(old, "corrected", correction="actually light mode", timestamp=T0 + DAY)
    assert db.recall("mode", session="s", now=T0 + HOUR).ids == [old]
    assert db.recall("mode", session="s", now=T0 + 2 * DAY).ids == [new]
    assert db.recall("mode", session="s", now=T0 + HOUR, include_superseded=True).ids == [old]


def test_feedback_recorded_after_now_does_not_count(db):
    a = db.remember("report in pdf", session="s", timestamp=T0)
    db.feedback(a, "dead_end", timestamp=T0 + DAY)
    db.feedback(a, "useful", timestamp=T0 + 3 * DAY)
    before = db.recall("pdf report", session="s", now=T0 + HOUR)[0].metadata["_vx_scoring"]["feedback"]
    between = db.recall("pdf report", session="s", now=T0 + 2 * DAY)[0].metadata["_vx_scoring"]["feedback"]
    assert before == 0.0
    assert between == pytest.approx(-(0.5 ** (1 / 30)))


def test_expiry_is_judged_at_now(db):
    a = db.remember("a short lived turn", session="s", timestamp=T0, ttl_days=1)
    assert db.recall("short turn", session="s", now=T0 + HOUR).ids == [a]
    assert db.recall("short turn", session="s", now=T0 + 2 * DAY).ids == []


def test_turns_as_of_leave_out_later_turns(db):
    first = db.remember("hello", session="s", timestamp=T0)
    db.remember("later", session="s", timestamp=T0 + DAY)
    assert [r.id for r in db.turns("s", now=T0 + HOUR)] == [first]
    assert len(db.turns("s", now=T0 + 2 * DAY)) == 2


def test_context_as_of_sees_the_pinned_facts_and_turns_of_that_moment(db):
    pin = db.remember("The user is vegetarian", session="s", pinned=True, timestamp=T0)
    turn = db.remember("what should I cook", session="s", timestamp=T0 + HOUR)
    fix = db.feedback(pin, "corrected", correction="The user is vegan", timestamp=T0 + DAY)
    late = db.remember("anything new", session="s", timestamp=T0 + DAY)
    then = db.context("cook", session="s", now=T0 + 2 * HOUR)
    assert [r.id for r in then.pinned] == [pin] and [r.id for r in then.recent] == [turn]
    later = db.context("cook", session="s", now=T0 + 2 * DAY)
    assert [r.id for r in later.pinned] == [fix] and [r.id for r in later.recent] == [turn, late]


def test_history_as_of_shows_the_chain_as_it_stood(db):
    a = db.remember("lives in Paris", session="s", kind="fact", timestamp=T0)
    b = db.feedback(a, "corrected", correction="lives in London", timestamp=T0 + DAY)
    c = db.feedback(b, "corrected", correction="lives in Rome", timestamp=T0 + 2 * DAY)
    then = db.history(a, now=T0 + 1.5 * DAY)
    assert [e.id for e in then] == [a, b]
    assert not then[0].live and then[0].superseded_by == b
    assert then[1].live and then[1].superseded_by is None and then[1].superseded_at is None
    assert [(e.id, e.live) for e in db.history(a, now=T0 + HOUR)] == [(a, True)]
    assert db.history(c, now=T0 + HOUR) == []  # c did not exist yet
    now = db.history(a)
    assert [e.live for e in now] == [False, False, True]


def test_recall_at_the_present_is_unchanged_by_the_as_of_checks(db):
    ids = [db.remember(f"note {i} about tea", session="s", timestamp=T0 + i * HOUR) for i in range(5)]
    db.feedback(ids[1], "useful", timestamp=T0 + 5 * HOUR)
    m = db.engine.mirror
    assert not m.is_past(T0 + 5 * HOUR)  # the moment of the last write: no as-of work to do
    assert m.is_past(T0 + 4.5 * HOUR)
    assert db.recall("tea", session="s", now=T0 + 6 * HOUR).ids == db.recall("tea", session="s").ids


# ---------------------------------------------------------------- the property

WORD = st.sampled_from("tea coffee paris london dark light mode pdf csv report user prefers likes".split())
TEXT = st.lists(WORD, min_size=1, max_size=8).map(" ".join)
SESSION = st.sampled_from(["a", "b"])
EVENT = st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(["turn", "fact", "pinned"]), SESSION, TEXT),
    st.tuples(st.just("correct"), st.integers(0, 10**6), st.just(None), TEXT),
    st.tuples(st.just("feedback"), st.integers(0, 10**6), st.sampled_from(["useful", "dead_end", "corrected"]),
              st.just(None)),
)
STREAM = st.lists(st.tuples(EVENT, st.integers(1, 72)), min_size=1, max_size=25)


def _apply(db, stream):
    """Play ``stream`` (events with gaps in hours) into ``db``; returns every event's time and
    a map of the memory ids to their order of creation (the same in every database)."""
    ids, times, t = [], [], T0
    for (op, a, b, text), gap in stream:
        t += gap * HOUR
        times.append(t)
        if op == "remember":
            ids.append(db.remember(text, session=b, kind=a, timestamp=t))
        elif ids and op == "correct":
            ids.append(db.feedback(ids[a % len(ids)], "corrected", correction=text, timestamp=t))
        elif ids:
            db.feedback(ids[a % len(ids)], b, timestamp=t)
    return times, {m: i for i, m in enumerate(ids)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=STREAM, cut=st.integers(0, 10**6), between=st.floats(0, 0.99), query=TEXT,
       session=st.none() | SESSION, limit=st.integers(1, 8))
def test_recall_as_of_equals_recall_on_a_database_that_only_saw_the_past(stream, cut, between, query, session,
                                                                        limit):
    emb = WordHashEmbedder()
    full = Vectrix(None, embedder=emb)
    times, full_ids = _apply(full, stream)
    k = cut % len(times)
    past = Vectrix(None, embedder=emb)
    _, past_ids = _apply(past, stream[: k + 1])
    gap = times[k + 1] - times[k] if k + 1 < len(times) else HOUR
    now = times[k] + between * gap  # at an event, or between it and the next

    def same(got, want):
        assert [full_ids[i] for i in got] == [past_ids[i] for i in want]

    for mode in MODES:
        got = full.recall(query, session=session, limit=limit, mode=mode, now=now)
        want = past.recall(query, session=session, limit=limit, mode=mode, now=now)
        same(got.ids, want.ids)
        np.testing.assert_allclose([r.score for r in got], [r.score for r in want], rtol=1e-9, atol=1e-12)
    same(full.context(query, session=session, now=now).ids, past.context(query, session=session, now=now).ids)
    if session is not None:
        same([r.id for r in full.turns(session, now=now)], [r.id for r in past.turns(session, now=now)])


# ---------------------------------------------------------------- the workbench


POINTS = [{}, {"half_life_days": 1.0, "recency_weight": 1.0, "feedback_weight": 0.5}]


@pytest.mark.parametrize("mode", MODES)
def test_a_probe_before_a_later_correction_ranks_as_recall_as_of_its_moment(hashing_embedder, mode):
    conv = generate("preference_drift", users=2)
    probes = [e for e in conv.events if e.type == "probe"]
    corrections = [e.time for e in conv.events if e.type == "feedback" and e.correction]
    assert any(t > p.time for p in probes for t in corrections), "a correction must follow a probe"
    # One more probe after everything: there the memory has seen the whole conversation.
    last = dataclasses.replace(probes[-1], time=conv.events[-1].time + HOUR, label="after everything")
    conv = dataclasses.replace(conv, events=[*conv.events, last])

    def as_of_every_probe(mem, ev, now):
        if ev is not last:
            return None
        return [[ConversationMemory(mem.db, **pt).recall(p.query, session=p.session, limit=p.limit or 10,
                                                           mode=mode, now=p.time).ids for p in probes]
                for pt in POINTS]

    rep = replay(conv, {"mode": mode}, embedder=hashing_embedder, on_probe=as_of_every_probe)
    expected = rep.extras[-1]
    assert [p["recalled_ids"] for p in rep.probes[:-1]] == expected[0]  # the live recall, then and there
    for pt, want in zip(POINTS, expected):
        assert rankings(rep, **pt)[:-1] == want  # the sweep's re-ranking of the cached pools


def test_bm25_statistics_as_of_a_moment_are_the_same_counted_directly_or_by_binary_search(word_embedder):
    from vxmem.core.keys import NO_KIND
    from vxmem.store.lexical.bm25 import BM25AsOf

    db = Vectrix(None, embedder=word_embedder)
    rng = np.random.default_rng(3)
    words = "tea coffee paris london dark light mode pdf".split()
    for _ in range(300):
        db.remember(" ".join(rng.choice(words, int(rng.integers(1, 7)))), session="s",
                    timestamp=T0 + rng.uniform(0, 90) * DAY)
    db.add(["a plain document with no memory keys"])
    ids = [r.id for r in db.turns("s")]
    db.forget(ids=ids[:40])  # some dead positions too
    with db.engine.locked() as m:
        doc_len = rng.integers(1, 30, m.n).astype(np.float64)
        pos = np.flatnonzero(rng.random(m.n) < 0.3)
        pos = np.where(rng.random(pos.size) < 0.1, -1, pos)  # a deleted posting reads -1
        moments = T0 + rng.uniform(-5, 95, 50) * DAY
        direct = [(BM25AsOf(m, doc_len, 0).stats(t), BM25AsOf(m, doc_len, 0).df("w", pos, t)) for t in moments]
        searched = BM25AsOf(m, doc_len, 0)
        searched.stats(moments[0])  # the first moment: counted directly; the rest by binary search
        for t, (stats, df) in zip(moments, direct):
            assert searched.stats(t) == stats
            assert searched.df("w", pos, t) == df
            existed = m.alive[: m.n] & ((m.kind[: m.n] == NO_KIND) | (m.ts[: m.n] <= t))  # a plain doc always
            assert stats[0] == int(np.count_nonzero(existed))
