"""Questions a researcher asks of replayed conversations, answered from the cached pools.

- :func:`ab_compare` / :func:`ab_summary`: two parameter sets side by side, probe by probe.
- :func:`split_probes`, :func:`bootstrap_ci`, :func:`split_report`, :func:`tune_holdout`:
  tune on some probes, report on the others, with bootstrap intervals, so a sweep's best
  point is not judged on the probes that chose it.
- :func:`inert_parameters`: which parameters cannot move the ranking at a point.
- :func:`pareto_front`: the sweep points no other point beats on every objective.
- :func:`stale_above_replacement` and :func:`stale_replacement_pairs`: how often an
  outdated memory ranks above the memory that replaced it.
- :func:`why_recalled`: for one probe, why each memory that existed was or was not
  returned, in the vocabulary of :data:`REASONS`; :func:`why_recalled_live` asks the same
  of a live memory (the dashboard's Playground). Both live in :mod:`vxmem.workbench.why` and are
  importable from here.

Every ranking here comes from :mod:`vxmem.workbench.sweep` or :meth:`~vxmem.workbench.replay.Replay.rank`, or,
in :func:`why_recalled`, from the very :mod:`vxmem.ranking.scoring` functions ``recall()`` calls in
the order it calls them: one scoring path (DESIGN rule 1).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..core.reasons import REASONS
from . import metrics as M
from .policies import POLICIES, check_param, get_policy
from .record import Replay
from .sweep import rankings, sweep
from .why import DAY, SCORE_PARTS, _label, _point, _Timeline, why_recalled, why_recalled_live

__all__ = ["AB_METRICS", "DAY", "POINT_KEYS", "REASONS", "REPORT_METRICS", "SCORE_PARTS", "ABSummary", "ProbeSplit",
           "TuningResult", "ab_compare", "ab_summary", "bootstrap_ci", "inert_parameters", "pareto_front",
           "replay_stale_above_replacement", "split_probes", "split_report", "stale_above_replacement",
           "stale_above_replacement_rate", "stale_replacement_pairs", "tune_holdout", "why_recalled",
           "why_recalled_live"]

# The per-probe metrics an A/B comparison and a tuning report carry, as the sweep names them.
AB_METRICS = ("rr", "ndcg", "hit", "recall", "stale_leak")
REPORT_METRICS = ("ndcg", "rr", "hit", "stale_leak")

# What a point may name besides the policies' own parameters.
POINT_KEYS = ("limit", "token_budget", "score_gap", "mode", "hybrid_weight")


def _replays(replays) -> list[Replay]:
    out = [replays] if isinstance(replays, Replay) else list(replays)
    if not out or not all(isinstance(r, Replay) for r in out):
        raise TypeError("replays must be a Replay or a non-empty list of Replays")
    return out


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
    reps = _replays(replays)
    reps_b = reps if replays_b is None else _replays(replays_b)
    if replays_b is not None:
        same = [(r.name, [p.get("query") for p in r.probes]) for r in reps]
        if same != [(r.name, [p.get("query") for p in r.probes]) for r in reps_b]:
            raise ValueError("replays_b must replay the same conversations, with the same probes, as replays")
    sides = []
    for name, params, policy, rs in (("params_a", params_a, policy_a, reps), ("params_b", params_b, policy_b,
                                                                               reps_b)):
        point = _point(params, name)
        if limit is not None:
            point["limit"] = limit
        sides.append(_probe_frame(rs, point, policy))
    a, b = sides
    labels = {m["id"]: _label(m, m["id"]) for r in [*reps, *reps_b] for m in r.memories}
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


# ---------------------------------------------------------------------------- honest tuning


@dataclass(frozen=True)
class ProbeSplit:
    """Boolean masks over the probes of a list of replays, in the order a sweep lists them."""

    tune: np.ndarray
    holdout: np.ndarray
    by: str

    def __post_init__(self):
        object.__setattr__(self, "tune", np.asarray(self.tune, dtype=bool))
        object.__setattr__(self, "holdout", np.asarray(self.holdout, dtype=bool))
        if self.tune.shape != self.holdout.shape or np.any(self.tune & self.holdout):
            raise ValueError("tune and holdout must be disjoint masks of one shape")


def _rank_key(seed: int, key: str) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{key}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def split_probes(replays, holdout: float = 0.3, seed: int = 0, by: str = "conversation") -> ProbeSplit:
    """Hold out a share of the probes for reporting, the rest for tuning.

    ``by="conversation"`` keeps each conversation whole on one side (probes of one
    conversation share memories, so splitting them leaks) when there are several;
    with one conversation, or ``by="probe"``, probes are split one by one. The split is a
    hash of ``seed`` and each conversation's name (and probe index), so it does not depend
    on the order of ``replays`` or on the numpy version. Both sides get at least one unit.
    """
    reps = _replays(replays)
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float)) or not 0 < holdout < 1:
        raise ValueError(f"holdout must be a fraction strictly between 0 and 1, got {holdout!r}")
    if by not in ("conversation", "probe"):
        raise ValueError(f"by must be 'conversation' or 'probe', got {by!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    seen: dict[str, int] = {}
    conv_keys = []
    for r in reps:  # the same name twice (two replays of one conversation) stays distinct
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        conv_keys.append(f"{r.name}\x00{n}")
    owner = np.concatenate([np.full(r.n_probes, j) for j, r in enumerate(reps)]).astype(np.int64)
    P = owner.size
    if by == "conversation" and sum(1 for r in reps if r.n_probes) >= 2:
        units = [j for j, r in enumerate(reps) if r.n_probes]
        keys = [conv_keys[j] for j in units]
        mode = "conversation"
    else:
        units = list(range(P))
        index = np.concatenate([np.arange(r.n_probes) for r in reps]).astype(np.int64) if P else np.zeros(0, int)
        keys = [f"{conv_keys[owner[p]]}\x00{index[p]}" for p in units]
        mode = "probe"
    if len(units) < 2:
        raise ValueError(f"cannot split {len(units)} probe(s): tuning and holdout need one each")
    n_hold = min(max(int(math.floor(holdout * len(units) + 0.5)), 1), len(units) - 1)
    order = sorted(range(len(units)), key=lambda u: (_rank_key(int(seed), keys[u]), keys[u]))
    held = {units[u] for u in order[:n_hold]}
    mask = np.isin(owner, list(held)) if mode == "conversation" else np.isin(np.arange(P), list(held))
    return ProbeSplit(tune=~mask, holdout=mask, by=mode)


def bootstrap_ci(values, n_boot: int = 1000, seed: int = 0, ci: float = 0.95) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: the mean of ``values`` and its percentile bootstrap interval.

    NaNs (probes a metric cannot score) are left out; no values give NaNs. The resamples
    are drawn as one matrix of indices per chunk, so a thousand resamples of ten thousand
    probes stay a few numpy calls.
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an int >= 1, got {n_boot!r}")
    if isinstance(ci, bool) or not isinstance(ci, (int, float)) or not 0 < ci < 1:
        raise ValueError(f"ci must be a fraction strictly between 0 and 1, got {ci!r}")
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[~np.isnan(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(int(n_boot))
    step = max(1, 4_000_000 // v.size)  # about 32 MB of indices at a time
    for s in range(0, int(n_boot), step):
        k = min(step, int(n_boot) - s)
        means[s:s + k] = v[rng.integers(0, v.size, size=(k, v.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1.0 - ci) / 2.0, 1.0 - (1.0 - ci) / 2.0])
    return float(v.mean()), float(lo), float(hi)


def _report_rows(values: Mapping[str, np.ndarray], split: ProbeSplit, n_boot: int, seed: int,
                 ci: float) -> pd.DataFrame:
    rows = []
    for m, v in values.items():
        for subset, mask in (("tune", split.tune), ("holdout", split.holdout)):
            part = v[mask]
            mean, lo, hi = bootstrap_ci(part, n_boot=n_boot, seed=seed, ci=ci)
            rows.append({"metric": "mrr" if m == "rr" else m, "subset": subset, "mean": mean, "lo": lo, "hi": hi,
                         "probes": int(np.count_nonzero(~np.isnan(part)))})
    return pd.DataFrame(rows, columns=["metric", "subset", "mean", "lo", "hi", "probes"])


def _check_split(split: ProbeSplit, n_probes: int) -> None:
    if not isinstance(split, ProbeSplit):
        raise TypeError(f"split must be a ProbeSplit from split_probes(), not {type(split).__name__}")
    if split.tune.shape != (n_probes,):
        raise ValueError(f"split covers {split.tune.size} probes; these replays have {n_probes}")


def split_report(replays, params: Mapping[str, Any] | None, split: ProbeSplit, policy="blend",
                 metrics: Sequence[str] = REPORT_METRICS, *, n_boot: int = 1000, seed: int = 0,
                 ci: float = 0.95) -> pd.DataFrame:
    """Tune and holdout means of each metric at one point, with bootstrap intervals.

    One row per metric and subset (``mean``, ``lo``, ``hi``, scored ``probes``); the mean
    of ``rr`` is reported as ``mrr``.
    """
    reps = _replays(replays)
    _check_split(split, sum(r.n_probes for r in reps))
    point = _point(params, "params")
    frame = sweep(reps, {k: [v] for k, v in point.items()}, policy=policy).per_probe
    unknown = [m for m in metrics if m not in frame.columns]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; per-probe metrics: {', '.join(M.METRICS)}")
    return _report_rows({m: frame[m].to_numpy(dtype=np.float64) for m in metrics}, split, n_boot, seed, ci)


@dataclass(frozen=True)
class TuningResult:
    """``points``: every grid point with its tune and holdout mean of the metric; ``best``:
    the point chosen on the tune probes alone; ``report``: that point's tune and holdout
    metrics with intervals (see :func:`split_report`)."""

    metric: str
    points: pd.DataFrame
    best: dict[str, Any]
    report: pd.DataFrame


def tune_holdout(replays, grid: Mapping[str, Any], split: ProbeSplit | None = None, metric: str = "ndcg",
                 policy="blend", *, metrics: Sequence[str] = REPORT_METRICS, n_boot: int = 1000, seed: int = 0,
                 ci: float = 0.95) -> TuningResult:
    """Choose the grid point best on the tune probes, then report it on the holdout ones.

    ``split`` defaults to :func:`split_probes` with its defaults. The best point's holdout
    numbers are the honest estimate; its tune numbers are optimistic by construction.
    """
    reps = _replays(replays)
    P = sum(r.n_probes for r in reps)
    split = split_probes(reps) if split is None else split
    _check_split(split, P)
    res = sweep(reps, grid, policy=policy)
    per = res.per_probe
    if metric not in per.columns:
        raise ValueError(f"unknown metric {metric!r}; per-probe metrics: {', '.join(M.METRICS)}")
    G = len(res.per_point)
    values = per[metric].to_numpy(dtype=np.float64).reshape(G, P)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a subset with nothing to score is NaN
        tune = np.nanmean(np.where(split.tune, values, np.nan), axis=1)
        hold = np.nanmean(np.where(split.holdout, values, np.nan), axis=1)
    name = "mrr" if metric == "rr" else metric
    points = res.per_point[["point", *res.params]].copy()
    points[f"tune_{name}"] = tune
    points[f"holdout_{name}"] = hold
    if np.all(np.isnan(tune)):
        raise ValueError(f"no tune probe can be scored on {metric!r}")
    key = np.where(np.isnan(tune), np.inf, tune) if metric in M.LOWER_IS_BETTER \
        else np.where(np.isnan(tune), -np.inf, -tune)
    g = int(np.argmin(key))  # first point on ties
    best = {k: _py(points[k].iloc[g]) for k in res.params}
    rows = per[per["point"] == g]
    report = _report_rows({m: rows[m].to_numpy(dtype=np.float64) for m in metrics}, split, n_boot, seed, ci)
    return TuningResult(metric=name, points=points, best=best, report=report)


def _py(v):
    if isinstance(v, (np.floating, float)):
        return None if math.isnan(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


# ---------------------------------------------------------------------------- inert parameters and Pareto


def inert_parameters(params: Mapping[str, Any], policy="blend", replays=None) -> dict[str, str]:
    """Parameters that cannot change any ranking at the point ``params``, each with why.

    A sweep over an inert parameter draws a flat line that looks like robustness.
    ``params`` names policy parameters and any of :data:`POINT_KEYS`. Flagged:
    ``half_life_days`` when ``recency_weight`` is 0, ``feedback_half_life_days`` when
    ``feedback_weight`` is 0, ``hybrid_weight`` unless ``mode`` is hybrid, and parameters
    of another policy. With ``replays``, missing values come from their settings, and the
    feedback parameters are inert when no memory in any pool has feedback.
    """
    pol = get_policy(policy)
    point = _point(params, "params")
    every = {p for pl in POLICIES.values() for p in pl.params}
    known = every | set(POINT_KEYS)
    unknown = sorted(set(point) - known)
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(known))}")
    reps = _replays(replays) if replays is not None else []

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
        mode = point.get("mode")
        if mode is None and reps:
            modes = {r.settings.get("mode") or "dense" for r in reps}
            mode = modes.pop() if len(modes) == 1 else None
        if mode != "hybrid":
            out["hybrid_weight"] = f"mode is {mode or 'dense'}; only hybrid fuses dense and lexical relevance"
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
    each probe ships under ``policy`` at ``params`` (as :func:`vxmem.workbench.sweep.rankings`, so as
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
        alive = _Timeline(replay, i)
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
            rows.append({"probe": i, "stale": old, "stale_label": _label(mems.get(old), old), "replacement": new,
                         "replacement_label": _label(mems.get(new), new),
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
