"""Recall presets: which second stage reads the first stage's candidates, and how deep.

``"fast"``: the first stage alone (hybrid search and the blend; no model beyond the query's
embedding). ``"default"``: late interaction (:class:`~vxmem.models.late.LateInteraction`)
over the first stage's 120 most relevant candidates, with token vectors stored at write
time. ``"accurate"``: the cross-encoder over the 20 most relevant, about ten times slower.
docs/BENCHMARKS.md has each one's recall and time.
"""

from __future__ import annotations

from typing import Any

from ..core.checks import check_choice
from ..models.late import LateInteraction, default_late_interaction
from ..models.rerank import Reranker, default_reranker
from ..ranking import scoring

PRESETS = ("fast", "default", "accurate")
DEFAULT_PRESET = "default"

__all__ = ["PRESETS", "DEFAULT_PRESET", "check_preset", "preset_reranker", "floors", "is_late"]


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
