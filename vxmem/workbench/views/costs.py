"""The Compare page's quality against cost: every recall preset crossed with every ranking
policy, and the compared systems beside them, as recall@k against milliseconds per recall
with the Pareto front marked (:func:`vxmem.workbench.systems.compare.quality_cost`'s rule); and each
preset's quality per millisecond as one table row (:func:`presets_table`, the workbench's
``benchmarks/bench_quality.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...core.checks import check_limit
from ...ranking import deep, scoring
from ..analysis import metrics as M
from ..replay.record import Replay, as_replays
from ..sweep.holdout import bootstrap_ci
from ..sweep.policies import POLICIES
from ..sweep.run import sweep
from ..systems.compare import quality_cost
from .charts import LABEL_SEP
from .intervals import with_intervals
from .settings import grid_point

COST_COLUMNS = ["label", "kind", "preset", "policy", "recall", "ms_per_recall", "probes", "on_front"]
PRESET_COLUMNS = ["preset", "recall", "recall_lo", "recall_hi", "mrr", "coverage", "depth", "ms_p50", "ms_p50_lo",
                  "ms_p50_hi", "ms_p99", "ms_per_write", "probes"]
TIMING_BOOT = 1000  # bootstrap resamples of a median time's interval


def _finite(values: Iterable[Any]) -> np.ndarray:
    ms = np.array(list(values), dtype=np.float64)
    return ms[np.isfinite(ms)]


def _quantile(values: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` (linear, as pandas'); NaN when there are none."""
    return float(np.quantile(values, q)) if values.size else float("nan")


def _mean(values: np.ndarray) -> float:
    """The mean of the finite ``values``; NaN when there are none."""
    finite = _finite(values)
    return float(finite.mean()) if finite.size else float("nan")


def median_interval(values: np.ndarray, ci: float = 0.95, n_boot: int = TIMING_BOOT,
                    seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the median of ``values`` (NaN, NaN when there are
    none): how far the median time of a handful of recalls may sit from the machine's."""
    _, lo, hi = bootstrap_ci(_finite(values), n_boot=n_boot, seed=seed, ci=ci, stat=np.median)
    return lo, hi


def untold_timings(table: pd.DataFrame) -> list[tuple[str, str]]:
    """The pairs of presets of a :func:`presets_table` whose median recall times' intervals
    overlap: on these probes, which of the two recalls faster is not known."""
    rows = [r for r in table.to_dict("records") if np.isfinite(r.get("ms_p50_lo", np.nan))]
    return [(a["preset"], b["preset"]) for i, a in enumerate(rows) for b in rows[i + 1:]
            if a["ms_p50_lo"] <= b["ms_p50_hi"] and b["ms_p50_lo"] <= a["ms_p50_hi"]]


def recall_times(replays: Sequence[Replay]) -> np.ndarray:
    """The milliseconds of the live recalls the probes of ``replays`` timed (their ``recall_ms``;
    none in replays saved before replays were timed)."""
    return _finite(p.get("recall_ms", np.nan) for r in replays for p in r.probes)


def write_times(replays: Sequence[Replay]) -> np.ndarray:
    """The milliseconds of the live writes the events of ``replays`` timed (their ``write_ms``:
    each turn's and fact's ``remember()``; none in replays saved before writes were timed)."""
    return _finite(e.get("write_ms", np.nan) for r in replays for e in r.events)


def median_recall_ms(replays: Sequence[Replay]) -> float:
    """The median milliseconds of the live recalls the probes of ``replays`` timed (their
    ``recall_ms``); NaN when none was timed (replays saved before replays were timed)."""
    return _quantile(recall_times(replays), 0.5)


def presets_quality_cost(replays: Mapping[str, Sequence[Replay]], systems: pd.DataFrame | None = None,
                         point: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per (preset, policy) and one per system: recall@k against ms per recall.

    ``replays`` maps each recall preset (``"fast"``, ``"default"``, ``"accurate"``) to the
    replays of one dataset made with it. Each policy of :data:`~vxmem.workbench.sweep.policies.POLICIES`
    re-ranks every preset's recorded pools (:func:`~vxmem.workbench.sweep.run.sweep`): the blend at
    the replays' own settings, which is their live ``recall()`` (its recall is the mean the
    probe rows report), the others at their default parameters. ``point`` may fix ``limit``
    and ``token_budget`` for all (slider values; default: the replays' own, k their limit).

    ``ms_per_recall`` is the median over the preset's probes of the time its live recall
    took, as the replay recorded it (``recall_ms``). A policy re-ranks the very same recorded
    pool, so its recall costs what the preset's recall cost: every policy of a preset has
    the preset's milliseconds. ``systems`` (the table of :func:`~vxmem.workbench.systems.compare.compare`,
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


def stage_depth(replay: Replay, limit: int) -> int:
    """D: how many of a probe's first-stage candidates ``replay``'s second stage reads at
    ``limit``, as ``recall()`` counts them: ``max(2 x limit, rerank floor)`` with a reranker
    (the floors of :func:`vxmem.ranking.scoring.stage_floors`: 120 for late interaction, 20 for
    a cross-encoder that reads alone), else ``limit`` (the fast preset's top, as ``bench_quality.py`` counts it)."""
    if replay.rerank is None:
        return check_limit(limit)
    return scoring.rerank_depth(limit, replay.floors[1])


def stage_coverage(replay: Replay, limit: int | None = None) -> np.ndarray:
    """Per probe of ``replay``: the share of its relevant memories within the first D
    (:func:`stage_depth`) candidates of its recorded first-stage pool at ``limit`` (default: the
    probe's own), ordered as the second stage picks what it reads: by the first stage's
    relevance, neighbour-smoothed for late interaction and the fast preset (see
    :mod:`vxmem.ranking.deep`). A relevant memory outside the pool counts as missed; NaN
    for a probe with nothing relevant (its ``n_relevant``, recall's denominator, is 0)."""
    pools, (pool_floor, rerank_floor) = replay.pools, replay.floors
    smoothed = replay.smoothed or (replay.rerank is not None and rerank_floor > scoring.RERANK_FLOOR)
    out = np.full(replay.n_probes, np.nan)
    for i in range(replay.n_probes):
        n = int(pools["n"][i])
        lim = int(pools["limit"][i]) if limit is None else check_limit(limit)
        dense, lexical, keys = (pools[k][i, :n] if k in pools else np.full(n, np.nan)  # not in a hand-made pool
                                for k in ("dense", "lexical", "neighbour_key"))
        valid, first = scoring.searched_slots(dense, lexical, pools["relevance"][i, :n], n, lim,
                                              replay.mode == "hybrid", replay.hybrid_weight, pool_floor)
        ts = pools["ts"][i, :n]
        if smoothed:
            prev, nxt = deep.neighbour_slots(keys)
            first = deep.read_slots(first, ts, valid, prev, nxt, lim, rerank_floor)[0]
        slots = np.flatnonzero(valid)
        order = slots[scoring.rank_order(first[slots], ts[slots])]
        out[i] = float(M.recall_at_k(pools["grade"][i, order], pools["n_relevant"][i], stage_depth(replay, lim)))
    return out


def presets_table(replays: Mapping[str, Sequence[Replay]], point: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Each recall preset's quality per millisecond, one row per preset (the workbench's
    ``benchmarks/bench_quality.py`` table).

    ``replays`` maps each preset to the replays of one dataset made with it (as for
    :func:`presets_quality_cost`); ``point`` may fix ``limit`` and ``token_budget``. Columns:
    ``recall``, recall@k of the blend at the replays' settings, which is their live ``recall()``,
    with its bootstrap 95% interval (``recall_lo``, ``recall_hi``); ``recall · <category>``,
    its mean over the probes of each category present (but one whose probes have nothing
    relevant, which recall cannot score); ``mrr``, the mean reciprocal rank of each probe's
    first relevant memory in the top k (how high it sits, which recall@k does not say); ``coverage``, the mean of
    :func:`stage_coverage` (the relevant memories within the first ``depth`` candidates of the
    first stage, ``depth`` being how deep the preset's second stage reads; the largest over
    the probes); ``ms_p50`` and ``ms_p99``, quantiles of the live recalls' milliseconds
    (``recall_ms``), the median with its bootstrap 95% interval (``ms_p50_lo``, ``ms_p50_hi``;
    :func:`untold_timings` names the presets it cannot tell apart); ``ms_per_write``, the median
    milliseconds of the live writes (``write_ms``); and ``probes``. A timing the replays did not record is NaN.
    """
    grid = {k: [v] for k, v in grid_point(point or {}).items() if k in ("limit", "token_budget")}
    limit = grid["limit"][0] if "limit" in grid else None
    rows = []
    for preset, reps in replays.items():
        reps = as_replays(reps)
        res = sweep(reps, dict(grid), policy="blend")
        row = with_intervals(res.per_point, res.per_probe, ["recall"]).iloc[0]
        by_category = res.per_probe.groupby("category", observed=True, sort=False)["recall"].mean()
        coverage = np.concatenate([stage_coverage(r, limit) for r in reps])
        depths = [stage_depth(r, limit or int(lim)) for r in reps for lim in r.pools["limit"]]
        ms = recall_times(reps)
        rows.append({"preset": preset, **{k: float(row[k]) for k in ("recall", "recall_lo", "recall_hi", "mrr")},
                     **{f"recall{LABEL_SEP}{c}": float(v) for c, v in by_category.items()},
                     "coverage": _mean(coverage), "depth": max(depths, default=0),
                     "ms_p50": _quantile(ms, 0.5), **dict(zip(("ms_p50_lo", "ms_p50_hi"), median_interval(ms))),
                     "ms_p99": _quantile(ms, 0.99),
                     "ms_per_write": _quantile(write_times(reps), 0.5), "probes": int(row["probes"])})
    if not rows:
        return pd.DataFrame(columns=PRESET_COLUMNS)
    frame = pd.DataFrame(rows)
    unscored = [c for c in frame if c.startswith(f"recall{LABEL_SEP}") and frame[c].isna().all()]
    return frame.drop(columns=unscored)
