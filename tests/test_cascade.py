"""The accurate preset's cascade: the default's stages and blend, then the cross-encoder reordering its top limit."""

import numpy as np
import pytest

from vxmem import ConversationMemory, Vectrix
from vxmem.memory.late_stage import CONTEXT_WORDS
from vxmem.models.late import COLBERT_SMALL
from vxmem.models.packaged import MS_MARCO_MINILM_L12
from vxmem.models.rerank import default_reranker
from vxmem.ranking import deep
from vxmem.workbench.replay.record import Replay
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import rankings, sweep
from vxmem.workbench.synth import generate

from helpers import T0

CASCADE = f"{COLBERT_SMALL.name} > {MS_MARCO_MINILM_L12.name}"
QUERY = "which room is the meeting in"


def _notes(db):
    return db.remember_many([f"note {i}: the meeting moved to room {i}" for i in range(60)], session="s",
                            timestamp=T0)


def test_the_cross_encoder_reorders_the_defaults_top_limit_and_mixes_half_and_half():
    db = Vectrix(embedder="hashing", rerank=True)
    _notes(db)
    default = db.memory.candidate_pool(QUERY, limit=10, now=T0 + 60)
    accurate = ConversationMemory(db, preset="accurate").candidate_pool(QUERY, limit=10, now=T0 + 60)
    shipped = db.recall(QUERY, limit=10, now=T0 + 60).ids
    assert len(default) == 20 and len(accurate) == 10 and accurate.rerank == CASCADE
    assert sorted(accurate.ids) == sorted(shipped)  # the very memories the default returns, no others
    slot = {m: j for j, m in enumerate(default.ids)}
    picked = np.array([slot[m] for m in accurate.ids])
    assert (np.diff(picked) > 0).all()  # in slot order
    np.testing.assert_array_equal(accurate.second_stage, default.second_stage[picked])
    want = default_reranker()(QUERY, db.memory.in_context(accurate.ids))
    np.testing.assert_allclose(accurate.final_stage, want)
    every = np.ones(len(accurate), dtype=bool)
    mixed = 0.5 * deep.masked_minmax(default.relevance[picked], every) + 0.5 * deep.masked_minmax(want, every)
    np.testing.assert_allclose(accurate.relevance, mixed)
    np.testing.assert_allclose(accurate.raw_relevance, want)  # min_relevance reads the cross-encoder's logit
    reordered = ConversationMemory(db, preset="accurate").recall(QUERY, limit=10, now=T0 + 60).ids
    assert sorted(reordered) == sorted(shipped) and reordered != shipped  # the same ten, in another order


def test_a_recall_shows_every_stage_and_filters_on_the_cross_encoders_score():
    db = Vectrix(embedder="hashing", preset="accurate")
    _notes(db)
    top = db.recall(QUERY, now=T0 + 60)
    parts = top[0].metadata["_vx_scoring"]
    assert parts["rerank"] == CASCADE and db.memory.pipeline()["rerank"] == CASCADE
    assert parts["second_stage"] is not None and parts["fused"] is not None and parts["first_stage"] is not None
    pool = db.memory.candidate_pool(QUERY, limit=10, now=T0 + 60)
    floor = float(np.sort(pool.final_stage)[-3])  # the cross-encoder's third best logit
    kept = db.recall(QUERY, now=T0 + 60, min_relevance=floor)
    assert sorted(kept.ids) == sorted(i for i, s in zip(pool.ids, pool.final_stage) if s >= floor)
    assert len(kept) == 3 and all(r.metadata["_vx_scoring"]["relevance"] >= floor for r in kept)
    assert db.memory.low_relevance() == default_reranker().low_relevance  # the cross-encoder's hint


def test_each_turn_is_read_after_the_turn_before_it_in_its_session():
    db = Vectrix(embedder="hashing")
    a = db.remember_many(["Did you book the flight?", "Yes, for Tuesday.", "Great."], session="one", timestamp=T0)
    b = db.remember("Yes, for Tuesday.", session="two", timestamp=T0 + 5)
    fact = db.remember("The user flies on Tuesday.", kind="fact", timestamp=T0 + 6)
    assert db.memory.in_context([a[1], a[0], b, fact, a[2]]) == [
        "Did you book the flight?\nYes, for Tuesday.", "Did you book the flight?", "Yes, for Tuesday.",
        "The user flies on Tuesday.", "Yes, for Tuesday.\nGreat."]
    db.forget(ids=[a[0]])
    assert db.memory.in_context([a[1]]) == ["Yes, for Tuesday."]  # a forgotten turn is no context
    long = db.remember_many([" ".join(f"w{i}" for i in range(100)), "Sure."], session="three", timestamp=T0 + 7)
    tail = " ".join(f"w{i}" for i in range(100 - CONTEXT_WORDS, 100))
    assert db.memory.in_context([long[1]]) == [f"{tail}\nSure."]  # the end of a long turn, where its question sits


def test_an_accurate_replay_sweeps_exactly_as_recall(hashing_embedder, tmp_path):
    points = [{"half_life_days": 7.0, "recency_weight": 0.5, "limit": 8},
              {"half_life_days": 1.0, "recency_weight": 1.0, "limit": 5},
              {"half_life_days": 60.0, "recency_weight": 0.0, "limit": 3}]

    def on_probe(mem, ev, now):
        return [ConversationMemory(mem.db, preset="accurate", half_life_days=p["half_life_days"],
                                   recency_weight=p["recency_weight"]).recall(
            ev.query, session=ev.session, limit=p["limit"], now=now).ids for p in points]

    rep = replay(generate("knowledge_update"), {"preset": "accurate", "pool_limit": 8}, embedder=hashing_embedder,
                 on_probe=on_probe, cache=False)
    assert rep.rerank == CASCADE and rep.cascade and rep.floors == (240, 120)
    saved = tmp_path / "accurate.npz"
    rep.save(saved)
    back = Replay.load(saved)
    for j, p in enumerate(points):
        assert rankings(rep, **p) == rankings(back, **p) == [e[j] for e in rep.extras], p
    with pytest.raises(ValueError, match="accurate preset's cross-encoder"):
        sweep(rep, {"hybrid_weight": [0.2, 0.5]})


def test_another_policy_picks_the_top_the_cross_encoder_reorders_alike_in_replay_and_sweep(hashing_embedder):
    rep = replay(generate("knowledge_update"), {"preset": "accurate"}, embedder=hashing_embedder,
                 policy="multiplicative", cache=False)
    assert rep.cascade and rep.meta["policy"] == "multiplicative"
    ranked = [p["ranked_ids"] for p in rep.probes]
    assert ranked == rankings(rep, "multiplicative")
    assert ranked != [p["recalled_ids"] for p in rep.probes]  # its own top, not the blend's
