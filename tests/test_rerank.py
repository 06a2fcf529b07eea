"""The second stage and honest relevance: rerank=, reranker=, min_relevance= and the score parts.

A small deterministic stand-in reranker keeps these fast; tests/test_default_model.py runs the
real cross-encoder.
"""

import math

import numpy as np
import pytest

from vxmem import Vectrix

from helpers import DAY, T0, WordHashEmbedder


class Recording:
    """Scores a text by the query words it holds, and records what it was asked."""

    name = "overlap"

    def __init__(self, out=None):
        self.asked: list[list[str]] = []
        self.out = out

    def __call__(self, query, texts):
        self.asked.append(list(texts))
        if self.out is not None:
            return self.out(texts)
        q = set(query.lower().split())
        return np.array([len(q & set(t.lower().rstrip(".").split())) for t in texts], dtype=float)


@pytest.fixture
def memory(hashing_embedder):
    db = Vectrix(embedder=hashing_embedder)
    ids = {}
    for i in range(60):  # fresh chit-chat, then old memories that match the query better and better
        ids[f"chat{i}"] = db.remember(f"small talk number {i} about the weather", session="s", timestamp=T0 + i)
    for i in range(5):
        ids[f"old{i}"] = db.remember("the garden shed key is under the blue pot " + "pot " * i, session="s",
                                     timestamp=T0 - 90 * DAY + i)
    yield db, ids
    db.close()


def test_rerank_scores_the_most_relevant_not_the_best_blended(memory):
    db, ids = memory
    db.memory.reranker = rr = Recording()
    res = db.recall("where is the garden shed key", session="s", rerank=True, now=T0 + DAY, mode="dense")
    plain = db.recall("where is the garden shed key", session="s", limit=40, rerank=False, now=T0 + DAY,
                      mode="dense")
    by_relevance = sorted(plain, key=lambda r: -r.metadata["_vx_scoring"]["relevance"])
    assert len(rr.asked) == 1 and len(rr.asked[0]) == 20  # max(2 x limit, 20)
    assert set(rr.asked[0]) == {r.text for r in by_relevance[:20]}  # by relevance, although the blend prefers chat
    assert {ids[f"old{i}"] for i in range(5)} <= {r.id for r in res[:5]}
    top = res[0].metadata["_vx_scoring"]
    scores = rr("where is the garden shed key", rr.asked[0])
    assert top["rerank"] == "overlap" and top["relevance"] == scores.max()  # the reranker's score is the relevance
    first = {r.id: r.metadata["_vx_scoring"]["relevance"] for r in plain}
    assert all(r.metadata["_vx_scoring"]["first_stage"] == pytest.approx(first[r.id]) for r in res)


def test_the_rerank_depth_grows_with_the_limit(memory):
    db, _ = memory
    db.memory.reranker = rr = Recording()
    db.recall("weather", session="s", limit=15, rerank=True, now=T0 + DAY)
    assert len(rr.asked[-1]) == 30


def test_without_a_rerank_the_score_parts_say_so(memory):
    db, _ = memory
    parts = db.recall("weather", session="s", now=T0 + DAY)[0].metadata["_vx_scoring"]
    assert parts["rerank"] is None and parts["first_stage"] is None and parts["mode"] == "hybrid"
    assert {"dense", "lexical", "hybrid_weight"} <= set(parts)


@pytest.mark.parametrize("out, error, match", [
    (lambda texts: [1.0] * (len(texts) - 1), ValueError, "returned 19 scores for 20 texts"),
    (lambda texts: [math.nan] * len(texts), ValueError, "non-finite"),
    (lambda texts: ["high"] * len(texts), TypeError, "array of numbers"),
])
def test_a_reranker_that_returns_nonsense_is_a_clear_error(memory, out, error, match):
    db, _ = memory
    db.memory.reranker = Recording(out)
    with pytest.raises(error, match=match):
        db.recall("weather", session="s", rerank=True, now=T0 + DAY)


@pytest.mark.parametrize("mode, part", [("dense", "relevance"), ("lexical", "relevance"), ("hybrid", "dense")])
def test_min_relevance_drops_candidates_below_the_raw_relevance(memory, mode, part):
    db, _ = memory
    every = db.recall("garden shed key", session="s", limit=40, now=T0 + DAY, mode=mode)
    raw = sorted(r.metadata["_vx_scoring"][part] for r in every)
    floor = raw[len(raw) // 2]
    kept = db.recall("garden shed key", session="s", limit=40, now=T0 + DAY, mode=mode, min_relevance=floor)
    assert 0 < len(kept) < len(every)
    assert all(r.metadata["_vx_scoring"][part] >= floor for r in kept)
    assert {r.id for r in kept} == {r.id for r in every if r.metadata["_vx_scoring"][part] >= floor}


def test_min_relevance_on_a_reranked_pool_is_on_the_rerankers_scale(memory):
    db, ids = memory
    db.memory.reranker = Recording()
    kept = db.recall("where is the garden shed key", session="s", rerank=True, now=T0 + DAY, min_relevance=3)
    assert {r.id for r in kept} == {ids[f"old{i}"] for i in range(5)}
    assert len(db.recall("where is the garden shed key", session="s", rerank=True, now=T0 + DAY,
                         min_relevance=100)) == 0


def test_a_memory_wide_min_relevance_is_recalls_default(hashing_embedder):
    db = Vectrix(embedder=hashing_embedder, min_relevance=0.99)
    db.remember("alpha beta gamma", session="s", timestamp=T0)
    db.remember("something else entirely", session="s", timestamp=T0)
    assert [r.text for r in db.recall("alpha beta gamma", session="s", now=T0, mode="dense")] == ["alpha beta gamma"]
    assert len(db.recall("alpha beta gamma", session="s", now=T0, mode="dense", min_relevance=-1)) == 2


@pytest.mark.parametrize("bad, error", [("0.5", TypeError), (math.nan, ValueError), (True, TypeError)])
def test_a_bad_min_relevance_is_refused(bad, error):
    db = Vectrix(embedder=WordHashEmbedder())
    with pytest.raises(error, match="min_relevance"):
        db.recall("x", min_relevance=bad)
    with pytest.raises(error, match="min_relevance"):
        Vectrix(embedder=WordHashEmbedder(), min_relevance=bad)


def test_context_passes_rerank_and_min_relevance_to_recall(memory):
    db, ids = memory
    db.memory.reranker = rr = Recording()
    block = db.context("where is the garden shed key", session="s", recent_turns=0, now=T0 + DAY, rerank=True,
                       min_relevance=3)
    assert rr.asked and {r.id for r in block.recalled} == {ids[f"old{i}"] for i in range(5)}
