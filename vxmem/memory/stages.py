"""Recall presets: which second stage reads the first stage's candidates, and how deep.

``"fast"``: the first stage alone (hybrid search and the blend; no model beyond the query's
embedding). ``"default"``: late interaction (:class:`~vxmem.models.late.LateInteraction`)
over the first stage's 120 most relevant candidates, with token vectors stored at write
time. ``"accurate"``: the default's stages and blend, then a cascade: the cross-encoder reorders
the ``limit`` memories the default returns, each read after the turn before it, its score
mixed with theirs (see :mod:`vxmem.ranking.deep`); about 10 times the default's time.
docs/BENCHMARKS.md has each one's recall and time.

After its first stage a recall's pool runs through a list of stages, in order: objects with one
method, ``run(pool, ctx) -> pool`` (:class:`PoolStage`). :meth:`Stage.steps` makes a preset's
list (:class:`Smooth`; :class:`Rerank` or :class:`Deep`; the ages counted from access,
:class:`AgedFromAccess`; a cascade's :class:`Cascade`), the reading adds :class:`DropBelow` and
runs them. A new stage is a class here and a line in :meth:`Stage.steps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeGuard

import numpy as np

from ..core.checks import check_choice
from ..models.late import LateInteraction, default_late_interaction
from ..models.rerank import Reranker, default_reranker, rerank_scores, reranker_name
from ..ranking import deep, scoring
from ..ranking.blend import Blend
from ..ranking.pool import CandidatePool
from ..store.seam import MemoryStore, MemoryView
from .late_stage import in_context, late_scores

PRESETS = ("fast", "default", "accurate")
DEFAULT_PRESET = "default"

__all__ = ["PRESETS", "DEFAULT_PRESET", "Stage", "check_preset", "preset_stages", "floors", "is_late", "stage_name",
           "StageContext", "PoolStage", "FloorAsking", "Smooth", "Rerank", "Deep", "AgedFromAccess", "Cascade",
           "DropBelow", "raw_relevance"]


class Stage(NamedTuple):
    """What a recall runs after its first stage: ``reranker`` (None: none), the (pool,
    rerank) floors, ``smooth``: the fast preset's first stage smoothed over neighbouring
    turns, its best ``max(2 x limit, 20)`` kept (see :mod:`vxmem.ranking.deep`), and ``final``:
    a cascade's last stage, which reranks what a deep second stage kept (None: none)."""

    reranker: Reranker | None
    pool_floor: int = scoring.POOL_FLOOR
    rerank_floor: int = scoring.RERANK_FLOOR
    smooth: bool = False
    final: Reranker | None = None

    def steps(self, aging: Sequence[PoolStage] = ()) -> list[PoolStage]:
        """The stages this runs after the first, in order, with ``aging`` (the ages counted
        from access) after the second stage and before a cascade's final one, which blends."""
        if self.reranker is None:
            return [*([Smooth()] if self.smooth else []), FloorAsking(), *aging]
        name = stage_name(self.reranker, self.final)
        # A stage that reads deeper than the cross-encoder's 20 fuses its scores with the first stage's.
        second: PoolStage = (Deep(self.reranker, name, self.rerank_floor) if self.rerank_floor > scoring.RERANK_FLOOR
                             else Rerank(self.reranker, name, self.rerank_floor))
        return [second, FloorAsking(), *aging, *([] if self.final is None else [Cascade(self.final)])]


def check_preset(preset: Any) -> str:
    """``preset`` checked: one of :data:`PRESETS`."""
    return check_choice(preset, "preset", PRESETS)


def preset_stages(preset: str, own: Reranker | None = None) -> tuple[Reranker, Reranker | None]:
    """``(second stage, final stage)`` a preset runs (``"fast"`` runs none; its reranker is the
    default's, for a recall that asks for ``rerank=True``). A reranker of the memory's ``own``
    replaces the accurate preset's cross-encoder, and any other preset's second stage."""
    if preset == "accurate":
        return default_late_interaction(), default_reranker() if own is None else own
    return default_late_interaction() if own is None else own, None


def stage_name(reranker: Reranker, final: Reranker | None) -> str:
    """What ``_vx_scoring["rerank"]`` calls a second stage: its reranker's name, followed by
    `` > `` and the final stage's in a cascade."""
    name = reranker_name(reranker)
    return name if final is None else f"{name} > {reranker_name(final)}"


def is_late(reranker: Any) -> TypeGuard[LateInteraction]:
    """Whether ``reranker`` scores with token vectors stored at write time."""
    return isinstance(reranker, LateInteraction)


def floors(preset: str, reranker: Any) -> tuple[int, int]:
    """The (pool, rerank) floors of a recall with ``preset`` and ``reranker``: a fast recall
    gathers the classic pool; a second stage that reads deep (its ``depth``) gets a pool that deep."""
    if preset == "fast":
        return scoring.POOL_FLOOR, scoring.RERANK_FLOOR
    depth = getattr(reranker, "depth", None)
    return scoring.stage_floors(depth if isinstance(depth, int) and not isinstance(depth, bool) else None)


# ---------------------------------------------------------------------- the stages


class StageContext(NamedTuple):
    """What a stage reads beside the pool: the ``store`` and its view ``m`` (the stages run
    inside ``store.locked()``, where the pool's positions are valid), the ``query`` and the
    ``blend`` the recall ranks with."""

    store: MemoryStore
    m: MemoryView
    query: str
    blend: Blend


class PoolStage(Protocol):
    """One stage of a recall after its first: a pool in, a pool out."""

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool: ...


def _positions(pool: CandidatePool) -> np.ndarray:
    """The mirror positions of a live pool (made under the lock): only such a pool can be reranked."""
    if pool.positions is None:
        raise ValueError("only a live pool (made under the lock) can be reranked")
    return pool.positions


@dataclass(frozen=True)
class FloorAsking:
    """After the second stage (or the first, where there is none): the memories that only ask
    get the pool's least relevance (see :mod:`vxmem.ranking.asking`). Not before it: a question
    that matches the query still lifts the turn after it, its answer, through the smoothing."""

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool:
        return pool.floored()


@dataclass(frozen=True)
class Smooth:
    """The fast preset's: the pool's relevance smoothed over neighbouring turns and its
    ``max(2 x limit, 20)`` best kept, in slot order (see :mod:`vxmem.ranking.deep`)."""

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool:
        if not len(pool):
            return pool
        prev, nxt = pool.neighbours()
        smoothed, kept = deep.read_slots(pool.relevance, pool.ts, np.ones(len(pool), dtype=bool), prev, nxt,
                                         pool.limit, scoring.RERANK_FLOOR)
        keep = np.flatnonzero(kept)
        return pool.take(keep, relevance=smoothed[keep], first_stage=np.asarray(pool.relevance)[keep])


@dataclass(frozen=True)
class Rerank:
    """A reranker over the pool's ``max(2 x limit, floor)`` most relevant candidates (by the
    mode's relevance, not the blend): their relevance becomes its score of (query, text), the
    first stage's stays beside it as ``first_stage``, ``name`` goes to ``rerank``."""

    reranker: Reranker
    name: str
    floor: int = scoring.RERANK_FLOOR

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool:
        if not len(pool):
            return pool
        positions = _positions(pool)
        slots = scoring.rank_order(pool.relevance, pool.ts)[: scoring.rerank_depth(pool.limit, self.floor)]
        scores = rerank_scores(self.reranker, ctx.query, [ctx.m.texts[p] for p in positions[slots].tolist()])
        return pool.take(slots, relevance=scores, first_stage=np.asarray(pool.relevance)[slots], rerank=self.name)


@dataclass(frozen=True)
class Deep:
    """A stage that reads deep (see :mod:`vxmem.ranking.deep`): the ``floor`` candidates the
    neighbour-smoothed first stage picks are scored (late interaction from the stored token
    vectors, any other reranker from the texts), fused with the first stage and smoothed; the
    ``max(2 x limit, 20)`` best go on, in slot order, the fused score their relevance."""

    reranker: Reranker
    name: str
    floor: int

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool:
        if not len(pool):
            return pool
        positions = _positions(pool)
        n = len(pool)
        prev, nxt = pool.neighbours()
        smoothed, read = deep.read_slots(pool.relevance, pool.ts, np.ones(n, dtype=bool), prev, nxt, pool.limit,
                                         self.floor)
        slots = np.flatnonzero(read)
        stage = np.zeros(n)
        stage[slots] = self.scores(ctx, positions[slots])
        fused, kept = deep.fused_slots(stage, smoothed, pool.ts, read, prev, nxt, pool.limit)
        keep = np.flatnonzero(kept)
        return pool.take(keep, relevance=fused[keep], first_stage=np.asarray(pool.relevance)[keep], rerank=self.name,
                         second_stage=stage[keep])

    def scores(self, ctx: StageContext, positions: np.ndarray) -> np.ndarray:
        """The reranker's scores of the memories at ``positions``."""
        if is_late(self.reranker):
            return late_scores(ctx.store, ctx.m, self.reranker, ctx.query, positions)
        return np.asarray(rerank_scores(self.reranker, ctx.query, [ctx.m.texts[p] for p in positions.tolist()]))


@dataclass(frozen=True)
class AgedFromAccess:
    """Each memory's age counted from its latest access before ``at`` (``recency_from="accessed"``)."""

    at: float

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool:
        if pool.positions is None:
            return pool
        return pool.aged_from_access(ctx.store.last_access(pool.positions, self.at))


@dataclass(frozen=True)
class Cascade:
    """A cascade's last stage (the accurate preset) over a deep stage's pool: the pool blended
    with the recall's blend, its ``limit`` best (the memories the default would return; the
    others leave the pool) read by ``final``, each in context (see
    :func:`~vxmem.memory.late_stage.in_context`), their relevance its score mixed with the fused
    one (:func:`~vxmem.ranking.deep.cascade_relevance`), for the ranking to blend again."""

    final: Reranker

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool:
        if not len(pool):
            return pool
        positions = _positions(pool)
        b = ctx.blend
        score, _, _, _ = pool.blend(b.half_life_days, b.recency_weight, b.feedback_weight, b.feedback_half_life_days)
        top = np.flatnonzero(deep.cascade_slots(score, pool.ts, np.ones(len(pool), dtype=bool), pool.limit))
        last = rerank_scores(self.final, ctx.query, in_context(ctx.m, positions[top]))
        every = np.ones(top.size, dtype=bool)
        return pool.take(top, relevance=deep.cascade_relevance(np.asarray(pool.relevance)[top], last, every),
                         final_stage=last)


def raw_relevance(pool: CandidatePool) -> np.ndarray:
    """The relevance ``min_relevance`` is compared with: the reranker's score in a reranked
    pool (a deep stage's own score, not its fusion), the cosine in dense and hybrid mode (a
    fused hybrid score is normalised within the pool, so it says nothing on its own), BM25 in
    lexical mode."""
    if pool.rerank is None and pool.mode == "hybrid" and pool.dense is not None:
        return np.asarray(pool.dense)
    return np.asarray(pool.raw_relevance)


@dataclass(frozen=True)
class DropBelow:
    """The pool without the candidates whose :func:`raw_relevance` is below ``floor``."""

    floor: float

    def run(self, pool: CandidatePool, ctx: StageContext) -> CandidatePool:
        keep = np.flatnonzero(raw_relevance(pool) >= self.floor)
        return pool if keep.size == len(pool) else pool.take(keep)
