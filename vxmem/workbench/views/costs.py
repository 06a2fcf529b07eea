"""The Compare page's quality against cost: every recall preset crossed with every ranking
policy, and the compared systems beside them, as recall@k against milliseconds per recall
with the Pareto front marked (:func:`vxmem.workbench.compare.quality_cost`'s rule)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..compare import quality_cost
from ..policies import POLICIES
from ..record import Replay, as_replays
from ..sweep import sweep
from .charts import LABEL_SEP
from .settings import grid_point

COST_COLUMNS = ["label", "kind", "preset", "policy", "recall", "ms_per_recall", "probes", "on_front"]


def median_recall_ms(replays: Sequence[Replay]) -> float:
    """The median milliseconds of the live recalls the probes of ``replays`` timed (their
    ``recall_ms``); NaN when none was timed (replays saved before replays were timed)."""
    ms = np.array([p.get("recall_ms", np.nan) for r in replays for p in r.probes], dtype=np.float64)
    ms = ms[np.isfinite(ms)]
    return float(np.median(ms)) if ms.size else float("nan")


def presets_quality_cost(replays: Mapping[str, Sequence[Replay]], systems: pd.DataFrame | None = None,
                         point: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per (preset, policy) and one per system: recall@k against ms per recall.

    ``replays`` maps each recall preset (``"fast"``, ``"default"``, ``"accurate"``) to the
    replays of one dataset made with it. Each policy of :data:`~vxmem.workbench.policies.POLICIES`
    re-ranks every preset's recorded pools (:func:`~vxmem.workbench.sweep.sweep`): the blend at
    the replays' own settings, which is their live ``recall()`` (its recall is the mean the
    probe rows report), the others at their default parameters. ``point`` may fix ``limit``
    and ``token_budget`` for all (slider values; default: the replays' own, k their limit).

    ``ms_per_recall`` is the median over the preset's probes of the time its live recall
    took, as the replay recorded it (``recall_ms``). A policy re-ranks the very same recorded
    pool, so its recall costs what the preset's recall cost: every policy of a preset has
    the preset's milliseconds. ``systems`` (the table of :func:`~vxmem.workbench.compare.compare`,
    or anything with ``system``, ``recall`` and ``ms_per_recall``) adds one row per system,
    timed by the harness.

    Columns: ``label`` ("default · blend", or the system's name), ``kind`` (``"policy"`` or
    ``"system"``), ``preset``, ``policy`` (None for a system), ``recall``, ``ms_per_recall``,
    ``probes`` and ``on_front``: no other row has at least its recall at no more
    milliseconds and is better on one (a row with a NaN is never on the front).
    """
    grid = {k: [v] for k, v in grid_point(point or {}).items() if k in ("limit", "token_budget")}
    rows: list[dict[str, Any]] = []
    for preset, reps in replays.items():
        reps = as_replays(reps)
        ms = median_recall_ms(reps)
        for name in POLICIES:
            row = sweep(reps, dict(grid), policy=name).per_point.iloc[0]
            rows.append({"label": f"{preset}{LABEL_SEP}{name}", "kind": "policy", "preset": preset, "policy": name,
                         "recall": float(row["recall"]), "ms_per_recall": ms, "probes": int(row["probes"])})
    if systems is not None:
        missing = [c for c in ("system", "recall", "ms_per_recall") if c not in systems.columns]
        if missing:
            raise KeyError(f"column {missing[0]!r} is not in the systems table")
        for r in systems.to_dict("records"):
            rows.append({"label": str(r["system"]), "kind": "system", "preset": None, "policy": None,
                         "recall": float(r["recall"]), "ms_per_recall": float(r["ms_per_recall"]),
                         "probes": int(r["probes"]) if pd.notna(r.get("probes")) else 0})
    frame = pd.DataFrame(rows, columns=COST_COLUMNS[:-1])
    frame[["recall", "ms_per_recall"]] = frame[["recall", "ms_per_recall"]].astype(np.float64)
    front = quality_cost(frame.rename(columns={"label": "system"}))["on_front"]
    return frame.assign(on_front=front.to_numpy(dtype=bool))
