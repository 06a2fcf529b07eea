"""ConversationMemory: the spec's API, its scoring, and where vxmem goes beyond the reference."""

import math
import threading
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vxmem
from vxmem import (
    K_CONSOLIDATED_FROM,
    K_SCORING,
    K_SUPERSEDED_BY,
    K_SUPERSEDES,
    KIND_FACT,
    KIND_PINNED,
    KINDS,
    OUTCOMES,
    ConsolidationReport,
    ContextBlock,
    ConversationMemory,
    Vectrix,
    feedback_score,
)
from vxmem.store.sqlite import database

from helpers import DAY, T0

# ---------------------------------------------------------------- the spec's names and defaults

def test_spec_constants_have_the_spec_values():
    assert vxmem.K_KIND == "_vx_kind" and vxmem.K_SESSION == "_vx_session" and vxmem.K_ROLE == "_vx_role"
    assert vxmem.K_TURN == "_vx_turn" and vxmem.K_TS == "_vx_ts" and vxmem.K_FEEDBACK == "_vx_feedback"
    assert K_SUPERSEDED_BY == "_vx_superseded_by" and K_SUPERSEDES == "_vx_supersedes"
    assert K_SCORING == "_vx_scoring" and vxmem.K_EXPIRES == "_vx_expires"
    assert K_CONSOLIDATED_FROM == "_vx_consolidated_from"
    assert KINDS == ("turn", "fact", "pinned") and OUTCOMES == ("useful", "dead_end", "corrected")


def test_memory_defaults_follow_the_spec(db):
    mem = db.memory
    assert isinstance(mem, ConversationMemory)
    assert (mem.half_life_days, mem.recency_weight, mem.feedback_weight, mem.feedback_half_life_days) == (
        7.0, 0.5, 0.25, 30.0)
    assert mem.ttl_days == {} and mem.judge is None and mem.judge_candidates == 5


def test_vectrix_passes_memory_settings_through():
    db = Vectrix(half_life_days=3, recency_weight=0.1)
    assert db.memory.half_life_days == 3.0 and db.memory.recency_weight == 0.1


def test_bad_memory_settings_are_refused():
    for bad in ({"half_life_days": 0}, {"recency_weight": -1}, {"ttl_days": {"turn": 0}},
                {"ttl_days": {"nonsense": 3}}, {"judge_candidates": 0}):
        with pytest.raises(ValueError):
            Vectrix(**bad)


# ---------------------------------------------------------------- remember and turns

def test_turns_are_numbered_per_session_and_returned_in_order(db):
    for i, text in enumerate(["hi", "how are you", "fine"]):
        db.remember(text, session="a", timestamp=T0 + i)
    db.remember("other", session="b", timestamp=T0)
    turns = db.turns("a", now=T0 + 10)
    assert [t.text for t in turns] == ["hi", "how are you", "fine"]
    assert [t.metadata["_vx_turn"] for t in turns] == [0, 1, 2]
    assert [t.text for t in db.turns("a", limit=2, now=T0 + 10)] == ["how are you", "fine"]
    assert db.turns("b", now=T0)[0].metadata["_vx_turn"] == 0


def test_pinned_and_fact_kinds_are_stored_as_such(db):
    p = db.remember("User is vegetarian", session="a", pinned=True, timestamp=T0)
    f = db.remember("User lives in Oslo", session="a", kind="fact", timestamp=T0)
    assert db.get(p).metadata["_vx_kind"] == KIND_PINNED
    assert db.get(f).metadata["_vx_kind"] == KIND_FACT
    assert "_vx_turn" not in db.get(f).metadata


def test_caller_metadata_is_kept_and_reserved_keys_are_refused(db):
    i = db.remember("x", session="a", metadata={"source": "email"}, timestamp=T0)
    assert db.get(i).metadata["source"] == "email"
    with pytest.raises(ValueError, match="reserved"):
        db.remember("y", session="a", metadata={"_vx_kind": "fact"}, timestamp=T0)
    assert db.count() == 1


def test_timestamps_accept_datetimes_and_iso_strings(db):
    when = datetime(2024, 5, 1, 12, tzinfo=UTC)
    a = db.remember("a", session="s", timestamp=when)
    b = db.remember("b", session="s", timestamp="2024-05-01T12:00:00+00:00")
    assert db.get(a).metadata["_vx_ts"] == db.get(b).metadata["_vx_ts"] == when.timestamp()


# ---------------------------------------------------------------- recall scoring

def test_recall_blends_normalised_relevance_recency_and_feedback_exactly(db):
    ids = [db.remember(t, session="s", timestamp=T0 + k * DAY) for k, t in
           enumerate(["my cat is called Miso", "the cat eats tuna", "weather report for monday"])]
    db.feedback(ids[1], "useful", timestamp=T0 + 3 * DAY)
    now = T0 + 10 * DAY
    res = db.recall("cat", session="s", now=now)
    rel = {r.id: r.metadata[K_SCORING]["relevance"] for r in res}
    lo, hi = min(rel.values()), max(rel.values())
    for r in res:
        s = r.metadata[K_SCORING]
        age = (now - r.metadata["_vx_ts"]) / DAY
        fb = feedback_score(r.metadata, now, 30.0)
        assert s["relevance_norm"] == pytest.approx((s["relevance"] - lo) / (hi - lo))
        assert s["recency"] == pytest.approx(0.5 ** (age / 7.0))
        assert s["feedback"] == pytest.approx(fb)
        assert r.score == pytest.approx(s["relevance_norm"] + 0.5 * s["recency"] + 0.25 * fb)
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)


def test_old_but_far_more_relevant_memory_beats_fresh_chit_chat(db):
    db.remember("My passport number ends in 4471 and expires in June", session="s", timestamp=T0)
    for k in range(5):
        db.remember(f"lol ok {k}", session="s", timestamp=T0 + 90 * DAY + k)
    res = db.recall("when does my passport expire", session="s", now=T0 + 91 * DAY, limit=3)
    assert res[0].text.startswith("My passport")


def test_recency_breaks_a_relevance_tie_towards_the_newer(db):
    db.remember("I like green tea", session="s", timestamp=T0)
    db.remember("I like green tea", session="s", timestamp=T0 + DAY)
    res = db.recall("green tea", session="s", now=T0 + 2 * DAY)
    assert res[0].metadata["_vx_ts"] == T0 + DAY


def test_feedback_useful_lifts_and_dead_end_lowers(db):
    a = db.remember("restart the router", session="s", timestamp=T0)
    b = db.remember("restart the modem", session="s", timestamp=T0)
    base = {r.id: r.score for r in db.recall("restart", session="s", now=T0 + DAY)}
    db.feedback(a, "useful", timestamp=T0 + DAY)
    db.feedback(b, "dead_end", timestamp=T0 + DAY)
    after = {r.id: r.score for r in db.recall("restart", session="s", now=T0 + DAY)}
    assert after[a] == pytest.approx(base[a] + 0.25)
    assert after[b] == pytest.approx(base[b] - 0.25)


def test_feedback_score_decays_with_its_half_life_and_is_clamped_in_recall(db):
    meta = {"_vx_feedback": [["useful", T0], ["dead_end", T0 + 30 * DAY]]}
    assert feedback_score(meta, T0 + 30 * DAY, 30.0) == pytest.approx(0.5 - 1.0)
    i = db.remember("graded a lot", session="s", timestamp=T0)
    for _ in range(6):
        db.feedback(i, "useful", timestamp=T0)
    (r,) = db.recall("graded", session="s", now=T0)
    assert r.metadata[K_SCORING]["feedback"] == pytest.approx(6.0)
    assert r.score == pytest.approx(1.0 + 0.5 + 0.25 * 2.0)


def test_recall_across_sessions_with_session_none(db):
    db.remember("alpha fact", session="a", timestamp=T0)
    db.remember("alpha fact too", session="b", timestamp=T0)
    assert {r.metadata["_vx_session"] for r in db.recall("alpha", now=T0)} == {"a", "b"}
    assert {r.metadata["_vx_session"] for r in db.recall("alpha", session="a", now=T0)} == {"a"}


def test_recall_kinds_and_exclude_ids(db):
    t = db.remember("coffee talk", session="s", timestamp=T0)
    f = db.remember("coffee fact", session="s", kind="fact", timestamp=T0)
    assert [r.id for r in db.recall("coffee", session="s", kinds=("fact",), now=T0)] == [f]
    assert [r.id for r in db.recall("coffee", session="s", exclude_ids=[f], now=T0)] == [t]


def test_recall_token_budget_ships_the_top_result_even_alone_over_budget(db):
    db.remember("long " * 50 + "answer", session="s", timestamp=T0)
    db.remember("short answer", session="s", timestamp=T0 - DAY)
    res = db.recall("long answer", session="s", token_budget=5, now=T0)
    assert len(res) == 1 and res[0].text.startswith("long")
    assert res.truncated and res.cut_count == 1 and res.token_budget == 5


def test_recall_token_budget_skips_what_does_not_fit_and_keeps_what_does(db):
    db.remember("apples are red", session="s", timestamp=T0)
    db.remember("apples " + "and more apples " * 30, session="s", timestamp=T0)
    db.remember("apples grow on trees", session="s", timestamp=T0)
    res = db.recall("apples are red", session="s", token_budget=12, now=T0)
    assert res[0].text == "apples are red"
    assert res.token_estimate <= 12 or len(res) == 1
    assert all(len(r.text) < 40 for r in res)


def test_score_gap_cuts_after_the_first_cliff(db):
    db.remember("quantum chromodynamics lecture notes", session="s", timestamp=T0)
    db.remember("quantum chromodynamics lecture notes part two", session="s", timestamp=T0)
    db.remember("banana bread recipe", session="s", timestamp=T0)
    full = db.recall("quantum chromodynamics lecture notes", session="s", now=T0)
    cut = db.recall("quantum chromodynamics lecture notes", session="s", score_gap=0.5, now=T0)
    assert len(full) == 3 and len(cut) == 2 and cut.cut_count == 1


def test_superseded_memories_only_with_include_superseded(db):
    old = db.remember("I live in Paris", session="s", kind="fact", timestamp=T0)
    new = db.feedback(old, "corrected", "I live in Lyon", timestamp=T0 + DAY)
    ids = [r.id for r in db.recall("where do I live", session="s", now=T0 + DAY)]
    assert ids == [new]
    ids = [r.id for r in db.recall("where do I live", session="s", include_superseded=True, now=T0 + DAY)]
    assert set(ids) == {old, new}


def test_memories_past_their_ttl_are_invisible_at_once_and_deleted_by_expire():
    db = Vectrix(ttl_days={"turn": 1})
    t = db.remember("ephemeral chatter", session="s", timestamp=T0)
    f = db.remember("ephemeral fact", session="s", kind="fact", timestamp=T0)
    assert {r.id for r in db.recall("ephemeral", session="s", now=T0 + 0.5 * DAY)} == {t, f}
    assert [r.id for r in db.recall("ephemeral", session="s", now=T0 + 2 * DAY)] == [f]
    assert db.turns("s", now=T0 + 2 * DAY) == []
    assert db.expire(now=T0 + 2 * DAY) == 1
    assert db.count() == 1


def test_per_memory_ttl_overrides_the_kind_ttl():
    db = Vectrix(ttl_days={"fact": 1})
    f = db.remember("keeps forever", session="s", kind="fact", ttl_days=math.inf, timestamp=T0)
    g = db.remember("keeps a week", session="s", kind="fact", ttl_days=7, timestamp=T0)
    assert {r.id for r in db.recall("keeps", session="s", now=T0 + 3 * DAY)} == {f, g}
    assert [r.id for r in db.recall("keeps", session="s", now=T0 + 8 * DAY)] == [f]


# ---------------------------------------------------------------- judge, correction, history

def _city_judge(new, olds):
    return ["live in" in new and "live in" in o for o in olds]


def test_judge_supersedes_contradicted_facts_on_write():
    db = Vectrix(judge=_city_judge)
    old = db.remember("I live in Rome", session="s", kind="fact", timestamp=T0)
    keep = db.remember("I like opera", session="s", kind="fact", timestamp=T0)
    new = db.remember("I live in Milan now", session="s", kind="fact", timestamp=T0 + DAY)
    assert db.get(old).metadata[K_SUPERSEDED_BY] == new
    assert db.get(new).metadata[K_SUPERSEDES] == [old]
    assert K_SUPERSEDED_BY not in db.get(keep).metadata


def test_judge_sees_only_facts_of_the_same_session():
    seen = []
    db = Vectrix(judge=lambda new, olds: seen.append(list(olds)) or [False] * len(olds))
    db.remember("I live in Rome", session="other", kind="fact", timestamp=T0)
    db.remember("I live in Milan", session="s", kind="fact", timestamp=T0)
    db.remember("I live in Turin", session="s", kind="fact", timestamp=T0)
    assert seen == [["I live in Milan"]]  # never Rome, and no call when there is nothing to judge


def test_check_false_skips_the_judge():
    calls = []
    db = Vectrix(judge=lambda new, olds: calls.append(1) or [True] * len(olds))
    db.remember("I live in Rome", session="s", kind="fact", timestamp=T0)
    db.remember("I live in Milan", session="s", kind="fact", check=False, timestamp=T0)
    assert calls == [] and db.count({"_vx_superseded_by": None}) == 2
    db.remember("I live in Turin", session="s", kind="fact", timestamp=T0)
    assert calls == [1]


def test_history_gives_the_supersession_chain_oldest_first(db):
    a = db.remember("I live in Paris", session="s", kind="fact", timestamp=T0)
    b = db.feedback(a, "corrected", "I live in Lyon", timestamp=T0 + DAY)
    c = db.feedback(b, "corrected", "I live in Nice", timestamp=T0 + 2 * DAY)
    chain = db.history(b)
    assert [e.id for e in chain] == [a, b, c]
    assert [e.live for e in chain] == [False, False, True]
    assert chain[0].superseded_by == b and chain[1].superseded_by == c
    assert chain[1].superseded_at == datetime.fromtimestamp(T0 + 2 * DAY, tz=UTC)
    assert db.history(a) == chain


# ---------------------------------------------------------------- forget and consolidate

def test_forget_selects_by_session_kinds_and_age(db):
    db.remember("old turn", session="a", timestamp=T0)
    db.remember("new turn", session="a", timestamp=T0 + 10 * DAY)
    db.remember("old fact", session="a", kind="fact", timestamp=T0)
    db.remember("b turn", session="b", timestamp=T0)
    assert db.forget(session="a", older_than=5, now=T0 + 10 * DAY) == 1
    assert [t.text for t in db.turns("a", now=T0 + 10 * DAY)] == ["new turn"]
    assert db.forget(session="a", kinds=KINDS, now=T0 + 10 * DAY) == 2
    assert db.count() == 1


def test_forget_by_ids_leaves_plain_documents_alone(db):
    (doc,) = db.add(["plain document"])
    m = db.remember("memory", session="s", timestamp=T0)
    assert db.forget(ids=[doc, m, "missing"]) == 1
    assert doc in db and m not in db


def test_forget_superseded_clears_only_the_audit_trail(db):
    old = db.remember("I live in Paris", session="s", kind="fact", timestamp=T0)
    new = db.feedback(old, "corrected", "I live in Lyon", timestamp=T0 + DAY)
    assert db.forget(session="s", kinds=KINDS, superseded=True, now=T0 + DAY) == 1
    assert old not in db and new in db


def _summarize(items):
    return ["The user said: " + " / ".join(i["text"] for i in items)]


def test_consolidate_turns_old_turns_into_facts_and_keeps_recent(db):
    ids = [db.remember(f"turn {k}", session="s", timestamp=T0 + k) for k in range(10)]
    rep = db.consolidate("s", _summarize, keep_recent=3, batch_turns=4, now=T0 + 100)
    assert isinstance(rep, ConsolidationReport) and rep.completed
    assert rep.batches == 2 and rep.turns_consolidated == ids[:7] and rep.turns_deleted == 7
    assert [t.text for t in db.turns("s", now=T0 + 100)] == ["turn 7", "turn 8", "turn 9"]
    facts = [db.get(f) for f in rep.facts]
    assert facts[0].metadata[K_CONSOLIDATED_FROM] == ids[:4]
    assert facts[0].metadata["_vx_kind"] == KIND_FACT
    assert facts[0].metadata["_vx_ts"] == T0 + 3  # dated at the newest turn it summarises
    assert rep.tokens_before > 0 and rep.tokens_after > 0


def test_consolidate_dry_run_keeps_turns_and_pinned_pins(db):
    for k in range(4):
        db.remember(f"turn {k}", session="s", timestamp=T0 + k)
    rep = db.consolidate("s", _summarize, keep_recent=0, delete=False, pinned=True, now=T0 + 10)
    assert rep.turns_deleted == 0 and len(db.turns("s", now=T0 + 10)) == 4
    assert db.get(rep.facts[0]).metadata["_vx_kind"] == KIND_PINNED


def test_consolidate_summarizer_failure_keeps_finished_batches_and_carries_the_report(db):
    ids = [db.remember(f"turn {k}", session="s", timestamp=T0 + k) for k in range(9)]
    calls = []

    def flaky(items):
        calls.append(len(items))
        if len(calls) == 2:
            raise RuntimeError("model timed out")
        return ["summary of " + items[0]["text"]]

    with pytest.raises(RuntimeError, match="timed out") as info:
        db.consolidate("s", flaky, keep_recent=0, batch_turns=3, now=T0 + 100)
    rep = info.value.report
    assert rep.batches == 1 and rep.turns_consolidated == ids[:3] and not rep.completed
    remaining = [t.id for t in db.turns("s", now=T0 + 100)]
    assert remaining == ids[3:]
    assert db.get(rep.facts[0]).text == "summary of turn 0"


def test_consolidate_summarizer_returning_a_string_is_a_type_error_before_any_write(db):
    for k in range(3):
        db.remember(f"turn {k}", session="s", timestamp=T0 + k)
    before = db.count()
    with pytest.raises(TypeError, match="list of strings") as info:
        db.consolidate("s", lambda items: "one summary", keep_recent=0, now=T0 + 10)
    assert info.value.report.batches == 0
    assert db.count() == before and len(db.turns("s", now=T0 + 10)) == 3


# ---------------------------------------------------------------- context

def test_context_orders_pinned_then_recent_then_recalled(db):
    db.remember("User is allergic to peanuts", session="s", pinned=True, timestamp=T0)
    db.remember("We talked about Thai food recipes", session="s", timestamp=T0 - 30 * DAY)
    for k in range(3):
        db.remember(f"recent line {k}", session="s", timestamp=T0 + k)
    block = db.context("thai food", session="s", recent_turns=2, now=T0 + 10)
    assert isinstance(block, ContextBlock)
    assert [r.text for r in block.pinned] == ["User is allergic to peanuts"]
    assert [r.text for r in block.recent] == ["recent line 1", "recent line 2"]
    assert block.recalled[0].text == "We talked about Thai food recipes"
    text = block.text
    assert text.index("Pinned facts:") < text.index("Recent conversation:") < text.index("Relevant memories:")
    assert "user: recent line 2" in text


def test_context_counts_exactly_the_tokens_of_its_text(db):
    db.remember("User is allergic to peanuts", session="s", pinned=True, timestamp=T0)
    for k in range(8):
        db.remember(f"we discussed topic number {k} at length", session="s", timestamp=T0 + k)
    for budget in (10, 25, 40, 1500):
        block = db.context("topic", session="s", token_budget=budget, now=T0 + 10)
        assert block.tokens_used == vxmem.count_tokens(block.text)
        if block.over_budget:  # only pinned facts may overflow, and then nothing else ships
            assert block.recent == [] and block.recalled == [] and budget == 10
        else:
            assert block.tokens_used <= budget


def test_context_cuts_recent_turns_oldest_first(db):
    for k in range(6):
        db.remember(f"message number {k} here", session="s", timestamp=T0 + k)
    block = db.context("zzz", session="s", token_budget=20, recent_turns=6, now=T0 + 10)
    assert block.recent and block.recent[-1].text == "message number 5 here"
    assert block.cut_recent == 6 - len(block.recent) > 0


def test_context_never_drops_pinned_facts_and_says_when_they_overflow(db):
    for k in range(3):
        db.remember(f"pinned fact {k} " + "word " * 10, session="s", pinned=True, timestamp=T0 + k)
    block = db.context("anything", session="s", token_budget=10, now=T0 + 10)
    assert len(block.pinned) == 3 and block.over_budget and "over the budget" in block.note
    assert block.recent == [] and block.recalled == []


def test_context_never_shows_a_superseded_turn_under_recent(db):
    t = db.remember("I prefer dark mode", session="s", timestamp=T0)
    db.remember("ok noted", session="s", timestamp=T0 + 1)
    db.feedback(t, "corrected", "I prefer light mode", timestamp=T0 + 2)
    block = db.context("mode", session="s", now=T0 + 3)
    assert "I prefer dark mode" not in block.text
    assert "I prefer light mode" in block.text


# ---------------------------------------------------------------- beyond the reference

def test_recall_of_facts_returns_limit_live_results_when_turns_are_the_closest(db):
    for k in range(200):
        db.remember(f"the deploy failed again on server {k}", session="s", timestamp=T0)
    for k in range(12):
        db.remember(f"deploy runbook step {k}", session="s", kind="fact", timestamp=T0)
    res = db.recall("the deploy failed again on server", session="s", kinds=("fact", "pinned"), limit=10, now=T0)
    assert len(res) == 10 and all(r.metadata["_vx_kind"] == "fact" for r in res)


def test_recall_returns_limit_live_results_when_expired_and_superseded_are_closest():
    db = Vectrix(ttl_days={"turn": 1})
    for k in range(100):
        db.remember(f"order status pending {k}", session="s", timestamp=T0 - 5 * DAY)  # expired
    olds = [db.remember(f"order status shipped {k}", session="s", kind="fact", timestamp=T0) for k in range(50)]
    for o in olds:
        db.feedback(o, "corrected", "the parcel arrived", timestamp=T0)
    for k in range(10):
        db.remember(f"unrelated note {k}", session="s", kind="fact", timestamp=T0)
    res = db.recall("order status pending", session="s", limit=10, now=T0 + 1)
    assert len(res) == 10
    assert not any("order status" in r.text for r in res)


def test_turn_numbers_continue_after_reopen_forget_and_consolidate(tmp_path):
    path = tmp_path / "m.vxdb"
    with Vectrix(path) as db:
        db.remember("a", session="s", timestamp=T0)
        db.remember("b", session="s", timestamp=T0)
    with Vectrix(path) as db:
        assert db.get(db.remember("c", session="s", timestamp=T0)).metadata["_vx_turn"] == 2
        db.forget(session="s", now=T0 + 1)
        assert db.get(db.remember("d", session="s", timestamp=T0)).metadata["_vx_turn"] == 3
        db.consolidate("s", _summarize, keep_recent=0, now=T0 + 1)
        assert db.get(db.remember("e", session="s", timestamp=T0)).metadata["_vx_turn"] == 4


def test_two_threads_remembering_into_one_session_never_share_a_number(db):
    def work(k):
        for i in range(50):
            db.remember(f"thread {k} line {i}", session="s", timestamp=T0 + i)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    numbers = [t.metadata["_vx_turn"] for t in db.turns("s", now=T0 + 100)]
    assert sorted(numbers) == list(range(200))


def test_a_failed_remember_consumes_no_turn_number(db):
    db.remember("a", session="s", timestamp=T0)
    with pytest.raises(ValueError):
        db.remember("b", session="s", metadata={"_vx_bad": 1}, timestamp=T0)
    db.embedder = lambda texts: (_ for _ in ()).throw(RuntimeError("embedder down"))
    with pytest.raises(RuntimeError):
        db.remember("c", session="s", timestamp=T0)
    db.embedder = vxmem.HashingEmbedder()
    assert db.get(db.remember("d", session="s", timestamp=T0)).metadata["_vx_turn"] == 1


def test_negative_and_already_held_turn_numbers_are_rejected(db):
    db.remember("a", session="s", turn=5, timestamp=T0)
    with pytest.raises(ValueError):
        db.remember("b", session="s", turn=-1, timestamp=T0)
    with pytest.raises(ValueError, match="already held"):
        db.remember("c", session="s", turn=5, timestamp=T0)
    assert db.get(db.remember("d", session="s", timestamp=T0)).metadata["_vx_turn"] == 6
    assert db.count() == 2


def test_one_remember_is_one_transaction_with_its_supersession_links(monkeypatch):
    db = Vectrix(judge=_city_judge)
    old = db.remember("I live in Rome", session="s", kind="fact", timestamp=T0)
    def boom(self, id, meta):
        raise OSError("disk full")

    monkeypatch.setattr(database.Transaction, "update_meta", boom)
    with pytest.raises(OSError):
        db.remember("I live in Milan", session="s", kind="fact", timestamp=T0 + 1)
    monkeypatch.undo()
    assert db.count() == 1
    assert K_SUPERSEDED_BY not in db.get(old).metadata
    # The database itself holds what the handle shows.
    assert db.engine.database.load(db.token_counter).n_alive == 1


def test_a_judge_that_raises_writes_nothing():
    def bad_judge(new, olds):
        raise RuntimeError("llm down")

    db = Vectrix(judge=bad_judge)
    db.remember("first fact", session="s", kind="fact", check=False, timestamp=T0)
    with pytest.raises(RuntimeError):
        db.remember("second fact", session="s", kind="fact", timestamp=T0)
    assert db.count() == 1


def test_a_judge_with_the_wrong_number_of_verdicts_is_refused():
    db = Vectrix(judge=lambda new, olds: [True])
    db.remember("fact one", session="s", kind="fact", check=False, timestamp=T0)
    db.remember("fact two", session="s", kind="fact", check=False, timestamp=T0)
    with pytest.raises(ValueError, match="verdicts"):
        db.remember("fact three", session="s", kind="fact", timestamp=T0)
    assert db.count() == 2


def test_correcting_the_same_memory_twice_leaves_only_the_newest_live(db):
    old = db.remember("My phone is a Pixel", session="s", kind="fact", timestamp=T0)
    c1 = db.feedback(old, "corrected", "My phone is an iPhone", timestamp=T0 + DAY)
    c2 = db.feedback(old, "corrected", "My phone is a Fairphone", timestamp=T0 + 2 * DAY)
    live = [r.id for r in db.recall("what phone", session="s", now=T0 + 3 * DAY)]
    assert live == [c2]
    assert db.get(c1).metadata[K_SUPERSEDED_BY] == c2
    assert [e.id for e in db.history(old)] == [old, c1, c2]


@pytest.mark.parametrize("call, exc", [
    (lambda db, known: db.remember(123), TypeError),
    (lambda db, known: db.remember("   "), ValueError),
    (lambda db, known: db.recall("q", limit=0), ValueError),
    (lambda db, known: db.recall("q", limit=-3), ValueError),
    (lambda db, known: db.recall("q", kinds=("turn", "memo")), ValueError),
    (lambda db, known: db.recall("q", mode="psychic"), ValueError),
    (lambda db, known: db.recall("q", token_budget=0), ValueError),
    (lambda db, known: db.feedback(known, "meh"), ValueError),
    (lambda db, known: db.feedback("no-such-id", "useful"), KeyError),
    (lambda db, known: db.feedback(known, "useful", correction="x"), ValueError),
    (lambda db, known: db.remember("x", ttl_days=0), ValueError),
    (lambda db, known: db.remember("x", ttl_days=-2), ValueError),
    (lambda db, known: db.remember("x", kind="memo"), ValueError),
    (lambda db, known: db.remember("x", pinned=True, kind="turn"), ValueError),
    (lambda db, known: db.remember("x", kind="fact", turn=3), ValueError),
    (lambda db, known: db.remember("x", metadata={"_vx_ts": 1}), ValueError),
    (lambda db, known: db.remember("x", timestamp=float("nan")), ValueError),
    (lambda db, known: db.remember("x", session=5), TypeError),
    (lambda db, known: db.history("no-such-id"), KeyError),
    (lambda db, known: db.forget(kinds=("memo",)), ValueError),
    (lambda db, known: db.context("q", token_budget=0), ValueError),
    (lambda db, known: db.consolidate("s", "not callable"), TypeError),
    (lambda db, known: db.remember("x", check=True), ValueError),
])
def test_bad_input_gets_a_clear_error_and_writes_nothing(call, exc):
    db = Vectrix()
    known = db.remember("known memory", session="s", timestamp=T0)
    before = [(r.id, r.metadata) for r in db.scan()]
    with pytest.raises(exc) as info:
        call(db, known)
    assert str(info.value)
    assert [(r.id, r.metadata) for r in db.scan()] == before


# ---------------------------------------------------------------- properties

_sessions = st.sampled_from(["a", "b", "c"])
_kinds = st.sampled_from(KINDS)
_ops = st.lists(st.tuples(_sessions, _kinds, st.integers(0, 40), st.sampled_from(
    ["tea", "coffee", "tea and coffee", "green tea", "the coffee shop"])), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(ops=_ops, corrections=st.lists(st.integers(0, 24), max_size=5), query=st.sampled_from(["tea", "coffee"]))
def test_recall_never_crosses_sessions_nor_returns_superseded_or_expired(ops, corrections, query):
    db = Vectrix(ttl_days={"turn": 10})
    ids = []
    for session, kind, day, text in ops:
        ids.append(db.remember(f"{text} {day}", session=session, kind=kind, timestamp=T0 + day * DAY, check=False))
    for k in corrections:
        if k < len(ids) and ids[k] in db:
            db.feedback(ids[k], "corrected", "corrected tea fact", timestamp=T0 + 41 * DAY)
    now = T0 + 45 * DAY
    for session in ("a", "b", "c"):
        for r in db.recall(query, session=session, limit=5, now=now):
            assert r.metadata["_vx_session"] == session
            assert r.metadata.get(K_SUPERSEDED_BY) is None
            assert r.metadata.get("_vx_expires", math.inf) > now
        for r in db.context(query, session=session, now=now).recalled:
            assert r.metadata["_vx_session"] == session
        assert all(t.metadata["_vx_session"] == session for t in db.turns(session, now=now))
