"""Ranking policies to compare side by side over the same cached candidate pools.

Each policy turns a pool's arrays (raw ``relevance``, ``age_days``, zero-padded
``feedback_signs`` / ``feedback_ages``) and its parameters into a score per candidate;
ranking, the limit and the token budget are then the same for every policy
(:func:`vxmem.scoring.rank_order`, :func:`vxmem.scoring.fit_budget`). Parameters may be
arrays that broadcast against the pool, which is how :func:`vxmem.sweep.sweep` scores a
whole grid at once.

- ``blend`` (default): the spec's score, :func:`vxmem.scoring.score_pool`, exactly what
  ``recall()`` uses.
- ``cosine``: raw relevance only; what a plain vector store returns.
- ``multiplicative``: ``relevance * 0.5 ** (age / half_life_days)``, recency as a factor.
- ``langchain``: LangChain's ``TimeWeightedVectorStoreRetriever``,
  ``relevance + (1 - decay_rate) ** hours_passed`` (default ``decay_rate`` 0.01). LangChain
  counts hours since the memory was last *accessed*; the workbench has no access log, so
  this counts hours since it was stored.
- ``generative_agents``: Park et al. 2023, ``minmax(recency) + minmax(relevance)`` with
  recency ``recency_decay ** hours`` (0.995 per hour); importance is left out (no scorer).
- ``memorybank``: MemoryBank's Ebbinghaus retention ``exp(-t / S)`` times relevance, ``t`` in
  days and strength ``S = strength_days * (1 + useful feedback count)``: each time a memory
  proved useful it is forgotten more slowly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from . import scoring


@dataclass(frozen=True)
class Policy:
    """A named scoring rule, its sweepable parameters and their defaults."""

    name: str
    description: str
    defaults: Dict[str, float] = field(default_factory=dict)
    score_fn: Optional[Callable[..., np.ndarray]] = None

    @property
    def params(self) -> Tuple[str, ...]:
        return tuple(self.defaults)

    def score(self, pool: Mapping[str, Any], params: Mapping[str, Any], valid=None) -> np.ndarray:
        """Scores for every candidate of ``pool`` (shape ``(..., n)``) under ``params``."""
        return self.score_fn(pool, params, valid)


def _blend(pool, p, valid):
    score, _, _, _ = scoring.score_pool(
        pool["relevance"], pool["age_days"], pool["feedback_signs"], pool["feedback_ages"],
        p["half_life_days"], p["recency_weight"], p["feedback_weight"], p["feedback_half_life_days"],
        valid=valid)
    return score


def _cosine(pool, p, valid):
    return np.asarray(pool["relevance"], dtype=np.float64)


def _multiplicative(pool, p, valid):
    return np.asarray(pool["relevance"], dtype=np.float64) * scoring.decay(pool["age_days"], p["half_life_days"])


def _hours(age_days):
    return np.maximum(np.asarray(age_days, dtype=np.float64), 0.0) * 24.0


def _langchain(pool, p, valid):
    rate = np.asarray(p["decay_rate"], dtype=np.float64)
    return np.asarray(pool["relevance"], dtype=np.float64) + np.power(1.0 - rate, _hours(pool["age_days"]))


def _generative_agents(pool, p, valid):
    recency = np.power(np.asarray(p["recency_decay"], dtype=np.float64), _hours(pool["age_days"]))
    rel = np.asarray(pool["relevance"], dtype=np.float64)
    recency = np.broadcast_to(recency, np.broadcast_shapes(recency.shape, rel.shape))
    return (scoring.normalize_relevance(recency, valid=valid)
            + scoring.normalize_relevance(rel, valid=valid))


def _memorybank(pool, p, valid):
    useful = np.sum(np.asarray(pool["feedback_signs"]) > 0, axis=-1)
    strength = np.asarray(p["strength_days"], dtype=np.float64) * (1.0 + useful)
    age = np.maximum(np.asarray(pool["age_days"], dtype=np.float64), 0.0)
    return np.asarray(pool["relevance"], dtype=np.float64) * np.exp(-age / strength)


BLEND_DEFAULTS = {"half_life_days": 7.0, "recency_weight": 0.5, "feedback_weight": 0.25,
                  "feedback_half_life_days": 30.0}

POLICIES: Dict[str, Policy] = {
    "blend": Policy("blend", "relevance_norm + recency_weight * decay + feedback_weight * feedback (the spec)",
                    dict(BLEND_DEFAULTS), _blend),
    "cosine": Policy("cosine", "raw relevance only", {}, _cosine),
    "multiplicative": Policy("multiplicative", "relevance * 0.5 ** (age / half_life_days)",
                             {"half_life_days": 7.0}, _multiplicative),
    "langchain": Policy("langchain", "relevance + (1 - decay_rate) ** hours_passed (LangChain)",
                        {"decay_rate": 0.01}, _langchain),
    "generative_agents": Policy("generative_agents",
                                "minmax(recency_decay ** hours) + minmax(relevance) (Generative Agents)",
                                {"recency_decay": 0.995}, _generative_agents),
    "memorybank": Policy("memorybank", "relevance * exp(-days / (strength_days * (1 + useful))) (MemoryBank)",
                         {"strength_days": 1.0}, _memorybank),
}

# What each parameter accepts: (lower bound, lower inclusive, upper bound, upper inclusive).
_RANGES = {
    "half_life_days": (0.0, False, math.inf, False),
    "feedback_half_life_days": (0.0, False, math.inf, False),
    "recency_weight": (0.0, True, math.inf, False),
    "feedback_weight": (0.0, True, math.inf, False),
    "decay_rate": (0.0, True, 1.0, True),
    "recency_decay": (0.0, False, 1.0, True),
    "strength_days": (0.0, False, math.inf, False),
    "hybrid_weight": (0.0, True, 1.0, True),
}


def get_policy(name) -> Policy:
    """The policy called ``name`` (a :class:`Policy` passes through)."""
    if isinstance(name, Policy):
        return name
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}") from None


def check_param(name: str, value) -> float:
    """``value`` as a float after checking it is in the parameter's range."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    v = float(value)
    lo, lo_in, hi, hi_in = _RANGES.get(name, (-math.inf, True, math.inf, True))
    ok = math.isfinite(v) and (v >= lo if lo_in else v > lo) and (v <= hi if hi_in else v < hi)
    if not ok:
        lb = "[" if lo_in else "("
        rb = "]" if hi_in else ")"
        raise ValueError(f"{name} must be in {lb}{lo:g}, {hi:g}{rb}, got {value!r}")
    return v


def resolve_params(policy, given: Mapping[str, Any], base: Optional[Mapping[str, Any]] = None) -> Dict[str, float]:
    """Every parameter of ``policy``: ``given``, else ``base`` (e.g. a replay's settings), else the default."""
    pol = get_policy(policy)
    unknown = set(given) - set(pol.params)
    if unknown:
        raise ValueError(f"policy {pol.name!r} has no parameter {sorted(unknown)[0]!r}; "
                         f"its parameters: {', '.join(pol.params) or '(none)'}")
    out = {}
    for k, d in pol.defaults.items():
        v = given.get(k, (base or {}).get(k, d))
        out[k] = check_param(k, v)
    return out


def rank_pool(pool: Mapping[str, Any], policy="blend", limit: Optional[int] = None,
              token_budget: Optional[int] = None, **params) -> np.ndarray:
    """Slots of one candidate pool (as ``candidate_pool()`` returns it) that ship, best first.

    With ``policy="blend"`` and the memory's parameters this is what ``recall()`` returns
    (without ``score_gap``); other policies rank the very same candidates their own way.
    """
    pol = get_policy(policy)
    p = resolve_params(pol, params)
    n = len(pool["relevance"])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    limit = int(pool.get("limit", 10) if limit is None else limit)
    score = np.broadcast_to(pol.score(pool, p), (n,))
    top = scoring.rank_order(score, pool["ts"])[:limit]
    keep = scoring.fit_budget(np.asarray(pool["tokens"])[top], token_budget)
    return top[keep]
