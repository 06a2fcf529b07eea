"""Scopes beyond one session key: filter= on the caller's metadata and a user across sessions."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxmem import Vectrix
from vxmem.memory import K_SESSION, K_USER

from helpers import DAY, T0

MODES = ("dense", "lexical", "hybrid")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORD = st.sampled_from("tea coffee paris london dark light mode pdf csv report".split())
TEXT = st.lists(WORD, min_size=1, max_size=5).map(" ".join)
SESSION = st.sampled_from(["s1", "s2", "s3", None])
USER = st.sampled_from(["ann", "bob", "Ann", None])
TOPIC = st.sampled_from(["billing", "travel", 1, 1.0, 0, True, False, "1", None])  # JSON-equal, or not
STORED_TOPIC = TOPIC | st.sampled_from([[1], {"a": 1}, "absent"])  # "absent": no topic key at all
MEMORY = st.tuples(st.sampled_from(["turn", "fact", "pinned"]), SESSION, USER, STORED_TOPIC, TEXT)
OP = st.one_of(MEMORY, st.tuples(st.just("correct"), st.integers(0, 10**6), TEXT))
OPS = st.lists(OP, min_size=1, max_size=25)


def _build(ops, embedder, exact_threshold=20_000, joined=False):
    """A memory of ``ops``; ``joined``: with each user's session stored as a session of no user,
    named after both (``"ann|s1"``): what a user's session must rank as."""
    db = Vectrix(None, embedder=embedder, exact_threshold=exact_threshold)
    ids, ts = [], T0
    for op in ops:
        ts += 60
        if op[0] == "correct":
            if ids:
                ids.append(db.feedback(ids[op[1] % len(ids)], "corrected", correction=op[2], timestamp=ts))
            continue
        kind, session, user, topic, text = op
        meta = {} if topic == "absent" else {"topic": topic}
        if joined:
            session, user = f"{user}|{session}", None
        ids.append(db.remember(text, session=session, kind=None if kind == "turn" else kind, user=user,
                               metadata=meta, timestamp=ts))
    return db


def _others(db, keep):
    """Every memory's id for which ``keep(metadata)`` is False: the exclude_ids oracle."""
    return [r.id for r in db.scan() if not keep(r.metadata)]


@SETTINGS
@given(ops=OPS, query=TEXT, topic=TOPIC | st.lists(TOPIC, min_size=1, max_size=2),
       session=st.none() | SESSION, limit=st.integers(1, 8))
def test_recall_with_a_filter_is_the_true_top_among_the_matching_memories(word_embedder, ops, query, topic,
                                                                          session, limit):
    db = _build(ops, word_embedder, exact_threshold=5)  # past the threshold the HNSW path runs too
    wanted = topic if isinstance(topic, list) else [topic]

    def match(meta):
        return any(_same(meta.get("topic"), v) for v in wanted)

    for mode in MODES:
        got = db.recall(query, session=session, limit=limit, mode=mode, now=T0 + DAY, filter={"topic": topic})
        oracle = db.recall(query, session=session, limit=limit, mode=mode, now=T0 + DAY,
                           exclude_ids=_others(db, match))
        assert got.ids == oracle.ids, mode
        assert all(match(r.metadata) for r in got)


def _same(a, b):
    """JSON equality, as filters compare: True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


@SETTINGS
@given(ops=OPS, query=TEXT, user=USER.filter(lambda u: u is not None), session=st.none() | SESSION,
       limit=st.integers(1, 10))
def test_recall_for_a_user_returns_only_that_users_memories_and_the_true_top_of_them(word_embedder, ops, query,
                                                                                   user, session, limit):
    db = _build(ops, word_embedder)

    def mine(meta):
        return meta.get(K_USER) == user and (session is None or meta[K_SESSION] == session)

    joined = _build(ops, word_embedder, joined=True) if session is not None else None
    for mode in MODES:
        got = db.recall(query, session=session, user=user, limit=limit, mode=mode, now=T0 + DAY)
        assert all(mine(r.metadata) for r in got), mode
        if joined is None:  # across the user's sessions: the collection's top, others' left out
            oracle = db.recall(query, limit=limit, mode=mode, now=T0 + DAY, exclude_ids=_others(db, mine))
            assert got.ids == oracle.ids, mode
        else:  # a user's session ranks as a session of its own
            oracle = joined.recall(query, session=f"{user}|{session}", limit=limit, mode=mode, now=T0 + DAY)
            assert [(r.text, round(r.score, 9)) for r in got] == [(r.text, round(r.score, 9)) for r in oracle], mode


@SETTINGS
@given(ops=OPS, query=TEXT, user=USER, session=st.sampled_from(["s1", "s2", "s3"]), budget=st.integers(20, 400))
def test_context_for_a_session_and_a_user_holds_only_their_memories(word_embedder, ops, query, user, session,
                                                                   budget):
    db = _build(ops, word_embedder)
    for mode in MODES:
        block = db.context(query, session=session, user=user, token_budget=budget, mode=mode, now=T0 + DAY)
        for r in block.pinned:
            assert r.metadata[K_SESSION] == session or (user is not None and r.metadata.get(K_USER) == user)
        assert all(r.metadata[K_SESSION] == session for r in block.recent)
        for r in block.recalled:
            if user is None:
                assert r.metadata[K_SESSION] == session
            else:
                assert r.metadata.get(K_USER) == user


@SETTINGS
@given(ops=OPS, user=USER.filter(lambda u: u is not None), kinds=st.sampled_from([("turn",), ("fact", "pinned")]))
def test_forget_of_one_user_never_deletes_another_users_memories(word_embedder, ops, user, kinds):
    db = _build(ops, word_embedder)
    before = {r.id: r.metadata for r in db.scan()}
    gone = db.forget(user=user, kinds=kinds)
    after = {r.id for r in db.scan()}
    deleted = set(before) - after
    assert len(deleted) == gone
    assert all(before[i].get(K_USER) == user and before[i]["_vx_kind"] in kinds for i in deleted)
    assert not any(before[i].get(K_USER) == user and before[i]["_vx_kind"] in kinds for i in after)


def test_a_users_pinned_fact_joins_the_context_of_every_session_of_theirs(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    fact = db.remember("Ann is allergic to nuts", user="ann", pinned=True, timestamp=T0)
    db.remember("Bob likes nuts", user="bob", pinned=True, timestamp=T0)
    here = db.remember("the weekly menu please", session="s2", user="ann", timestamp=T0 + DAY)
    block = db.context("menu", session="s2", user="ann", now=T0 + 2 * DAY)
    assert [r.id for r in block.pinned] == [fact]
    assert [r.id for r in block.recent] == [here]
    assert db.context("menu", session="s2", now=T0 + 2 * DAY).pinned == []  # without the user: the session's only


def test_recall_for_a_user_spans_their_sessions(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    a = db.remember("I fly to paris in may", session="s1", user="ann", timestamp=T0)
    b = db.remember("paris hotel booked", session="s2", user="ann", timestamp=T0 + 1)
    db.remember("paris for me too", session="s3", user="bob", timestamp=T0 + 2)
    assert set(db.recall("paris", user="ann", now=T0 + DAY).ids) == {a, b}
    assert db.recall("paris", user="ann", session="s2", now=T0 + DAY).ids == [b]
    assert db.recall("paris", user="nobody", now=T0 + DAY).ids == []


def test_a_correction_and_a_consolidated_fact_belong_to_the_user(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    old = db.remember("I prefer dark mode", session="s", user="ann", kind="fact", timestamp=T0)
    new = db.feedback(old, "corrected", correction="light mode now", timestamp=T0 + 1)
    assert db.get(new).metadata[K_USER] == "ann"
    for i in range(3):
        db.remember(f"turn {i} about tea", session="s", user="ann", timestamp=T0 + 10 + i)
    report = db.consolidate("s", lambda turns: ["Ann drinks tea"], keep_recent=0, now=T0 + DAY, user="ann")
    assert [db.get(f).metadata[K_USER] for f in report.facts] == ["ann"]


def test_a_filter_follows_writes_made_after_it_was_first_used(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    a = db.remember("tea at noon", session="s", metadata={"topic": "food"}, timestamp=T0)
    b = db.remember("tea in paris", session="s", metadata={"topic": "travel"}, timestamp=T0 + 1)
    assert db.recall("tea", filter={"topic": "food"}, now=T0 + DAY).ids == [a]
    db.update_metadata(b, {"topic": "food"})
    c = db.remember("tea with milk", session="s", metadata={"topic": "food"}, timestamp=T0 + 2)
    assert set(db.recall("tea", filter={"topic": "food"}, now=T0 + DAY).ids) == {a, b, c}
    db.delete(a)
    db.update_metadata(c, {"topic": True})
    assert db.recall("tea", filter={"topic": "food"}, now=T0 + DAY).ids == [b]
    assert db.recall("tea", filter={"topic": 1}, now=T0 + DAY).ids == []  # True is not 1
    assert db.recall("tea", filter={"topic": True}, now=T0 + DAY).ids == [c]


def test_turns_and_forget_take_a_filter(word_embedder):
    db = Vectrix(None, embedder=word_embedder)
    a = db.remember("refund please", session="s", metadata={"topic": "billing"}, timestamp=T0)
    b = db.remember("flight times", session="s", metadata={"topic": "travel"}, timestamp=T0 + 1)
    assert [r.id for r in db.turns("s", filter={"topic": "billing"}, now=T0 + DAY)] == [a]
    assert db.forget(session="s", filter={"topic": ["billing"]}) == 1
    assert [r.id for r in db.turns("s", now=T0 + DAY)] == [b]
    block = db.context("flight", session="s", filter={"topic": "billing"}, now=T0 + DAY)
    assert block.ids == []


@pytest.mark.parametrize("bad, error", [
    ({"_vx_session": "s"}, ValueError), ({"topic": {"nested": 1}}, TypeError), (["topic"], TypeError),
])
def test_a_bad_filter_is_refused_with_a_clear_error(word_embedder, bad, error):
    db = Vectrix(None, embedder=word_embedder)
    db.remember("hello", session="s", timestamp=T0)
    with pytest.raises(error, match="filter"):
        db.recall("hello", filter=bad)
    with pytest.raises(error, match="filter"):
        db.forget(filter=bad)
    with pytest.raises(error, match="filter"):
        db.context("hello", session="s", filter=bad)
    assert len(db) == 1


@pytest.mark.parametrize("bad, error", [(3, TypeError), ("", ValueError), ("  ", ValueError)])
def test_a_bad_user_is_refused_and_nothing_is_written(word_embedder, bad, error):
    db = Vectrix(None, embedder=word_embedder)
    with pytest.raises(error, match="user"):
        db.remember("hello", user=bad)
    with pytest.raises(error, match="user"):
        db.recall("hello", user=bad)
    assert len(db) == 0
