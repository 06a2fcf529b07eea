"""What a replay records of a recall's later stages, so a sweep can rank its pools exactly as
``recall()`` does for any limit up to the replay's ``pool_limit``.

:func:`read_scores`: the second stage's score of every candidate some limit would have it
read. :func:`kept_scores`: in a cascade (the accurate preset), the final stage's score of
every candidate some limit's deep stage keeps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...models.rerank import Reranker, rerank_scores
from ...ranking import deep, scoring
from ...ranking.pool import CandidatePool

Texts = Callable[[list[int]], list[str]]  # the texts the stage reads, of some of the pool's slots

__all__ = ["read_scores", "kept_scores"]


def _searched(pool: CandidatePool, floors: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(limits, valid, first)``: every limit up to the pool's, as a column, and which slots
    the pool each one gathers holds, with their first-stage relevance."""
    limits = np.arange(1, pool.limit + 1)[:, None]
    valid, first = scoring.searched_slots(pool.dense, pool.lexical, pool.relevance, len(pool), limits,
                                          pool.mode == "hybrid", pool.hybrid_weight, floors[0])
    return limits, valid, first


def read_scores(pool: CandidatePool, floors: tuple[int, int], scores: Callable[[list[int]], np.ndarray]) -> np.ndarray:
    """The reranker's score (``scores`` of some of the pool's slots) of each candidate some
    recall up to the pool's limit would rerank (NaN for the others). In a hybrid pool, or
    for a deep stage, that is every candidate: which ones a limit reranks depends on the
    hybrid weight, and the pool a limit gathers does not, so scoring them all lets a sweep
    vary the weight of a reranked replay too."""
    limits, valid, first = _searched(pool, floors)
    deep_stage = floors[1] > scoring.RERANK_FLOOR  # reads by the smoothed first stage: every candidate may count
    reranked = valid if pool.mode == "hybrid" or deep_stage else scoring.rerank_slots(first, pool.ts, valid, limits,
                                                                                      floors[1])
    slots = np.flatnonzero(reranked.any(axis=0))
    out = np.full(len(pool), np.nan)
    out[slots] = scores(slots.tolist())
    return out


def kept_scores(pool: CandidatePool, query: str, floors: tuple[int, int], read: np.ndarray, final: Reranker,
                texts: Texts) -> np.ndarray:
    """A cascade's final score of each candidate the deep stage keeps at some limit up to the
    pool's, at the pool's own hybrid weight (NaN for the others), given the stage's ``read``
    scores (:func:`read_scores`). A sweep that changes which candidates are kept (another
    hybrid weight) finds NaN there and says so."""
    limits, valid, first = _searched(pool, floors)
    prev, nxt = pool.neighbours()
    smoothed, reading = deep.read_slots(first, pool.ts, valid, prev, nxt, limits, floors[1])
    stage = np.where(reading, np.nan_to_num(read), 0.0)
    _, kept = deep.fused_slots(stage, smoothed, pool.ts, reading, prev, nxt, limits)
    slots = np.flatnonzero(kept.any(axis=0))
    out = np.full(len(pool), np.nan)
    out[slots] = rerank_scores(final, query, texts(slots.tolist()))
    return out
