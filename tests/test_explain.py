"""What the explainers and the replay record: recall's shipping stages as one function
(scoring.ship), why a live memory's recall returned what it did, Replay.rank over the pool
recall() blends, and the events that made and deleted each memory."""

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.ranking import scoring
from vxmem.workbench.analysis.reasons import REASONS
from vxmem.workbench.analysis.why import why_recalled_live
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import rankings
from vxmem.workbench.synth import generate
from vxmem.workbench.views import memory_timeline

from helpers import DAY, T0

# ---------------------------------------------------------------------------- scoring.ship


def test_ship_orders_cuts_at_the_gap_then_fits_the_budget():
    score = [0.9, 0.5, 0.88, 0.2]
    ts = [1.0, 2.0, 3.0, 4.0]
    tokens = [10, 5, 30, 5]
    order, n_gap, keep = scoring.ship(score, ts, tokens, limit=3, score_gap=None, token_budget=None)
    assert order.tolist() == [0, 2, 1, 3] and n_gap == 3 and keep.tolist() == [True, True, True]
    # Within the limit the scores fall 0.02 then 0.38: a gap of 0.3 cuts after the second.
    order, n_gap, keep = scoring.ship(score, ts, tokens, limit=3, score_gap=0.3, token_budget=None)
    assert n_gap == 2 and keep.tolist() == [True, True]
    # The top result always ships; the 30-token one does not fit 10 + 30 > 20.
    order, n_gap, keep = scoring.ship(score, ts, tokens, limit=3, score_gap=0.3, token_budget=20)
    assert (order[:n_gap][keep]).tolist() == [0]


def test_ship_breaks_ties_to_the_newer_memory():
    order, n_gap, keep = scoring.ship([0.5, 0.5, 0.7], [10.0, 20.0, 5.0], [1, 1, 1], limit=2, score_gap=None,
                                      token_budget=None)
    assert order.tolist() == [2, 1, 0] and n_gap == 2


def test_ship_of_an_empty_pool_ships_nothing():
    order, n_gap, keep = scoring.ship([], [], [], limit=5, score_gap=0.1, token_budget=10)
    assert order.size == 0 and n_gap == 0 and keep.size == 0


# ---------------------------------------------------------------------------- why_recalled_live


@pytest.fixture
def live(word_embedder):
    db = Vectrix(None, embedder=word_embedder, ttl_days={"turn": None})
    ids = {
        "pizza": db.remember("we ordered pizza with olives", session="a", timestamp=T0),
        "pasta": db.remember("pizza dough and pasta recipes", session="a", timestamp=T0 + DAY),
        "theme": db.remember("I like the dark theme", session="a", kind="fact", timestamp=T0 + 2 * DAY),
        "other": db.remember("pizza in another session", session="b", timestamp=T0 + 2 * DAY),
        "short": db.remember("pizza tonight", session="a", ttl_days=1, timestamp=T0),
    }
    ids["light"] = db.feedback(ids["theme"], "corrected", correction="I like the light theme now",
                               timestamp=T0 + 3 * DAY)
    yield db, ids
    db.close()


def test_live_explainer_returns_exactly_what_recall_returns(live):
    db, ids = live
    now = T0 + 4 * DAY
    for kwargs in ({}, {"limit": 1}, {"token_budget": 8}, {"mode": "lexical"}):
        got = db.recall("pizza", session="a", now=now, **kwargs)
        why = why_recalled_live(db.memory, "pizza", session="a", now=now, **kwargs)
        returned = why[why["reason"] == "returned"].sort_values("rank")
        assert returned["id"].tolist() == got.ids, kwargs
        assert np.allclose(returned["score"], [r.score for r in got])
        assert set(why["reason"]) <= set(REASONS)


def test_live_explainer_names_each_reason(live):
    db, ids = live
    why = why_recalled_live(db.memory, "pizza", session="a", now=T0 + 4 * DAY, limit=1,
                            labels={v: k for k, v in ids.items()}).set_index("label")
    assert why.loc["other", "reason"] == "other_session"
    assert why.loc["short", "reason"] == "expired"
    assert why.loc["theme", "reason"] == "superseded" and why.loc["theme", "superseded_by"] == ids["light"]
    assert "light" in why.loc["theme", "detail"]
    top = why[why["reason"] == "returned"].index.tolist()
    assert len(top) == 1
    below = why[why["reason"] == "out_ranked"]
    assert len(below) >= 1 and (below["versus_label"] == top[0]).all()
    # The parts of the gap add up to the gap.
    parts = below[["d_relevance_norm", "d_recency", "d_feedback"]].sum(axis=1)
    assert np.allclose(parts, below["score_deficit"])


def test_live_explainer_says_what_the_budget_cut(live):
    db, ids = live
    why = why_recalled_live(db.memory, "pizza", session="a", now=T0 + 4 * DAY, token_budget=3)
    cut = why[why["reason"] == "cut_by_budget"]
    assert len(cut) >= 1 and cut["detail"].str.contains("did not fit").all()


def test_live_explainer_refuses_a_bad_budget(live):
    db, _ = live
    with pytest.raises(ValueError, match="token_budget"):
        why_recalled_live(db.memory, "pizza", token_budget=0)


# ---------------------------------------------------------------------------- Replay.rank and the recording


def test_replay_rank_blends_only_the_pool_recall_blends():
    # Pools recorded for limit 20 hold 80 candidates; recall(limit=10) blends the first 40,
    # and relevance is normalised across those, so ranking all 80 differs (it did here).
    rep = replay(generate("preference_drift"), {"pool_limit": 20, "limit": 10})
    live = [p["recalled_ids"] for p in rep.probes]
    assert rep.rank() == live
    assert rep.rank(limit=10) == rankings(rep, limit=10) == live
    big = max(range(rep.n_probes), key=lambda i: len(rep.pool(i)))
    assert len(rep.pool(big)) > len(rep.pool(big, limit=10)) == scoring.pool_size(10)


def test_rankings_refuse_a_replay_recorded_with_score_gap(word_embedder):
    rep = replay(generate("feedback_loop"), {"score_gap": 0.2}, word_embedder)
    with pytest.raises(ValueError, match="score_gap"):
        rankings(rep)


def test_replay_records_expiry_and_the_events_that_made_and_deleted_each_memory():
    rep = replay(generate("long_thread"))
    events = rep.events
    for m in rep.memories:
        assert events[m["created_by"]]["time"] == m["created"]
        if m["deleted"] is not None:
            assert events[m["deleted_by"]]["type"] == m["deleted_how"]
            assert events[m["deleted_by"]]["time"] == m["deleted"]
    assert any(m["expires"] is not None for m in rep.memories)  # one-day TTLs on turns


def test_expire_and_consolidate_at_one_moment_are_told_apart():
    # long_thread runs expire() and consolidate() at the same timestamps: each memory's fate
    # is the event that deleted it, not the first event at that moment.
    rep = replay(generate("long_thread"))
    deleted = {}
    for e in rep.events:
        deleted[e["type"]] = deleted.get(e["type"], 0) + e["deleted"]
    fates = memory_timeline(rep)["status"].value_counts().to_dict()
    assert fates.get("expired", 0) == deleted.get("expire", 0) > 0
    assert fates.get("consolidated", 0) == deleted.get("consolidate", 0) > 0


def test_select_keeps_the_chosen_probes_for_sweeps():
    rep = replay(generate("many_users", users=2))
    keep = [i % 2 == 0 for i in range(rep.n_probes)]
    sub = rep.select(keep)
    assert sub.n_probes == sum(keep)
    assert [p["query"] for p in sub.probes] == [p["query"] for p, k in zip(rep.probes, keep) if k]
    assert rankings(sub) == [r for r, k in zip(rankings(rep), keep) if k]
    with pytest.raises(ValueError, match="one bool per probe"):
        rep.select([True])


# ---------------------------------------------------------------------------- why_recalled: stages, not expiry


def _drift_to_q64():
    """preference_drift up to its probe q64 (its only probe): the events before it unchanged."""
    import dataclasses

    from vxmem.workbench.datasets.jsonl import load_jsonl

    conv = load_jsonl("datasets/preference_drift.jsonl")
    k = next(j for j, e in enumerate(conv.events) if e.type == "probe" and e.label == "q64")
    return dataclasses.replace(conv, events=[e for e in conv.events[:k + 1] if e.type != "probe" or e.label == "q64"])


def test_a_memory_the_second_stage_cut_is_said_to_be_cut_not_expired():
    from vxmem.models.embed import get_embedder
    from vxmem.workbench.analysis.why import why_recalled

    conv = _drift_to_q64()
    assert not any(e.ttl_days for e in conv.events) and not any(e.type == "expire" for e in conv.events)
    rep = replay(conv, {"half_life_days": 3.0, "limit": 5, "rerank": True}, get_embedder("bge-small"), cache=False)
    assert rep.floors == (240, 120)  # the default preset's deep stage: it reads 120, keeps 20
    f = why_recalled(rep, 0, conversation=conv).set_index("label")
    assert not (f["reason"] == "expired").any()  # nothing here has a time to live
    c46 = f.loc["c46"]  # relevant and live (the correction that superseded t13)
    assert c46["relevant"] and f.loc["t13", "superseded_by"] == c46["id"]
    assert c46["reason"] == "cut_by_second_stage"
    assert "not among the 20 best it keeps for the blend" in c46["detail"]


def test_a_memory_past_its_time_to_live_still_says_expired(hashing_embedder):
    from vxmem.workbench.analysis.why import why_recalled

    conv = _drift_to_q64()
    rep = replay(conv, {"half_life_days": 3.0, "limit": 5, "rerank": True, "ttl_days": {"turn": 7}},
                 embedder=hashing_embedder, cache=False)
    f = why_recalled(rep, 0, conversation=conv).set_index("label")
    now = rep.probes[0]["time"]
    mine = f[f["session"] == "user2"]
    past = mine["expires"] <= now
    assert past.any() and (~past).any()
    assert (mine.loc[past & (mine["reason"] != "superseded"), "reason"] == "expired").all()
    assert not (mine.loc[~past, "reason"] == "expired").any()
