"""Where a replay's recorded stages left each memory out of the pool a probe's blend saw.

:func:`stage_cuts`: of one probe at a ``limit``, the memories its first stage gathered, those
a second stage read and those it kept for the blend, so an explainer says which stage left
a memory out (:func:`vxmem.workbench.analysis.why.why_recalled`) instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ranking import deep, scoring
from .record import Replay, reranked_pool


@dataclass
class StageCuts:
    """Where a probe's recorded stages left each memory out at a ``limit``: the ids of the
    recorded first-stage pool (``recorded``, ``room`` when it held fewer than it could), those
    the first stage ``gathered`` (its ``size`` best), those a second stage ``read`` (its
    ``depth`` best) and ``kept`` for the blend (its ``keep`` best); None where there is no
    second stage. ``stage`` names it."""

    recorded: set[str]
    room: bool
    gathered: set[str]
    size: int
    read: set[str] | None = None
    depth: int = 0
    kept: set[str] | None = None
    keep: int = 0
    stage: str = ""


def stage_cuts(replay: Replay, i: int, limit: int, cap: int) -> StageCuts:
    """Probe ``i``'s first- and second-stage cuts at ``limit``, from its recorded pool (``cap``
    slots when full), with the very functions :meth:`Replay.pool <.record.Replay.pool>` uses."""
    raw = replay.first_stage(i)
    n = len(raw)
    floor, read_floor = replay.floors
    valid, first = scoring.searched_slots(raw.dense, raw.lexical, raw.relevance, n, limit, replay.mode == "hybrid",
                                          raw.hybrid_weight, floor)
    ids = np.asarray(raw.ids, dtype=object)
    out = StageCuts(recorded=set(raw.ids), room=n < cap, gathered=set(ids[valid]), size=scoring.pool_size(limit, floor))
    if replay.rerank is None and not replay.smoothed:
        return out
    keep = scoring.rerank_depth(limit)
    if replay.smoothed or read_floor <= scoring.RERANK_FLOOR:  # what it reads is what it keeps
        kept = set(replay.pool(i, limit=limit).ids) if replay.smoothed else set(
            ids[scoring.rerank_slots(first, raw.ts, valid, limit, read_floor)])
        stage = "second stage (neighbour smoothing)" if replay.smoothed else f"reranker {replay.rerank}"
        out.read, out.depth, out.kept, out.keep, out.stage = kept, keep, kept, keep, stage
        return out
    prev, nxt = raw.neighbours()
    _, read = deep.read_slots(first, raw.ts, valid, prev, nxt, limit, read_floor)
    deep_kept = reranked_pool(raw, replay.pools["rerank_score"][i, :n], str(replay.rerank), limit, replay.floors)
    out.read, out.depth, out.kept, out.keep = set(ids[read]), scoring.rerank_depth(limit, read_floor), \
        set(deep_kept.ids), keep  # a cascade's final stage reads the limit best of these by the blend
    out.stage = f"second stage {replay.rerank}"
    return out
