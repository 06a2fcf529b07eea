"""The match probability: a calibrated chance that a recall found anything relevant, absurd queries refused.

The default pipeline's tests ask for bge-small by name (the suite runs on the hashing embedder).
"""

import math

import numpy as np
import pytest

from vxmem import ConversationMemory, Vectrix
from vxmem.memory.confidence import (
    CALIBRATIONS,
    FEATURES,
    MATCH_THRESHOLD,
    Calibration,
    match_probability,
    query_flaw,
    score_features,
)
from vxmem.ranking.pool import CandidatePool
from vxmem.workbench import views
from vxmem.workbench.synth import SCENARIOS, generate
from vxmem.workbench.synth.timeline import UNANSWERABLE

from helpers import T0

FACTS = ["I live in Lisbon, in a flat near the river.", "The kids want pizza again tonight.",
         "I signed up for a pottery class on Tuesdays.", "Did you watch the match yesterday?",
         "My new job at the bakery starts at six in the morning.", "Ha, that is early!",
         "My dog is called Miso and he hates the rain."]
ABSURD = ["!!!???", "   ", "x" * 5000, "ab" * 2000, "lol " * 300]


@pytest.fixture(scope="module")
def bge():
    db = Vectrix(embedder="bge-small")
    for i, t in enumerate(FACTS):
        db.remember(t, session="me", timestamp=T0 + 60 * i)
    yield db
    db.close()


@pytest.mark.parametrize("query", ABSURD)
def test_an_absurd_query_has_a_flaw(query):
    assert query_flaw(query)


@pytest.mark.parametrize("query", ["Where do I live?", "dog's name", "When does the bakery job start, 6am?", "ok"])
def test_a_plain_question_has_no_flaw(query):
    assert query_flaw(query) is None


@pytest.mark.parametrize("preset", ["fast", "default", "accurate"])
@pytest.mark.parametrize("query", ABSURD[:1] + ABSURD[2:4])
def test_absurd_queries_are_never_scored_as_matches(bge, preset, query):
    res = bge.recall(query, session="me", now=T0 + 86400, preset=preset)
    assert bge.memory.match_probability(res) == 0.0


def test_no_results_is_probability_zero(bge):
    res = bge.recall("Where do I live?", session="nobody", now=T0 + 86400)
    assert len(res) == 0 and bge.memory.match_probability(res) == 0.0


@pytest.mark.parametrize("preset", ["fast", "default", "accurate"])
def test_an_answered_question_scores_above_the_threshold_and_a_never_mentioned_one_below(bge, preset):
    mem = ConversationMemory(bge, preset=preset)
    yes = mem.match_probability(mem.recall("Which city do I live in?", session="me", now=T0 + 86400))
    no = mem.match_probability(mem.recall("What is my passport number?", session="me", now=T0 + 86400))
    assert yes is not None and no is not None
    assert yes > no and no < MATCH_THRESHOLD
    if preset == "accurate":  # on a seven-turn chat only the cross-encoder clears the threshold with room
        assert yes >= MATCH_THRESHOLD


def test_the_wording_of_an_answered_question_does_not_flip_it_below_a_never_mentioned_one(bge):
    mem = bge.memory
    never = mem.match_probability(mem.recall("What is my passport number?", session="me", now=T0 + 86400))
    for q in ("Where does the user live?", "Where do I live?", "What city is home for me?"):
        assert mem.match_probability(mem.recall(q, session="me", now=T0 + 86400)) > never, q


def test_a_pool_and_its_results_are_judged_alike(bge):
    mem = bge.memory
    res = mem.recall("What is my dog called?", session="me", now=T0 + 86400)
    pool = mem.candidate_pool("What is my dog called?", session="me", now=T0 + 86400)
    assert score_features(pool)["best"] == pytest.approx(score_features(res)["best"])
    assert (mem.match_probability(pool) >= MATCH_THRESHOLD) == (mem.match_probability(res) >= MATCH_THRESHOLD)


def _reranked_pool(scores, limit=4):
    """A hand-made pool reranked by the default's late interaction: one slot per score."""
    n = len(scores)
    return CandidatePool(relevance=np.asarray(scores, dtype=float), ts=np.arange(n, dtype=float), age_days=np.zeros(n),
                         feedback_signs=np.zeros((n, 0)), feedback_ages=np.zeros((n, 0)), tokens=np.full(n, 5),
                         dense=np.full(n, 0.7), lexical=np.full(n, 2.0), limit=limit, mode="hybrid",
                         first_stage=np.full(n, 0.5), rerank="answerai-colbert-small-v1-int8")


def test_lead_is_how_far_the_best_stands_above_the_median_of_the_limit_best():
    # the limit's four best are 0.9, 0.5, 0.4, 0.3 (median 0.45); the two below the limit do not count
    f = score_features(_reranked_pool([0.3, 0.9, 0.5, 0.4, 0.0, -1.0]))
    assert f["best"] == pytest.approx(0.9) and f["gap"] == pytest.approx(0.4)
    assert f["lead"] == pytest.approx(0.45)
    assert score_features(_reranked_pool([0.9]))["lead"] == 0.0


def test_a_hit_that_stands_out_is_likelier_a_match_than_the_best_of_a_crowd():
    # same best, gap, cosine and BM25: only the rest of the results differ
    alone = _reranked_pool([0.6, 0.5, 0.2, 0.1])
    crowd = _reranked_pool([0.6, 0.5, 0.5, 0.5])
    fa, fc = score_features(alone), score_features(crowd)
    same = ("best", "gap", "dense", "lexical")
    assert [fa[k] for k in same] == pytest.approx([fc[k] for k in same])
    assert fa["lead"] > fc["lead"]
    bge = "bge-small-en-v1.5-int8"
    assert match_probability(alone, embedder=bge) > match_probability(crowd, embedder=bge)


def test_every_shipped_calibration_is_a_probability_and_monotone_in_the_best_score():
    assert CALIBRATIONS, "no fitted calibration shipped"
    rng = np.random.default_rng(0)
    for key, cal in CALIBRATIONS.items():
        assert len(cal.weights) == len(FEATURES), key
        best = FEATURES.index("best")
        for _ in range(50):
            x = rng.normal(0.5, 2.0, len(FEATURES))
            p = [cal.probability([*x[:best], b, *x[best + 1:]]) for b in np.linspace(-5, 5, 11)]
            assert all(0.0 <= v <= 1.0 for v in p)
            step = np.diff(p)
            assert (step >= 0).all() if cal.weights[best] >= 0 else (step <= 0).all(), key


def test_a_calibration_is_the_logistic_of_its_linear_score():
    cal = Calibration(-1.0, (2.0, 0.0, 0.0, 0.0))
    assert cal.probability([0.5, 9.0, 9.0, 9.0]) == pytest.approx(0.5)
    assert cal.probability([float("nan"), 0, 0, 0]) == pytest.approx(1 / (1 + math.e))


def test_a_pipeline_without_a_calibration_says_none():
    res = Vectrix(embedder="hashing").recall("anything", mode="lexical")
    assert match_probability(res, embedder="hashing-char35-262144-384-s20240601") in (None, 0.0)


def test_every_scenario_ends_with_questions_it_never_answers():
    for name in SCENARIOS:
        probes = generate(name).probes
        never = [p for p in probes if p.category == UNANSWERABLE]
        assert len(never) == 4 and all(not p.relevant for p in never), name
        assert probes[-4:] == never, name


def test_the_note_warns_below_the_threshold_whatever_the_raw_score():
    level, text = views.relevance_note(4.54, 0.0, "hybrid", "ms-marco", probability=0.02)
    assert level == "warning" and "2%" in text and "4.540" in text
    level, text = views.relevance_note(1.0, 0.0, "hybrid", "ms-marco", probability=0.9)
    assert level == "caption" and "90%" in text
    # below the pipeline's own noise floor the note warns whatever the fit says
    level, text = views.relevance_note(-1.0, 0.0, "hybrid", "ms-marco", probability=0.9)
    assert level == "warning" and "90%" in text and "-1.000" in text
