"""The candidate pool: the one scoring path's contract.

``recall()`` does not rank the whole collection: it takes the most relevant eligible
memories (a pool of ``max(4 x limit, 40)``), then blends relevance with recency and
feedback over that pool. A :class:`CandidatePool` is that pool with everything ranking
needs, as arrays. ``ConversationMemory.candidate_pool()`` makes one; ``recall()`` ranks it;
a replay labels and caches one per probe (``Replay.pool(i)`` gives it back as a
:class:`LabelledPool`); :mod:`vxmem.workbench.sweep.policies`
and :mod:`vxmem.workbench.sweep.run` re-rank cached pools for other parameters. All of them score it
through :meth:`CandidatePool.blend`, that is :func:`vxmem.ranking.scoring.score_pool`, so a sweep
point ranks exactly as ``recall()`` with those parameters would have.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, Self

import numpy as np

from ..core.clock import DAY
from . import deep, scoring
from .asking import at_floor


@dataclass
class CandidatePool:
    """One recall's candidates, slot by slot (arrays along the last axis).

    The arrays may also carry leading batch axes, as the sweep engine stacks the pools of
    many probes (padded; its ``valid`` mask marks the real slots); then the per-slot lists
    (``ids``, ``kinds``, ``sessions``) are left empty.

    :param relevance: the search mode's raw score: cosine (dense), BM25 (lexical) or the
        fused hybrid relevance (see :func:`vxmem.ranking.scoring.fuse_relevance`).
    :param ts: when each memory was stored (epoch seconds); ties rank the newer first.
    :param age_days: ``(now - ts) / DAY``; in a pool aged from access (``recency_from``
        ``"accessed"``), ``(now - max(ts, last access before now)) / DAY``.
    :param feedback_signs: +1 / -1 per recorded outcome, zero-padded, shape (..., n, events).
    :param feedback_ages: how many days ago each outcome was recorded, same shape.
    :param tokens: each memory's token count (for the budget).
    :param dense: raw cosines and ``lexical`` raw BM25 (NaN where the mode did not compute
        one), so a hybrid pool can be fused again with another weight without searching
        (None in a sweep's batch, which fuses before it builds the pool).
    :param ids: memory ids; ``kinds`` and ``sessions`` their kind and session.
    :param limit: the recall's limit; ``now`` its moment; ``mode`` its search mode and
        ``hybrid_weight`` the weight its hybrid relevance was fused with.
    :param first_stage: in a reranked pool, each slot's relevance before the rerank (the
        mode's score), while ``relevance`` holds the reranker's score and ``rerank`` the
        reranker's name; None in a pool that was not reranked.
    :param second_stage: in a pool a deep second stage (see :mod:`vxmem.ranking.deep`) read, its
        own score of each slot, before the fusion that made ``relevance``; None otherwise.
    :param final_stage: in a cascade's pool, the final stage's own score of each slot (the
        cross-encoder's), before the mix with the fused score that made ``relevance``.
    :param neighbour_key: each slot's :func:`~vxmem.ranking.deep.neighbour_keys` (NaN: not a
        numbered turn), which tells a deep stage which candidates are neighbouring turns.
    :param positions: mirror positions, valid only under the collection lock the pool was
        made in (None for a cached pool).
    :param recency_from: what ``age_days`` counts from: ``"created"`` or ``"accessed"``.
    :param asks: whether each memory only asks (see :mod:`vxmem.ranking.asking`): after the
        second stage, :meth:`floored` puts its relevance at the pool's floor (None: unknown, none does).
    """

    relevance: np.ndarray
    ts: np.ndarray
    age_days: np.ndarray
    feedback_signs: np.ndarray
    feedback_ages: np.ndarray
    tokens: np.ndarray
    dense: np.ndarray | None = None
    lexical: np.ndarray | None = None
    ids: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    sessions: list[str | None] = field(default_factory=list)
    limit: int = 10
    now: float = float("nan")
    mode: str = "dense"
    hybrid_weight: float = scoring.HYBRID_WEIGHT
    first_stage: np.ndarray | None = None
    rerank: str | None = None
    second_stage: np.ndarray | None = None
    final_stage: np.ndarray | None = None
    neighbour_key: np.ndarray | None = None
    positions: np.ndarray | None = None
    recency_from: str = "created"
    asks: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.relevance.shape[-1]) if self.relevance.ndim else 0

    @property
    def raw_relevance(self) -> np.ndarray:
        """Each slot's relevance on its last stage's own scale: a cascade's final score, else a
        deep second stage's (their ``relevance`` is a fusion, which has no absolute scale),
        else ``relevance``."""
        if self.final_stage is not None:
            return self.final_stage
        return self.relevance if self.second_stage is None else self.second_stage

    def blend(self, half_life_days: float | np.ndarray, recency_weight: float | np.ndarray,
              feedback_weight: float | np.ndarray, feedback_half_life_days: float | np.ndarray,
              valid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The spec's score of every slot: ``(score, relevance_norm, recency, feedback)``.

        The parameters may be arrays that broadcast against the pool (a sweep's grid).
        """
        return scoring.score_pool(self.relevance, self.age_days, self.feedback_signs, self.feedback_ages,
                                  half_life_days, recency_weight, feedback_weight, feedback_half_life_days,
                                  valid=valid)

    def aged_from_access(self, last_access: np.ndarray) -> Self:
        """This pool with each memory's age counted from its latest access (``last_access``,
        epoch seconds, -inf where it was never accessed) where that is later than when it
        was stored: ``recency_from="accessed"``."""
        since = np.maximum(np.asarray(self.ts, dtype=np.float64), np.asarray(last_access, dtype=np.float64))
        return dataclasses.replace(self, age_days=(self.now - since) / DAY, recency_from="accessed")

    def floored(self) -> Self:
        """This pool with the memories that only ask at its least relevance (see
        :mod:`vxmem.ranking.asking`): what recall, a replay and the policies rank after the second stage."""
        if self.asks is None:
            return self
        return dataclasses.replace(self, relevance=at_floor(self.relevance, self.asks))

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """``(prev, next)``: each slot's neighbouring turn in the pool (-1: none; see
        :func:`~vxmem.ranking.deep.neighbour_slots`); a pool without neighbour keys has none."""
        keys = self.neighbour_key if self.neighbour_key is not None else np.full(len(self), np.nan)
        return deep.neighbour_slots(keys)

    def rank_order(self, score: np.ndarray) -> np.ndarray:
        """Slots best first by ``score``, ties to the newer memory, then the earlier slot."""
        return scoring.rank_order(score, self.ts)

    def take(self, slots: np.ndarray, **changes: Any) -> Self:
        """A pool of just ``slots`` (in that order) of this one-probe pool, with ``changes``
        (e.g. a new ``relevance``) applied."""
        slots = np.asarray(slots, dtype=np.int64)
        picked = slots.tolist()
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray) and v.ndim:
                out[f.name] = v[slots]
            elif isinstance(v, list) and len(v) == len(self):
                out[f.name] = [v[i] for i in picked]
            else:
                out[f.name] = v
        out.update(changes)
        return type(self)(**out)


class AccessLog:
    """When each memory was last returned, for ranking a replay's probes in time order as a
    memory made with ``recency_from="accessed"`` records and reads it: an access counts
    from the moment after it was made (probes at one moment never see each other's)."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._before: dict[str, float] = {}  # the latest access before the one in _last

    def seen(self, ids: list[str], now: float) -> np.ndarray:
        """Each memory's latest access before ``now`` (-inf: none), for moments in time order."""
        inf = -np.inf
        return np.array([(last if (last := self._last.get(m, inf)) < now else self._before.get(m, inf))
                         for m in ids], dtype=np.float64)

    def returned(self, ids: list[str], now: float) -> None:
        """Record ``ids`` as accessed at ``now`` (no earlier than any moment recorded before)."""
        for m in ids:
            last = self._last.get(m, -np.inf)
            if last < now:
                self._before[m] = last
                self._last[m] = now


@dataclass(kw_only=True)
class LabelledPool(CandidatePool):
    """A replay's cached pool: a :class:`CandidatePool` plus what the probe says of each
    candidate, so metrics can be computed for any ranking of it.

    :param grade: each candidate's graded relevance to the probe (0: not relevant).
    :param stale: superseded or expired, as the probe sees it.
    :param foreign: from another session than the probe's.
    :param session_bits: which of the probe's answer sessions it belongs to, as bits.
    """

    grade: np.ndarray
    stale: np.ndarray
    foreign: np.ndarray
    session_bits: np.ndarray

    @classmethod
    def of(cls, pool: CandidatePool, **labels: Any) -> LabelledPool:
        """``pool`` with the labels added."""
        return cls(**{f.name: getattr(pool, f.name) for f in fields(CandidatePool)}, **labels)
