"""How likely a recall found anything relevant: a calibrated probability from the recall's own scores.

``relevance_norm`` rescales every pool to 0-1, so the best result shows 1.0 however little
matches, and a raw score alone moves with wording ("the user" vs "I"). :func:`match_probability`
reads the scores a recall already produced (the best raw score of its last stage, its gap to
the second best and its lead over the results' median, the first stage's best dense cosine and
best BM25) and maps them through a logistic regression fitted, for each pipeline, on questions
the conversation answers and questions about things it never mentions (the ``"unanswerable"``
probes of the shipped datasets and the synthetic scenarios; LoCoMo questions when measured).
The target is "a memory the question needs is among the results", so a question whose answer
the recall missed counts as unmatched too. ``benchmarks/bench_confidence.py`` refits the
coefficients below and prints precision and recall at :data:`MATCH_THRESHOLD` on questions
held out from the fit.

Absurd queries never score as matches: a query with no word once tokenised (``"!!!???"``) or
made of one repeated character or word (``"xxxx..."``) gets probability 0, and
:func:`query_flaw` says why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.keys import K_SCORING
from ..ranking.pool import CandidatePool

__all__ = ["FEATURES", "MATCH_THRESHOLD", "Calibration", "CALIBRATIONS", "query_flaw", "score_features",
           "pipeline_key", "calibration_for", "match_probability"]

# What the probability is computed from, in this order (see score_features()).
FEATURES = ("best", "gap", "dense", "lexical", "lead")
# Below this probability the dashboard warns that nothing relevant may have been found.
MATCH_THRESHOLD = 0.35

_WORD = re.compile(r"\w+")
_RUN = re.compile(r"(.)\1{11,}", re.DOTALL)  # one character twelve times in a row or more


@dataclass(frozen=True)
class Calibration:
    """One pipeline's logistic regression: ``p = 1 / (1 + exp(-(intercept + weights . x)))``
    over :data:`FEATURES` (a weight of 0 leaves a feature out)."""

    intercept: float
    weights: tuple[float, ...]
    fitted_on: str = ""

    def probability(self, x: Sequence[float]) -> float:
        """The calibrated probability of the feature vector ``x`` (NaN features count as 0)."""
        z = self.intercept + sum(w * (0.0 if math.isnan(v) else v) for w, v in zip(self.weights, x) if w)
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


# Keyed by (reranker name or None, embedder name or None when the stage's score does not depend on it).
# Refit with: .venv/bin/python -m benchmarks.bench_confidence --locomo PATH/locomo10.json --write
# Fitted on 857 recalls each (the synthetic scenarios at seeds 1-3 and LoCoMo conv-26 with questions it
# never answers), checked on 353 held out (the shipped datasets and LoCoMo conv-30): docs/BENCHMARKS.md.
_BGE = "bge-small-en-v1.5-int8"
CALIBRATIONS: dict[tuple[str | None, str | None], Calibration] = {
    (None, _BGE): Calibration(-6.2864, (3.7421, 1.582, 3.7421, 0.3964, 6.7673), "fast"),
    ("answerai-colbert-small-v1-int8", _BGE): Calibration(-6.8091, (2.6764, 2.056, 7.1063, 0.4509, 5.3588),
                                                          "default"),
    ("answerai-colbert-small-v1-int8 > ms-marco-MiniLM-L-12-v2-int8", _BGE): Calibration(
        -4.7219, (-0.0002, 0.1771, 3.1279, 0.0763, 0.5359), "accurate"),
    (None, "hashing-char35-262144-384-s20240601"): Calibration(-1.0029, (-1.0784, 1.6599, -1.0784, 0.5951, 6.4232),
                                                               "hashing, no second stage"),
}


def query_flaw(query: Any) -> str | None:
    """Why ``query`` cannot match anything (None: nothing wrong): no word once tokenised, one
    character repeated a dozen times or more, a long word of two or three characters ("abab..."),
    or a few words said over and over."""
    if not isinstance(query, str):
        return None
    words = _WORD.findall(query.lower())
    if not words:
        return "the query has no words to match once tokenised"
    if _RUN.search(query):
        return "the query repeats one character a dozen times or more"
    if any(len(w) >= 30 and len(set(w)) <= 3 for w in words):
        return "the query is a long word of two or three characters over and over"
    if len(words) >= 8 and len(set(words)) * 4 <= len(words):
        return "the query repeats the same few words"
    return None


def pipeline_key(rerank: str | None, embedder: str | None) -> tuple[str | None, str | None]:
    """The :data:`CALIBRATIONS` key of a recall reranked by ``rerank`` (None: not reranked) with
    ``embedder``: a second stage's own score is calibrated whatever the embedder, when fitted so."""
    if (rerank, None) in CALIBRATIONS:
        return rerank, None
    return rerank, embedder


def calibration_for(rerank: str | None, embedder: str | None) -> Calibration | None:
    """The fitted calibration of that pipeline, None when it has none."""
    return CALIBRATIONS.get(pipeline_key(rerank, embedder))


def _best_two(x: np.ndarray) -> tuple[float, float]:
    x = x[np.isfinite(x)]
    if not x.size:
        return float("nan"), float("nan")
    top = np.sort(x)[::-1]
    return float(top[0]), float(top[0] - top[1]) if top.size > 1 else 0.0


def _lead(x: np.ndarray, limit: int) -> float:
    """How far the best of ``x`` stands above the median of its ``limit`` best (0: one score)."""
    x = x[np.isfinite(x)]
    if not x.size:
        return float("nan")
    top = np.sort(x)[::-1][: max(limit, 1)]
    return float(top[0] - np.median(top))


def _arrays(scored: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, str | None, str, int]:
    """(raw relevance, dense, lexical, rerank, mode, limit) of a pool or of ranked results
    (their limit: how many there are)."""
    if isinstance(scored, CandidatePool):
        n = len(scored)
        nan = np.full(n, np.nan)
        dense = nan if scored.dense is None else np.asarray(scored.dense, dtype=np.float64)
        lexical = nan if scored.lexical is None else np.asarray(scored.lexical, dtype=np.float64)
        return (np.asarray(scored.raw_relevance, dtype=np.float64), dense, lexical, scored.rerank, scored.mode,
                int(scored.limit))
    parts = [r.metadata.get(K_SCORING) or {} for r in scored]

    def column(key: str) -> np.ndarray:
        return np.array([np.nan if p.get(key) is None else float(p[key]) for p in parts], dtype=np.float64)

    first = parts[0] if parts else {}
    return (column("relevance"), column("dense"), column("lexical"), first.get("rerank"), first.get("mode", "hybrid"),
            len(parts))


def score_features(scored: Any) -> dict[str, Any]:
    """The features :func:`match_probability` reads, from ranked results (``recall()``'s, with
    their ``_vx_scoring`` parts) or from a :class:`~vxmem.ranking.pool.CandidatePool`:

    ``best`` and ``gap``: the best raw score of the last stage (the reranker's, or in a recall
    without one the dense cosine) and how far it stands above the second best; ``dense``: the
    best first-stage cosine; ``lexical``: ``log1p`` of the best BM25 (0: no query word in any
    candidate); ``lead``: how far the best stands above the median of the results' scores on the
    same scale as ``best`` (of a pool: of its ``limit`` best), a hit that stands out of the
    crowd rather than a crowd of near-misses; plus ``rerank`` and ``mode``, which name the pipeline.
    """
    rel, dense, lexical, rerank, mode, limit = _arrays(scored)
    if mode == "dense":
        dense = rel
    stage = rel if rerank is not None else dense
    best, gap = _best_two(stage)
    top_dense = _best_two(dense)[0]
    top_lex = _best_two(lexical)[0]
    return {"best": best, "gap": gap, "dense": top_dense,
            "lexical": math.log1p(max(top_lex, 0.0)) if not math.isnan(top_lex) else float("nan"),
            "lead": _lead(stage, limit), "rerank": rerank, "mode": mode}


def match_probability(scored: Any, *, embedder: str | None = None, query: str | None = None) -> float | None:
    """The calibrated probability that ``scored`` (``recall()``'s results, or a candidate pool)
    holds anything relevant to its query; None for a pipeline with no fitted calibration.

    0 when there is nothing (no results) or the query is absurd (:func:`query_flaw`; the query
    is read from the results, or given). ``embedder`` names the embedder (its ``name``), which
    decides the scale of the cosines a recall without a second stage is judged by.
    """
    text = query if query is not None else getattr(scored, "query", None)
    if query_flaw(text) is not None:
        return 0.0
    if len(scored) == 0:
        return 0.0
    f = score_features(scored)
    if f["mode"] == "lexical":
        return None
    cal = calibration_for(f["rerank"], embedder)
    if cal is None:
        return None
    return cal.probability([f[k] for k in FEATURES])
