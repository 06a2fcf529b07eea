"""Questions a researcher asks of replayed conversations, answered from the cached pools.

- :func:`ab_compare` / :func:`ab_summary`: two parameter sets side by side, probe by probe.
- :func:`inert_parameters`: which parameters cannot move the ranking at a point.
- :func:`pareto_front`: the sweep points no other point beats on every objective.
- :func:`stale_above_replacement` and :func:`stale_replacement_pairs`: how often an
  outdated memory ranks above the memory that replaced it.

Tuning on some probes and reporting on the others is :mod:`vxmem.workbench.sweep.holdout`'s; why a
memory was or was not recalled is :mod:`vxmem.workbench.analysis.why`'s. Every ranking here comes from
:mod:`vxmem.workbench.sweep.run` or :meth:`~vxmem.workbench.replay.record.Replay.rank`: one scoring path
(DESIGN rule 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...ranking import scoring
from ..replay.probe_timeline import ProbeTimeline, memory_label
from ..replay.record import Replay, as_replays
from ..sweep.grid import as_point
from ..sweep.holdout import bootstrap_ci
from ..sweep.policies import POLICIES, check_param, get_policy
from ..sweep.run import rankings, sweep
from . import metrics as M

# The per-probe metrics an A/B comparison carries, as the sweep names them.
AB_METRICS = ("rr", "ndcg", "hit", "recall", "stale_leak")

# What a point may name besides the policies' own parameters.
POINT_KEYS = ("limit", "token_budget", "score_gap", "mode", "hybrid_weight")


# ---------------------------------------------------------------------------- A/B comparison


def _probe_frame(replays: list[Replay], point: dict[str, Any], policy) -> pd.DataFrame:
    """One row per probe at one point: the sweep's metrics and the ids it ships."""
    res = sweep(replays, {k: [v] for k, v in point.items()}, policy=policy)
    frame = res.per_probe.reset_index(drop=True)
    shipped = [ids for r in replays for ids in rankings(r, policy=policy, **point)]
    frame["ranked_ids"] = shipped
    return frame


def ab_compare(replays, params_a: Mapping[str, Any] | None, params_b: Mapping[str, Any] | None,
               policy_a="blend", policy_b="blend", limit: int | None = None, *, replays_b=None) -> pd.DataFrame:
    """Every probe ranked under A and under B, side by side, with the change from A to B.

    ``params_a`` / ``params_b`` are points as a sweep takes them (the policy's parameters,
    ``limit``, ``token_budget``, ``hybrid_weight``); what a point leaves out keeps each
    replay's setting. ``limit`` overrides both. ``rank_a`` / ``rank_b`` are the rank of the
    first relevant memory shipped (NaN when none is); ``*_delta`` is B minus A, so a
    negative ``rank_delta`` and a positive ``rr_delta`` mean B found it higher.

    ``replays_b`` puts B on other replays of the same conversations (another search mode
    or embedder decides which memories enter the pools, so it needs its own replay); they
    must hold the same probes in the same order.
    """
    reps = as_replays(replays)
    reps_b = reps if replays_b is None else as_replays(replays_b)
    if replays_b is not None:
        same = [(r.name, [p.get("query") for p in r.probes]) for r in reps]
        if same != [(r.name, [p.get("query") for p in r.probes]) for r in reps_b]:
            raise ValueError("replays_b must replay the same conversations, with the same probes, as replays")
    sides = []
    for name, params, policy, rs in (("params_a", params_a, policy_a, reps), ("params_b", params_b, policy_b,
                                                                               reps_b)):
        point = as_point(params, name)
        if limit is not None:
            point["limit"] = limit
        sides.append(_probe_frame(rs, point, policy))
    a, b = sides
    labels = {m["id"]: memory_label(m, m["id"]) for r in [*reps, *reps_b] for m in r.memories}
    probes = [(r.name, i, p.get("label"), p.get("category"), p.get("query")) for r in reps
              for i, p in enumerate(r.probes)]
    out = pd.DataFrame(probes, columns=["conversation", "probe", "label", "category", "query"], dtype=object)
    out["probe"] = out["probe"].astype(np.int64)
    for side, f in (("a", a), ("b", b)):
        rr = f["rr"].to_numpy(dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"rank_{side}"] = np.where(rr > 0, np.rint(1.0 / np.where(rr > 0, rr, 1.0)), np.nan)
    out["rank_delta"] = out["rank_b"] - out["rank_a"]
    for m in AB_METRICS:
        out[f"{m}_a"] = a[m].to_numpy(dtype=np.float64)
        out[f"{m}_b"] = b[m].to_numpy(dtype=np.float64)
        out[f"{m}_delta"] = out[f"{m}_b"] - out[f"{m}_a"]
    out["tokens_a"] = a["tokens"].to_numpy()
    out["tokens_b"] = b["tokens"].to_numpy()
    out["ranked_a"] = [[labels.get(x, x) for x in ids] for ids in a["ranked_ids"]]
    out["ranked_b"] = [[labels.get(x, x) for x in ids] for ids in b["ranked_ids"]]
    return out


@dataclass(frozen=True)
class ABSummary:
    """Wins (B better), losses and ties on ``metric`` over the probes it can score, the
    means and the mean change with a paired bootstrap interval, and the probes that
    changed most (largest change first)."""

    metric: str
    probes: int
    scored: int
    wins: int
    losses: int
    ties: int
    mean_a: float
    mean_b: float
    mean_delta: float
    delta_lo: float
    delta_hi: float
    most_changed: pd.DataFrame

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("metric", "probes", "scored", "wins", "losses", "ties", "mean_a",
                                              "mean_b", "mean_delta", "delta_lo", "delta_hi")}


def ab_summary(frame: pd.DataFrame, metric: str = "rr", top: int = 5, *, n_boot: int = 1000, seed: int = 0,
               ci: float = 0.95) -> ABSummary:
    """Summarise an :func:`ab_compare` frame on ``metric`` (``rr``, ``ndcg``, ``hit``, ...).

    A probe that neither side can score (nothing relevant existed) counts in ``probes``
    only. For ``stale_leak`` lower is better, so B wins where it leaks less.
    """
    cols = (f"{metric}_a", f"{metric}_b")
    if any(c not in frame.columns for c in cols):
        raise KeyError(f"metric {metric!r} is not in this comparison; metrics: {', '.join(AB_METRICS)}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be an int >= 0, got {top!r}")
    a = frame[cols[0]].to_numpy(dtype=np.float64)
    b = frame[cols[1]].to_numpy(dtype=np.float64)
    scored = ~(np.isnan(a) | np.isnan(b))
    delta = b[scored] - a[scored]
    sign = -1.0 if metric in M.LOWER_IS_BETTER else 1.0
    better = sign * delta
    eps = 1e-12
    mean_delta, lo, hi = bootstrap_ci(delta, n_boot=n_boot, seed=seed, ci=ci)
    changed = frame[scored].assign(change=delta, abs_change=np.abs(delta))
    changed = changed[changed["abs_change"] > eps].sort_values("abs_change", ascending=False, kind="stable")
    return ABSummary(metric=metric, probes=len(frame), scored=int(scored.sum()), wins=int((better > eps).sum()),
                     losses=int((better < -eps).sum()), ties=int((np.abs(better) <= eps).sum()),
                     mean_a=float(a[scored].mean()) if scored.any() else math.nan,
                     mean_b=float(b[scored].mean()) if scored.any() else math.nan,
                     mean_delta=mean_delta, delta_lo=lo, delta_hi=hi,
                     most_changed=changed.drop(columns=["abs_change"]).head(top).reset_index(drop=True))


# ---------------------------------------------------------------------------- inert parameters and Pareto


def inert_parameters(params: Mapping[str, Any], policy="blend", replays=None) -> dict[str, str]:
    """Parameters that cannot change any ranking at the point ``params``, each with why.

    A sweep over an inert parameter draws a flat line that looks like robustness.
    ``params`` names policy parameters and any of :data:`POINT_KEYS`. Flagged:
    ``half_life_days`` when ``recency_weight`` is 0, ``feedback_half_life_days`` when
    ``feedback_weight`` is 0, ``hybrid_weight`` unless ``mode`` (default: recall's, hybrid)
    is hybrid, and parameters of another policy. With ``replays``, missing values come from their settings, and the
    feedback parameters are inert when no memory in any pool has feedback.
    """
    pol = get_policy(policy)
    point = as_point(params, "params")
    every = {p for pl in POLICIES.values() for p in pl.params}
    known = every | set(POINT_KEYS)
    unknown = sorted(set(point) - known)
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(known))}")
    reps = as_replays(replays) if replays is not None else []

    def value(k):
        if k in point:
            return point[k]
        vals = {r.settings.get(k) for r in reps if k in r.settings}
        if len(vals) == 1:
            return vals.pop()
        return pol.defaults.get(k)

    out: dict[str, str] = {}
    for k in point:
        if k in every and k not in pol.params:
            owners = [n for n, pl in POLICIES.items() if k in pl.params]
            out[k] = f"a parameter of {', '.join(owners)}; the {pol.name} policy does not use it"
    if pol.name == "blend":
        if check_param("recency_weight", value("recency_weight")) == 0:
            out["half_life_days"] = "recency_weight is 0, so the recency decay is multiplied away"
        no_feedback = bool(reps) and not any(np.any(r.pools["feedback_signs"] != 0) for r in reps)
        if no_feedback:
            out["feedback_weight"] = "no memory in these replays' pools has feedback"
            out["feedback_half_life_days"] = "no memory in these replays' pools has feedback"
        elif check_param("feedback_weight", value("feedback_weight")) == 0:
            out["feedback_half_life_days"] = "feedback_weight is 0, so feedback is multiplied away"
    if "hybrid_weight" in point:
        modes = {point["mode"]} if point.get("mode") is not None else \
            {r.mode for r in reps} or {scoring.DEFAULT_MODE}
        if "hybrid" not in modes:  # replays of several modes, one of them hybrid: the weight counts there
            out["hybrid_weight"] = (f"mode is {' and '.join(sorted(modes))}; "
                                    "only hybrid fuses dense and lexical relevance")
    return out


def pareto_front(frame: pd.DataFrame, maximize: Sequence[str] = ("ndcg",),
                 minimize: Sequence[str] = ("stale_leak", "tokens")) -> pd.Series:
    """Which rows no other row dominates (at least as good on every objective, better on one).

    Use it on a sweep's per-point frame, e.g. nDCG against stale-leak against context
    tokens (a sweep's per-point frame has ``tokens``). A NaN counts as the worst value; identical
    rows do not dominate each other. Returns a boolean Series aligned with ``frame``.
    """
    if isinstance(maximize, str) or isinstance(minimize, str):
        raise TypeError("maximize and minimize must be sequences of column names, not a string")
    cols = [*maximize, *minimize]
    if not cols:
        raise ValueError("name at least one column to maximize or minimize")
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise KeyError(f"column {missing[0]!r} is not in the frame; columns: {', '.join(map(str, frame.columns))}")
    # Everything as "higher is better", NaN as the worst.
    parts = [np.nan_to_num(frame[c].to_numpy(dtype=np.float64), nan=-np.inf) for c in maximize]
    parts += [np.nan_to_num(-frame[c].to_numpy(dtype=np.float64), nan=-np.inf) for c in minimize]
    x = np.stack(parts, axis=1) if len(frame) else np.zeros((0, len(cols)))
    n = x.shape[0]
    dominated = np.zeros(n, dtype=bool)
    step = max(1, 2_000_000 // max(1, n * len(cols)))
    for s in range(0, n, step):  # rows s..s+step against every row, in bounded memory
        blk = x[s:s + step, None, :]
        ge = np.all(x[None, :, :] >= blk, axis=-1)
        gt = np.any(x[None, :, :] > blk, axis=-1)
        dominated[s:s + step] = np.any(ge & gt, axis=1)
    return pd.Series(~dominated, index=frame.index, name="pareto")


# ---------------------------------------------------------------------------- stale above its replacement


def stale_above_replacement(stale_rank, replacement_rank) -> np.ndarray:
    """Per pair: 1.0 where the stale memory ranks above its replacement, 0.0 where below.

    Ranks are 1-based positions in one ranking, NaN where a memory is not in it; a pair
    with either side unranked is NaN (it says nothing about their order).
    """
    s = np.asarray(stale_rank, dtype=np.float64)
    r = np.asarray(replacement_rank, dtype=np.float64)
    return np.where(np.isnan(s) | np.isnan(r), np.nan, (s < r).astype(np.float64))


def stale_above_replacement_rate(stale_rank, replacement_rank, axis: int = -1) -> np.ndarray:
    """Share of the ranked pairs along ``axis`` where the stale memory comes first (NaN: no ranked pair)."""
    above = stale_above_replacement(stale_rank, replacement_rank)
    ranked = ~np.isnan(above)
    n = ranked.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.nansum(above, axis=axis) / np.where(n > 0, n, 1), np.nan)


def stale_replacement_pairs(replay: Replay, ranked: Sequence[Sequence[str]] | None = None,
                            pairs: str = "superseded_by", policy="blend", **params) -> pd.DataFrame:
    """One row per probe and (stale, replacement) pair of memories that both existed then.

    ``pairs="superseded_by"``: a superseded memory and the memory that superseded it (the
    replay's ``superseded_by``). ``pairs="probe"``: each memory the probe labels stale and
    each it labels relevant, for data where the newer statement replaces the older
    without a supersession link. ``ranked`` is one list of ids per probe; by default what
    each probe ships under ``policy`` at ``params`` (as :func:`vxmem.workbench.sweep.run.rankings`, so as
    ``recall()`` would; a bigger ``limit`` looks deeper). A pair with a side not ranked
    says nothing. Recorded pools leave superseded memories out, as ``recall()`` does, so
    superseded_by pairs are ranked only in rankings that include them.
    """
    if not isinstance(replay, Replay):
        raise TypeError(f"replay must be a Replay, not {type(replay).__name__}")
    if pairs not in ("superseded_by", "probe"):
        raise ValueError(f"pairs must be 'superseded_by' or 'probe', got {pairs!r}")
    if ranked is None:
        if replay.settings.get("score_gap") is not None:
            raise ValueError("the sweep's rankings do not apply score_gap; replay with score_gap=None or pass ranked=")
        ranked = rankings(replay, policy=policy, **params)
    elif len(ranked) != replay.n_probes:
        raise ValueError(f"ranked has {len(ranked)} lists; the replay has {replay.n_probes} probes")
    mems = {m["id"]: m for m in replay.memories}
    rows = []
    for i, probe in enumerate(replay.probes):
        alive = ProbeTimeline(replay, i)
        pos = {mid: r for r, mid in enumerate(ranked[i], 1)}
        if pairs == "superseded_by":
            found = [(m["id"], m["superseded_by"]) for m in replay.memories
                     if m.get("superseded_by") and alive.exists(m) and alive.exists(mems.get(m["superseded_by"]))]
        else:
            stale_l, rel_l = set(probe.get("stale") or ()), set(probe.get("relevant") or ())
            live = [m for m in replay.memories if alive.exists(m)]
            olds = [m["id"] for m in live if stale_l & set(m.get("labels") or ())]
            news = [m["id"] for m in live if rel_l & set(m.get("labels") or ())]
            found = [(o, n) for o in olds for n in news if o != n]
        for old, new in found:
            rows.append({"probe": i, "stale": old, "stale_label": memory_label(mems.get(old), old), "replacement": new,
                         "replacement_label": memory_label(mems.get(new), new),
                         "stale_rank": float(pos.get(old, math.nan)),
                         "replacement_rank": float(pos.get(new, math.nan))})
    frame = pd.DataFrame(rows, columns=["probe", "stale", "stale_label", "replacement", "replacement_label",
                                        "stale_rank", "replacement_rank"])
    frame["above"] = stale_above_replacement(frame["stale_rank"].to_numpy(), frame["replacement_rank"].to_numpy())
    return frame


def replay_stale_above_replacement(replay: Replay, ranked: Sequence[Sequence[str]] | None = None,
                                   pairs: str = "superseded_by", policy="blend", **params) -> float:
    """The stale-above-replacement rate over every ranked pair of every probe (NaN: none ranked)."""
    f = stale_replacement_pairs(replay, ranked, pairs, policy, **params)
    return float(stale_above_replacement_rate(f["stale_rank"].to_numpy(), f["replacement_rank"].to_numpy()))
