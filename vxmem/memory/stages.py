"""Recall presets: which second stage reads the first stage's candidates, and how deep.

``"fast"``: the first stage alone (hybrid search and the blend; no model beyond the query's
embedding). ``"default"``: late interaction (:class:`~vxmem.models.late.LateInteraction`)
over the first stage's 120 most relevant candidates, with token vectors stored at write
time. ``"accurate"``: the default's stages and blend, then a cascade: the cross-encoder reorders
the ``limit`` memories the default returns, each read after the turn before it, its score
mixed with theirs (see :mod:`vxmem.ranking.deep`); about 10 times the default's time.
docs/BENCHMARKS.md has each one's recall and time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..core.checks import check_choice
from ..models.late import LateInteraction, default_late_interaction
from ..models.rerank import Reranker, default_reranker, reranker_name
from ..ranking import scoring

PRESETS = ("fast", "default", "accurate")
DEFAULT_PRESET = "default"

__all__ = ["PRESETS", "DEFAULT_PRESET", "Stage", "check_preset", "preset_stages", "floors", "is_late", "stage_name"]


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
