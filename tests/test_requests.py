"""A recall as typed values: the request (what is asked) and the blend (how it is ranked)."""

import dataclasses

import pytest

from vxmem import Blend, RecallRequest, Vectrix

from helpers import DAY, T0, WordHashEmbedder


def _memory(**settings):
    db = Vectrix(embedder=WordHashEmbedder(), **settings)
    db.remember("I moved to Lisbon last spring", session="s", timestamp=T0 - 40 * DAY)
    db.remember("we talked about moving plans today", session="s", timestamp=T0 - DAY)
    db.remember("my cat is called Miso", session="s", timestamp=T0 - 2 * DAY)
    return db


def test_a_blend_is_checked_when_made():
    with pytest.raises(ValueError, match="half_life_days"):
        Blend(half_life_days=0)
    with pytest.raises(ValueError, match="hybrid_weight"):
        Blend(hybrid_weight=1.5)
    with pytest.raises(TypeError, match="recency_weight"):
        Blend(recency_weight="0.5")


def test_a_blend_is_frozen_and_replace_checks_again():
    blend = Blend()
    with pytest.raises(dataclasses.FrozenInstanceError):
        blend.half_life_days = 3.0
    assert blend.replace(half_life_days=3).half_life_days == 3.0
    with pytest.raises(ValueError, match="feedback_weight"):
        blend.replace(feedback_weight=-1)


def test_a_blend_of_settings_takes_its_own_keys_and_leaves_the_rest():
    blend = Blend.of({"half_life_days": 2, "limit": 5, "hybrid_weight": None}, base=Blend(recency_weight=0.1))
    assert blend == Blend(half_life_days=2.0, recency_weight=0.1)


def test_the_memorys_blend_holds_its_settings_and_an_attribute_replaces_it():
    db = Vectrix(embedder=WordHashEmbedder(), half_life_days=3, hybrid_weight=0.7)
    assert db.memory.blend == Blend(half_life_days=3.0, hybrid_weight=0.7)
    db.memory.recency_weight = 0.0
    assert db.memory.blend.recency_weight == 0.0 and db.memory.settings["recency_weight"] == 0.0
    with pytest.raises(ValueError, match="recency_weight"):
        db.memory.recency_weight = -1
    assert db.memory.recency_weight == 0.0


def test_a_request_keeps_its_arguments_in_canonical_form():
    req = RecallRequest("where do I live", kinds=["fact", "turn", "fact"], exclude_ids=["a"], now=T0)
    assert req.kinds == ("fact", "turn") and req.exclude_ids == ("a",) and req.now == T0
    assert req.search_mode == "hybrid"
    with pytest.raises(ValueError, match="limit"):
        req.replace(limit=0)


@pytest.mark.parametrize("bad, error", [({"limit": 0}, ValueError), ({"kinds": ["memo"]}, ValueError),
                                        ({"mode": "fuzzy"}, ValueError), ({"score_gap": -1.0}, ValueError),
                                        ({"filter": {"_vx_kind": "turn"}}, ValueError), ({"blend": {}}, TypeError),
                                        ({"user": 3}, TypeError)])
def test_a_bad_request_is_refused_when_made(bad, error):
    with pytest.raises(error):
        RecallRequest("where do I live", now=T0, **bad)


def test_running_a_request_is_recall_with_the_same_arguments():
    db = _memory()
    args = {"session": "s", "limit": 2, "now": T0, "kinds": ("turn",)}
    request = RecallRequest("where did I move", **args)
    by_request = db.memory.recall_request(request)
    by_args = db.recall("where did I move", **args)
    assert by_request.ids == by_args.ids and len(by_request) == 2
    assert [r.score for r in by_request] == [r.score for r in by_args]


def test_a_requests_own_blend_ranks_instead_of_the_memorys():
    db = _memory()
    query = "I moved to Lisbon"
    fresh_first = RecallRequest(query, session="s", now=T0, blend=Blend(recency_weight=50.0))
    relevance_only = RecallRequest(query, session="s", now=T0, blend=Blend(recency_weight=0.0))
    assert db.memory.recall_request(fresh_first)[0].text == "we talked about moving plans today"
    assert db.memory.recall_request(relevance_only)[0].text == "I moved to Lisbon last spring"
    assert db.memory.blend == Blend()  # the memory's own is unchanged


def test_recall_hybrid_weight_is_the_memorys_blend_with_that_weight():
    db = _memory(half_life_days=2)
    request = db.memory.request("moving", hybrid_weight=0.9, session="s", now=T0)
    assert request.blend == Blend(half_life_days=2.0, hybrid_weight=0.9)


def test_a_bad_argument_is_refused_before_the_query_is_embedded():
    calls = []

    class Spy(WordHashEmbedder):
        def __call__(self, texts):
            calls.append(list(texts))
            return super().__call__(texts)

    db = Vectrix(embedder=Spy())
    db.remember("hello there", session="s", timestamp=T0)
    calls.clear()
    with pytest.raises(ValueError, match="limit"):
        db.recall("hello", session="s", limit=0, now=T0)
    assert calls == []
