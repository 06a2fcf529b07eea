"""Budget and ordering invariants, as properties over arbitrary memories and moments."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vxmem import Vectrix, count_tokens
from vxmem.memory import K_EXPIRES, K_SESSION, K_SUPERSEDED_AT, K_SUPERSEDED_BY, K_TS

from helpers import DAY

PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORD = st.sampled_from("tea coffee paris london dark light mode pdf csv report the a user prefers likes".split())
TEXT = st.lists(WORD, min_size=1, max_size=30).map(" ".join)
SESSION = st.sampled_from(["a", "b"])
OP = st.one_of(
    st.tuples(st.sampled_from(["turn", "fact", "pinned"]), SESSION, TEXT, st.floats(0, 60),
              st.none() | st.floats(0.01, 30)),
    st.tuples(st.just("correct"), st.integers(0, 10**6), TEXT, st.floats(0, 60), st.none()),
)
MEMORIES = st.lists(OP, min_size=1, max_size=30)
NOW = st.floats(0, 90)  # days after the first memory; TTLs run out along the way


def _build(ops, embedder):
    db = Vectrix(None, embedder=embedder, exact_threshold=5)
    ids = []
    for op, arg, text, day, ttl in ops:
        ts = 1_700_000_000 + day * DAY
        if op == "correct":
            if ids:
                try:
                    ids.append(db.feedback(ids[arg % len(ids)], "corrected", correction=text, timestamp=ts))
                except ValueError as exc:  # dated before what it replaces: refused, nothing written
                    assert "comes before memory" in str(exc)
        else:
            ids.append(db.remember(text, session=arg, kind=None if op == "turn" else op, ttl_days=ttl,
                                   timestamp=ts))
    return db


def _live(r, now):
    """Live as of ``now``: created by then, not superseded by then, not expired then."""
    meta = r.metadata
    superseded = meta.get(K_SUPERSEDED_BY) is not None and meta[K_SUPERSEDED_AT] <= now
    return meta[K_TS] <= now and not superseded and meta.get(K_EXPIRES, float("inf")) > now


@PROPS
@given(ops=MEMORIES, query=TEXT, session=st.none() | SESSION, limit=st.integers(1, 12), now=NOW)
def test_recall_never_returns_more_than_limit(word_embedder, ops, query, session, limit, now):
    db = _build(ops, word_embedder)
    res = db.recall(query, session=session, limit=limit, now=1_700_000_000 + now * DAY)
    assert len(res) <= limit


@PROPS
@given(ops=MEMORIES, query=TEXT, session=st.none() | SESSION, limit=st.integers(1, 12),
       budget=st.integers(1, 150), now=NOW)
def test_recall_under_a_budget_ships_over_it_only_with_its_top_result_alone(word_embedder, ops, query, session,
                                                                             limit, budget, now):
    db = _build(ops, word_embedder)
    now = 1_700_000_000 + now * DAY
    unbudgeted = db.recall(query, session=session, limit=limit, now=now)
    res = db.recall(query, session=session, limit=limit, token_budget=budget, now=now)
    assert res.token_estimate == sum(count_tokens(r.text) for r in res)
    assert res.token_estimate <= budget or len(res) == 1
    if len(unbudgeted):
        assert res.ids[0] == unbudgeted.ids[0]  # the top result always ships
        assert res.ids == [i for i in unbudgeted.ids if i in set(res.ids)]  # the budget cuts, never reorders
        assert res.cut_count == len(unbudgeted) - len(res)


@PROPS
@given(ops=MEMORIES, query=TEXT, session=st.none() | SESSION, budget=st.integers(1, 300),
       recent_turns=st.integers(0, 8), now=NOW)
def test_context_stays_within_budget_unless_pinned_facts_alone_exceed_it_and_then_says_so(
        word_embedder, ops, query, session, budget, recent_turns, now):
    db = _build(ops, word_embedder)
    block = db.context(query, session=session, token_budget=budget, recent_turns=recent_turns,
                       now=1_700_000_000 + now * DAY)
    assert block.tokens_used == count_tokens(block.text)  # tokens_used is the cost of what ships
    if block.over_budget:
        assert block.tokens_by_section["pinned"] > budget
        assert block.tokens_used == block.tokens_by_section["pinned"]
        assert block.recent == [] and block.recalled == []
        assert str(budget) in block.note
    else:
        assert block.tokens_used <= budget


@PROPS
@given(ops=MEMORIES, session=SESSION, budget=st.integers(1, 40), now=NOW)
def test_context_never_drops_a_live_pinned_fact(word_embedder, ops, session, budget, now):
    db = _build(ops, word_embedder)
    now = 1_700_000_000 + now * DAY
    block = db.context("anything", session=session, token_budget=budget, now=now)
    live_pinned = {r.id for r in db.scan({K_SESSION: session, "_vx_kind": "pinned"}) if _live(r, now)}
    assert {r.id for r in block.pinned} == live_pinned


@PROPS
@given(ops=MEMORIES, query=TEXT, session=st.none() | SESSION, limit=st.integers(1, 40), now=NOW)
def test_recall_by_default_returns_no_superseded_or_expired_memory(word_embedder, ops, query, session, limit, now):
    db = _build(ops, word_embedder)
    now = 1_700_000_000 + now * DAY
    res = db.recall(query, session=session, limit=limit, now=now)
    assert all(_live(r, now) for r in res)
    eligible = [r for r in db.scan() if _live(r, now) and (session is None or r.metadata[K_SESSION] == session)]
    assert len(res) == min(limit, len(eligible))  # and no live one is crowded out by dead ones


@PROPS
@given(ops=MEMORIES, query=TEXT, session=st.none() | SESSION, budget=st.integers(1, 300), now=NOW)
def test_context_by_default_shows_no_superseded_or_expired_memory(word_embedder, ops, query, session, budget, now):
    db = _build(ops, word_embedder)
    now = 1_700_000_000 + now * DAY
    block = db.context(query, session=session, token_budget=budget, now=now)
    assert all(_live(r, now) for r in block.pinned + block.recent + block.recalled)
    assert len(set(block.ids)) == len(block.ids)  # and nothing twice
