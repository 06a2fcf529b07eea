"""Memories that only ask enter the pool at its floor, in recall, a replay and a sweep alike."""

import numpy as np
import pytest

from vxmem import ConversationMemory
from vxmem.ranking.asking import asking_mask, asks_only, at_floor
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import rankings
from vxmem.workbench.synth import generate

from helpers import T0

DAY = 86400.0


@pytest.mark.parametrize("text, asks", [
    ("Which city has the best museums in Europe?", True),
    ("Can you exercise some patience with my typos?", True),
    ("Really? Are you sure?", True),
    ('He asked "why not?"', True),
    ("I moved to Porto last week. Have you been?", False),
    ("I live in Krakow.", False),
    ("What a day!", False),
    ("", False),
    ("   ", False),
])
def test_a_text_only_asks_when_every_sentence_is_a_question(text, asks):
    assert asks_only(text) is asks


def test_the_floor_is_the_least_relevance_of_the_valid_slots_only():
    rel = np.array([[0.9, 0.5, 0.2, 0.7], [0.1, 0.8, 0.3, 0.4]])
    asks = np.array([[True, False, False, False], [False, True, False, False]])
    valid = np.array([[True, True, False, True], [True, True, True, True]])
    out = at_floor(rel, asks, valid)
    assert out.tolist() == [[0.5, 0.5, 0.2, 0.7], [0.1, 0.1, 0.3, 0.4]]
    assert at_floor(rel, None).tolist() == rel.tolist()
    assert at_floor(rel, np.full(rel.shape, np.nan)).tolist() == rel.tolist()  # recorded without it: none ask
    assert asking_mask(["Why?", "Because."]).tolist() == [True, False]


def test_a_fresh_question_no_longer_buries_an_old_fact(make_db):
    db = make_db(embedder="hashing")
    fact = db.remember("I live in Krakow with my two cats.", session="s", timestamp=T0)
    for i, text in enumerate(["The weather was grey all week.", "I had pasta for lunch.", "The bus was late."]):
        db.remember(text, session="s", timestamp=T0 + (i + 1) * DAY)
    question = db.remember("Which city do you think has the best museums, and where should I live?",
                           session="s", timestamp=T0 + 30 * DAY)
    res = ConversationMemory(db).recall("Which city do I live in?", session="s", now=T0 + 31 * DAY, rerank=False)
    parts = {r.id: r.metadata["_vx_scoring"] for r in res}
    assert res.ids[0] == fact
    assert parts[question]["asks_only"] is True and parts[fact]["asks_only"] is False
    assert parts[question]["relevance_norm"] == 0.0  # at the pool's floor, whatever its words matched


# The deep stage's replay (late interaction) is checked alike in test_presets, on a shorter conversation.
@pytest.mark.parametrize("preset, settings", [("fast", {"preset": "fast"}), ("hybrid", {"rerank": False})])
def test_a_replay_with_questions_ranks_and_sweeps_exactly_as_recall(hashing_embedder, preset, settings):
    points = [{"half_life_days": 7.0, "recency_weight": 0.5, "limit": 10},
              {"half_life_days": 1.0, "recency_weight": 1.0, "limit": 3, "hybrid_weight": 0.2},
              {"half_life_days": 60.0, "recency_weight": 0.0, "limit": 12}]

    def on_probe(mem, ev, now):
        return [ConversationMemory(mem.db, half_life_days=p["half_life_days"], recency_weight=p["recency_weight"],
                                   **settings).recall(ev.query, session=ev.session, limit=p["limit"],
                                                      hybrid_weight=p.get("hybrid_weight"), now=now).ids
                for p in points]

    rep = replay(generate("plain_chat", rounds=1), {**settings, "pool_limit": 12}, embedder=hashing_embedder,
                 on_probe=on_probe)
    assert rep.pools["asks"].any()  # questions were among the candidates, so the floor was replayed
    for j, p in enumerate(points):
        assert rankings(rep, **p) == [e[j] for e in rep.extras], p  # the sweep engine
        if "hybrid_weight" not in p:  # the replay's own pools
            assert rep.rank("blend", limit=p["limit"], half_life_days=p["half_life_days"],
                            recency_weight=p["recency_weight"]) == [e[j] for e in rep.extras], p
