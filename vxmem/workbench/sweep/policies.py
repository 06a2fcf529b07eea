"""Ranking policies to compare side by side over the same cached candidate pools.

Each policy turns a pool's arrays (raw ``relevance``, ``age_days``, zero-padded
``feedback_signs`` / ``feedback_ages``) and its parameters into a score per candidate;
ranking, the limit and the token budget are then the same for every policy
(:func:`vxmem.ranking.scoring.rank_order`, :func:`vxmem.ranking.scoring.fit_budget`). Parameters may be
arrays that broadcast against the pool, which is how :func:`vxmem.workbench.sweep.run.sweep` scores a
whole grid at once.

- ``blend`` (default): the spec's score, :func:`vxmem.ranking.scoring.score_pool`, exactly what
  ``recall()`` uses.
- ``cosine``: raw relevance only; what a plain vector store returns.
- ``multiplicative``: ``relevance * 0.5 ** (age / half_life_days)``, recency as a factor.
- ``langchain``: LangChain's ``TimeWeightedVectorStoreRetriever``,
  ``relevance + (1 - decay_rate) ** hours_passed`` (default ``decay_rate`` 0.01), hours
  since the memory was last *accessed*: returned by one of the policy's own earlier
  rankings, or else stored (``recency_from="accessed"``).
- ``generative_agents``: Park et al. 2023, ``minmax(recency) + minmax(relevance)`` with
  recency ``recency_decay ** hours`` (0.995 per hour) since the memory was last retrieved,
  like LangChain's; importance is left out (no scorer).

A policy's ``recency_from`` says what its ages count from. With ``"accessed"``, a replay's
probes are ranked in order and each probe's ages count from the last probe whose ranking
(under this policy and these parameters) returned the memory, as a live memory made with
``recency_from="accessed"`` records them (:meth:`CandidatePool.aged_from_access`); the
blend takes it from the replay's own ``recency_from`` setting.
- ``memorybank``: MemoryBank's Ebbinghaus retention ``exp(-t / S)`` times relevance, ``t`` in
  days and strength ``S = strength_days * (1 + useful feedback count)``: each time a memory
  proved useful it is forgotten more slowly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.checks import check_limit, check_number
from ...ranking import scoring
from ...ranking.blend import BLEND_BOUNDS
from ...ranking.pool import CandidatePool
from ...ranking.scoring import BLEND_DEFAULTS

Params = Mapping[str, Any]  # a policy's parameters: floats, or arrays that broadcast against the pool
ScoreFn = Callable[[CandidatePool, Params, "np.ndarray | None"], np.ndarray]


@dataclass(frozen=True)
class Policy:
    """A named scoring rule, its sweepable parameters and their defaults."""

    name: str
    description: str
    defaults: dict[str, float] = field(default_factory=dict)
    score_fn: ScoreFn | None = None
    recency_from: str = "created"

    @property
    def params(self) -> tuple[str, ...]:
        """The names of the policy's sweepable parameters."""
        return tuple(self.defaults)

    def score(self, pool: CandidatePool, params: Params, valid: np.ndarray | None = None) -> np.ndarray:
        """Scores for every candidate of ``pool`` (shape ``(..., n)``) under ``params``."""
        assert self.score_fn is not None
        return self.score_fn(pool, params, valid)


def _blend(pool: CandidatePool, p: Params, valid: np.ndarray | None) -> np.ndarray:
    score, _, _, _ = pool.blend(p["half_life_days"], p["recency_weight"], p["feedback_weight"],
                                p["feedback_half_life_days"], valid=valid)
    return score


def _relevance(pool: CandidatePool) -> np.ndarray:
    return np.asarray(pool.relevance, dtype=np.float64)


def _cosine(pool: CandidatePool, p: Params, valid: np.ndarray | None) -> np.ndarray:
    return _relevance(pool)


def _multiplicative(pool: CandidatePool, p: Params, valid: np.ndarray | None) -> np.ndarray:
    return _relevance(pool) * scoring.decay(pool.age_days, p["half_life_days"])


def _hours(age_days: np.ndarray) -> np.ndarray:
    return np.maximum(np.asarray(age_days, dtype=np.float64), 0.0) * 24.0


def _langchain(pool: CandidatePool, p: Params, valid: np.ndarray | None) -> np.ndarray:
    rate = np.asarray(p["decay_rate"], dtype=np.float64)
    return _relevance(pool) + np.power(1.0 - rate, _hours(pool.age_days))


def _generative_agents(pool: CandidatePool, p: Params, valid: np.ndarray | None) -> np.ndarray:
    recency = np.power(np.asarray(p["recency_decay"], dtype=np.float64), _hours(pool.age_days))
    rel = _relevance(pool)
    recency = np.broadcast_to(recency, np.broadcast_shapes(recency.shape, rel.shape))
    return (scoring.normalize_relevance(recency, valid=valid)
            + scoring.normalize_relevance(rel, valid=valid))


def _memorybank(pool: CandidatePool, p: Params, valid: np.ndarray | None) -> np.ndarray:
    useful = np.sum(np.asarray(pool.feedback_signs) > 0, axis=-1)
    strength = np.asarray(p["strength_days"], dtype=np.float64) * (1.0 + useful)
    age = np.maximum(np.asarray(pool.age_days, dtype=np.float64), 0.0)
    return _relevance(pool) * np.exp(-age / strength)


POLICIES: dict[str, Policy] = {
    "blend": Policy("blend", "relevance_norm + recency_weight * decay + feedback_weight * feedback (the spec)",
                    dict(BLEND_DEFAULTS), _blend),
    "cosine": Policy("cosine", "raw relevance only", {}, _cosine),
    "multiplicative": Policy("multiplicative", "relevance * 0.5 ** (age / half_life_days)",
                             {"half_life_days": BLEND_DEFAULTS["half_life_days"]}, _multiplicative),
    "langchain": Policy("langchain", "relevance + (1 - decay_rate) ** hours_passed (LangChain)",
                        {"decay_rate": 0.01}, _langchain, recency_from="accessed"),
    "generative_agents": Policy("generative_agents",
                                "minmax(recency_decay ** hours) + minmax(relevance) (Generative Agents)",
                                {"recency_decay": 0.995}, _generative_agents, recency_from="accessed"),
    "memorybank": Policy("memorybank", "relevance * exp(-days / (strength_days * (1 + useful))) (MemoryBank)",
                         {"strength_days": 1.0}, _memorybank),
}

# What each parameter accepts: (lower bound, lower open, upper bound, upper open).
_RANGES = {
    **BLEND_BOUNDS,  # the blend's own checks: a sweep point is checked as a Blend is
    "decay_rate": (0.0, False, 1.0, False),
    "recency_decay": (0.0, True, 1.0, False),
    "strength_days": (0.0, True, math.inf, True),
}


def get_policy(name: str | Policy) -> Policy:
    """The policy called ``name`` (a :class:`Policy` passes through)."""
    if isinstance(name, Policy):
        return name
    if not isinstance(name, str):
        raise TypeError(f"policy must be a policy name or a Policy, not {type(name).__name__}")
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}") from None


def check_param(name: str, value: Any) -> float:
    """``value`` as a float after checking it is in the parameter's range."""
    lo, lo_open, hi, hi_open = _RANGES.get(name, (-math.inf, False, math.inf, False))
    return check_number(value, name, lo, hi, low_open=lo_open, high_open=hi_open)


def resolve_params(policy: str | Policy, given: Params, base: Params | None = None) -> dict[str, float]:
    """Every parameter of ``policy``: ``given``, else ``base`` (e.g. a replay's settings), else the default."""
    pol = get_policy(policy)
    unknown = set(given) - set(pol.params)
    if unknown:
        raise ValueError(f"policy {pol.name!r} has no parameter {sorted(unknown)[0]!r}; "
                         f"its parameters: {', '.join(pol.params) or '(none)'}")
    return {k: check_param(k, given.get(k, (base or {}).get(k, d))) for k, d in pol.defaults.items()}


def rank_pool(pool: CandidatePool, policy: str | Policy = "blend", limit: int | None = None,
              token_budget: int | None = None, **params: Any) -> np.ndarray:
    """Slots of one candidate pool that ship, best first.

    With ``policy="blend"`` and the memory's parameters this is what ``recall()`` returns
    (without ``score_gap``); other policies rank the very same candidates their own way.

    :param pool: a :class:`~vxmem.ranking.pool.CandidatePool` (``candidate_pool()``, ``Replay.pool(i)``).
    :param policy: a policy name or :class:`Policy`.
    :param limit: how many at most (default: the pool's own limit).
    :param token_budget: the most tokens the shipped candidates may hold.
    :param params: the policy's parameters (default: its defaults).
    """
    pol = get_policy(policy)
    p = resolve_params(pol, params)
    n = len(pool)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    limit = pool.limit if limit is None else check_limit(limit)
    score = np.broadcast_to(pol.score(pool, p), (n,))
    top = pool.rank_order(score)[:limit]
    keep = scoring.fit_budget(np.asarray(pool.tokens)[top], token_budget)
    return top[keep]
