"""Recall presets: fast, default (late interaction over stored token vectors) and accurate."""

import numpy as np
import pytest

from vxmem import ConversationMemory, Vectrix
from vxmem.models.late import COLBERT_SMALL, default_late_interaction, maxsim, pack
from vxmem.models.packaged import MS_MARCO_MINILM_L12
from vxmem.ranking import scoring
from vxmem.workbench.replay.record import Replay
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import rankings
from vxmem.workbench.synth import generate

from helpers import T0

TURNS = ["I adopted a grey cat called Miso last month.", "The train to work was late again.",
         "My sister lives in Porto and teaches maths.", "We had pizza for dinner.",
         "I started learning the cello in January."]


def _late_rows(db):
    with db.engine.locked() as m:
        return db.engine.late_vectors(m.live_positions(), COLBERT_SMALL.name)


def test_each_preset_runs_its_own_second_stage_per_recall():
    db = Vectrix(embedder="hashing")
    ids = db.remember_many(TURNS, session="s", timestamp=T0)
    stages = {p: db.recall("What is my cat called?", now=T0 + 60, preset=p) for p in ("fast", "default", "accurate")}
    assert stages["fast"][0].metadata["_vx_scoring"]["rerank"] is None
    assert stages["default"][0].metadata["_vx_scoring"]["rerank"] == COLBERT_SMALL.name
    cascade = f"{COLBERT_SMALL.name} > {MS_MARCO_MINILM_L12.name}"
    assert stages["accurate"][0].metadata["_vx_scoring"]["rerank"] == cascade
    assert stages["default"][0].id == stages["accurate"][0].id == ids[0]
    assert db.recall("What is my cat called?", now=T0 + 60, preset="default", rerank=False)[0].metadata[
        "_vx_scoring"]["rerank"] is None  # rerank=False turns any preset's second stage off
    with pytest.raises(ValueError, match="unknown preset 'quick'"):
        db.recall("cat", preset="quick")


def test_token_vectors_are_stored_with_each_write_and_leave_with_their_memory():
    db = Vectrix(embedder="hashing", rerank=True)  # the default preset reranks: its writes store token vectors
    ids = db.remember_many(TURNS[:3], session="s", timestamp=T0)
    ids.append(db.remember(TURNS[3], session="s", timestamp=T0 + 1))
    rows = _late_rows(db)
    assert len(rows) == 4 and all(b is not None and len(b) % 48 == 0 for b in rows)  # 384 sign bits a token
    late = default_late_interaction()
    assert rows[0] == pack(late.tokens([TURNS[0]])[0])
    db.forget(ids=[ids[0]])
    assert db.engine.database.conn.execute("SELECT count(*) FROM vx_late").fetchone()[0] == 3
    fast = Vectrix(embedder="hashing", preset="fast")
    fast.remember(TURNS[0], session="s", timestamp=T0)
    assert _late_rows(fast) == [None]  # a memory whose recall never reads them stores none


def test_a_memory_without_stored_token_vectors_is_scored_the_same():
    stored, added = Vectrix(embedder="hashing", rerank=True), Vectrix(embedder="hashing", rerank=True)
    stored.remember_many(TURNS, session="s", timestamp=T0)
    added.remember_many(TURNS, session="s", timestamp=T0)
    with added.engine.database.conn:
        added.engine.database.conn.execute("DELETE FROM vx_late")  # as a file written without them
    a, b = (db.recall("Where does my sister live?", now=T0 + 60) for db in (stored, added))
    assert [r.text for r in a] == [r.text for r in b]
    assert [r.metadata["_vx_scoring"]["relevance"] for r in a] == [r.metadata["_vx_scoring"]["relevance"] for r in b]


def test_maxsim_is_the_mean_over_query_tokens_of_the_best_doc_token():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 384)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    docs = [rng.standard_normal((n, 384)) for n in (1, 4, 7)]
    want = [float(np.mean(np.max(q @ np.where(d >= 0, 1.0, -1.0).T / np.sqrt(384), axis=1))) for d in docs]
    np.testing.assert_allclose(maxsim(q, [pack(d) for d in docs]), want, atol=1e-3)  # an int8 query
    assert maxsim(q, []).shape == (0,)


def test_each_preset_is_a_list_of_stages_run_in_order():
    from vxmem.memory.stages import AgedFromAccess, Cascade, Deep, FloorAsking, Rerank, Smooth

    def kinds(memory, aging=()):
        return [type(s) for s in memory.second_stage(memory.request("q", now=T0)).steps(aging)]

    db = Vectrix(embedder="hashing")
    aged = AgedFromAccess(T0)
    assert kinds(ConversationMemory(db, preset="fast"), [aged]) == [Smooth, FloorAsking, AgedFromAccess]
    assert kinds(ConversationMemory(db, preset="default")) == [Deep, FloorAsking]
    assert kinds(ConversationMemory(db, preset="accurate"), [aged]) == [Deep, FloorAsking, AgedFromAccess, Cascade]
    own = ConversationMemory(db, preset="default", reranker=lambda q, texts: [0.0] * len(texts))
    assert kinds(own) == [Rerank, FloorAsking]  # a reranker of the caller's reads the classic 20
    assert kinds(ConversationMemory(db, preset="default", rerank=False)) == [FloorAsking]


def test_the_default_preset_reads_deep_and_blends_only_the_best_it_found():
    db = Vectrix(embedder="hashing", rerank=True)
    db.remember_many([f"note {i}: the meeting moved to room {i}" for i in range(150)], session="s", timestamp=T0)
    request = db.memory.request("which room is the meeting in", now=T0 + 60, limit=10)
    # it gathers 240 and scores the 120 most relevant by the neighbour-smoothed first stage
    assert db.memory.second_stage(request)[1:3] == (scoring.DEEP_POOL_FACTOR * 120, 120) == (240, 120)
    deep = db.memory.candidate_pool("which room is the meeting in", limit=10, now=T0 + 60)
    assert len(deep) == scoring.rerank_depth(10) and deep.rerank == COLBERT_SMALL.name  # and blends its best 20
    fast = ConversationMemory(db, preset="fast")
    assert fast.second_stage(request) == (None, scoring.POOL_FLOOR, scoring.RERANK_FLOOR, True, None)  # smoothed
    pool = fast.candidate_pool("which room is the meeting in", limit=10, now=T0 + 60)
    assert len(pool) == scoring.rerank_depth(10) and pool.rerank is None  # its smoothed first stage's best 20
    assert len(fast.pool_for(request, first_only=True)) < 120  # gathered: the union of two top-40 lists


def test_a_late_interaction_replay_sweeps_exactly_as_recall(hashing_embedder):
    points = [{"half_life_days": 7.0, "recency_weight": 0.5, "limit": 10},
              {"half_life_days": 1.0, "recency_weight": 1.0, "limit": 5},
              {"half_life_days": 60.0, "recency_weight": 0.0, "limit": 3},
              {"half_life_days": 7.0, "recency_weight": 0.5, "limit": 10, "hybrid_weight": 0.0},
              {"half_life_days": 3.0, "recency_weight": 0.2, "limit": 4, "hybrid_weight": 0.9}]

    def on_probe(mem, ev, now):
        return [ConversationMemory(mem.db, rerank=True, half_life_days=p["half_life_days"],
                                   recency_weight=p["recency_weight"]).recall(
            ev.query, session=ev.session, limit=p["limit"], hybrid_weight=p.get("hybrid_weight"), now=now).ids
            for p in points]

    # 140 turns, more than the 120 the first stage hands to late interaction (so its cut is replayed too),
    # and 13 probes of all four kinds; the default size (219 turns, 19 probes) proves no more at 1.5x the time
    conversation = generate("knowledge_update", facts=3, weeks=6, per_day=2)
    rep = replay(conversation, {"rerank": True, "pool_limit": 10}, embedder=hashing_embedder, on_probe=on_probe)
    assert rep.rerank == COLBERT_SMALL.name and rep.floors == (240, 120)
    assert rep.pools["asks"].any()  # turns that only ask were candidates: their floor is replayed too
    for j, p in enumerate(points):
        assert rankings(rep, **p) == [e[j] for e in rep.extras], p  # the sweep engine
        if "hybrid_weight" not in p:  # the replay's own pools
            assert rep.rank("blend", limit=p["limit"], half_life_days=p["half_life_days"],
                            recency_weight=p["recency_weight"]) == [e[j] for e in rep.extras], p


def test_a_replay_that_reranks_stores_the_token_vectors_with_each_write(hashing_embedder):
    # as a live memory that reranks does, so no probe encodes its candidates again
    def on_probe(mem, ev, now):
        return _late_rows(mem.db)

    conversation = generate("knowledge_update", facts=1, weeks=1, per_day=2)
    stored = replay(conversation, {"rerank": True}, embedder=hashing_embedder, on_probe=on_probe).extras
    assert stored and all(rows and None not in rows for rows in stored)
    plain = replay(conversation, {"rerank": False}, embedder=hashing_embedder, on_probe=on_probe).extras
    assert all(set(rows) == {None} for rows in plain)


def test_the_cli_replays_with_the_preset_it_names(tmp_path, capsys):
    from vxmem.cli import main

    saved = tmp_path / "replay.npz"
    assert main(["replay", "datasets/knowledge_update.jsonl", "--preset", "default", "--save", str(saved)]) == 0
    rep = Replay.load(saved)
    assert rep.rerank == COLBERT_SMALL.name and rep.floors == (240, 120) and rep.meta["preset"] == "default"
    assert main(["replay", "datasets/knowledge_update.jsonl", "--preset", "fast", "--save", str(saved)]) == 0
    assert Replay.load(saved).rerank is None
    assert main(["replay", "datasets/knowledge_update.jsonl", "--preset", "turbo"]) == 2
    assert "invalid choice: 'turbo'" in capsys.readouterr().err


def test_a_fast_replay_sweeps_exactly_as_recall_with_the_smoothed_first_stage(hashing_embedder):
    points = [{"half_life_days": 7.0, "recency_weight": 0.5, "limit": 10},
              {"half_life_days": 1.0, "recency_weight": 1.0, "limit": 5, "hybrid_weight": 0.2},
              {"half_life_days": 60.0, "recency_weight": 0.0, "limit": 12}]

    def on_probe(mem, ev, now):
        return [ConversationMemory(mem.db, preset="fast", half_life_days=p["half_life_days"],
                                   recency_weight=p["recency_weight"]).recall(
            ev.query, session=ev.session, limit=p["limit"], hybrid_weight=p.get("hybrid_weight"), now=now).ids
            for p in points]

    rep = replay(generate("long_thread", days=14), {"preset": "fast", "pool_limit": 12}, embedder=hashing_embedder,
                 on_probe=on_probe)
    assert rep.smoothed and rep.rerank is None
    for j, p in enumerate(points):
        assert rankings(rep, **p) == [e[j] for e in rep.extras], p


def test_the_fast_preset_lifts_a_turn_beside_a_strong_match():
    db = Vectrix(embedder="hashing")
    db.remember_many(["What should I bring to the potluck on Saturday?", "Bring the lemon tart, everyone loves it.",
                      "The weather looks fine."] + [f"unrelated chatter number {i}" for i in range(30)],
                     session="s", timestamp=T0)
    db.remember_many(["Saturday football was fun.", "My Saturday shift starts early.", "Saturday again, the market."],
                     session="other", timestamp=T0)
    plain = db.recall("potluck Saturday", now=T0 + 60, rerank=False)
    fast = db.recall("potluck Saturday", now=T0 + 60, preset="fast")
    tart = "Bring the lemon tart, everyone loves it."
    assert [r.text for r in fast].index(tart) < [r.text for r in plain].index(tart)  # the answer, beside the question
    assert fast[0].metadata["_vx_scoring"]["first_stage"] is not None
