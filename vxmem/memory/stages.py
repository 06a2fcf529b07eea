"""Recall presets: which second stage reads the first stage's candidates, and how deep.

``"fast"``: the first stage alone (hybrid search and the blend; no model beyond the query's
embedding). ``"default"``: late interaction (:class:`~vxmem.models.late.LateInteraction`)
over the first stage's 120 most relevant candidates, with token vectors stored at write
time. ``"accurate"``: the cross-encoder over the 20 most relevant, about ten times slower.
docs/BENCHMARKS.md has each one's recall and time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..core.checks import check_choice
from ..models.late import LateInteraction, default_late_interaction
from ..models.rerank import Reranker, default_reranker
from ..ranking import scoring

PRESETS = ("fast", "default", "accurate")
DEFAULT_PRESET = "default"

__all__ = ["PRESETS", "DEFAULT_PRESET", "Stage", "check_preset", "preset_reranker", "floors", "is_late"]


class Stage(NamedTuple):
    """What a recall runs after its first stage: ``reranker`` (None: none), the (pool,
    rerank) floors, and ``smooth``: the fast preset's first stage smoothed over neighbouring
    turns, its best ``max(2 x limit, 20)`` kept (see :mod:`vxmem.ranking.deep`)."""

    reranker: Reranker | None
    pool_floor: int = scoring.POOL_FLOOR
    rerank_floor: int = scoring.RERANK_FLOOR
    smooth: bool = False


def check_preset(preset: Any) -> str:
    """``preset`` checked: one of :data:`PRESETS`."""
    return check_choice(preset, "preset", PRESETS)


def preset_reranker(preset: str) -> Reranker:
    """The second stage a preset runs (``"fast"`` runs none; its reranker is the default's,
    for a recall that asks for ``rerank=True``)."""
    return default_reranker() if preset == "accurate" else default_late_interaction()


def is_late(reranker: Any) -> bool:
    """Whether ``reranker`` scores with token vectors stored at write time."""
    return isinstance(reranker, LateInteraction)


def floors(preset: str, reranker: Any) -> tuple[int, int]:
    """The (pool, rerank) floors of a recall with ``preset`` and ``reranker``: a fast recall
    gathers the classic pool; a second stage that reads deep (its ``depth``) gets a pool that deep."""
    if preset == "fast":
        return scoring.POOL_FLOOR, scoring.RERANK_FLOOR
    depth = getattr(reranker, "depth", None)
    return scoring.stage_floors(depth if isinstance(depth, int) and not isinstance(depth, bool) else None)
