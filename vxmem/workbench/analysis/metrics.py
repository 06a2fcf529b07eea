"""Retrieval metrics as small pure functions over arrays, in the style of scikit-learn's.

A ranked list is an array of ``gains`` along the last axis, best first: the graded
relevance of the memory at each rank, 0 for an irrelevant memory and for padding past the
end of the list. Leading axes are batches (sweep points, probes), so every function is
vectorised. ``k=None`` means the whole list.

- hit@k: 1 when any of the first k is relevant.
- recall@k: relevant memories in the first k over all relevant memories that existed
  (NaN when there were none: the probe cannot be scored on recall).
- reciprocal rank (mean over probes: MRR): 1 / rank of the first relevant memory, 0 if none.
- nDCG@k: DCG with linear gains and ``1 / log2(rank + 1)`` discounts over the ideal DCG of
  the relevant memories that existed (NaN when there were none).
- stale-leak@k: 1 when any of the first k is stale (superseded or expired per the probe).
- context-budget fill: tokens shipped over the token budget.
- tokens saved by consolidation: tokens of the turns consolidated minus tokens of the facts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ...core.checks import check_limit

METRICS = ("hit", "recall", "rr", "ndcg", "stale_leak", "foreign_leak", "session_recall", "budget_fill")

# Metrics where a lower value is better: a leak of stale or foreign memories.
LOWER_IS_BETTER = frozenset({"stale_leak", "foreign_leak"})
SMALL_SAMPLE = 30  # below this many probes a mean is far from certain: the CLI and the dashboard say so


def _top(x: ArrayLike, k: int | None) -> np.ndarray:
    """The first ``k`` ranked items of ``x`` (all of them for None); ``k`` checked."""
    x = np.asarray(x)
    return x if k is None else x[..., : check_limit(k, "k")]


def hit_at_k(gains: ArrayLike, k: int | None = None) -> np.ndarray:
    """1.0 where any of the first ``k`` ranked items is relevant, else 0.0."""
    return np.any(_top(gains, k) > 0, axis=-1).astype(np.float64)


def recall_at_k(gains: ArrayLike, n_relevant: ArrayLike, k: int | None = None) -> np.ndarray:
    """Relevant items in the first ``k`` over ``n_relevant`` (NaN where ``n_relevant`` is 0)."""
    found = np.sum(_top(gains, k) > 0, axis=-1).astype(np.float64)
    n = np.asarray(n_relevant, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.minimum(found / np.where(n > 0, n, 1.0), 1.0), np.nan)


def reciprocal_rank(gains: ArrayLike, k: int | None = None) -> np.ndarray:
    """1 / rank of the first relevant item among the first ``k``; 0.0 when there is none."""
    rel = _top(gains, k) > 0
    if rel.shape[-1] == 0:  # an empty list finds nothing
        return np.zeros(rel.shape[:-1])
    first = np.argmax(rel, axis=-1)
    return np.where(np.any(rel, axis=-1), 1.0 / (first + 1.0), 0.0)


def mrr(gains: ArrayLike, k: int | None = None) -> float:
    """Mean reciprocal rank over all leading axes (NaN for no rankings at all)."""
    rr = reciprocal_rank(gains, k)
    return float(rr.mean()) if rr.size else float("nan")


def dcg_at_k(gains: ArrayLike, k: int | None = None) -> np.ndarray:
    """Discounted cumulative gain: ``sum gain_i / log2(i + 1)`` over ranks i = 1..k."""
    return _dcg(np.asarray(_top(gains, k), dtype=np.float64))


def _dcg(g: np.ndarray) -> np.ndarray:
    discounts = 1.0 / np.log2(np.arange(2, g.shape[-1] + 2))
    return np.sum(g * discounts, axis=-1)


def ndcg_at_k(gains: ArrayLike, ideal_gains: ArrayLike, k: int | None = None) -> np.ndarray:
    """DCG@k of ``gains`` over DCG@k of ``ideal_gains`` sorted best first (NaN when that is 0).

    ``ideal_gains`` are the grades of every relevant item that existed, in any order.
    """
    ideal = -np.sort(-np.asarray(ideal_gains, dtype=np.float64), axis=-1)
    top = np.asarray(_top(gains, k), dtype=np.float64)
    idcg = _dcg(ideal[..., : top.shape[-1] if k is None else k])
    dcg = _dcg(top)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1.0), np.nan)


def stale_leak_at_k(stale: ArrayLike, k: int | None = None) -> np.ndarray:
    """1.0 where any of the first ``k`` ranked items is stale (superseded or expired)."""
    return np.any(_top(stale, k), axis=-1).astype(np.float64)


def session_recall_at_k(session_bits: ArrayLike, n_sessions: ArrayLike, k: int | None = None) -> np.ndarray:
    """Share of the probe's answer sessions that the first ``k`` items come from.

    ``session_bits`` holds, per ranked item, a bit mask of which answer session it belongs
    to (0 for none); NaN where the probe names no answer session.
    """
    bits = np.bitwise_or.reduce(np.asarray(_top(session_bits, k), dtype=np.int64), axis=-1)
    found = np.bitwise_count(bits).astype(np.float64)
    n = np.asarray(n_sessions, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, found / np.where(n > 0, n, 1.0), np.nan)


def budget_fill(tokens_used: ArrayLike, token_budget: ArrayLike | None) -> np.ndarray:
    """Tokens shipped over the budget (NaN where there is no budget: None or inf)."""
    used = np.asarray(tokens_used, dtype=np.float64)
    if token_budget is None:
        return np.full(used.shape, np.nan)
    b = np.asarray(token_budget, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(b) & (b > 0), used / np.where(b > 0, b, 1.0), np.nan)


def tokens_saved(tokens_before: ArrayLike, tokens_after: ArrayLike) -> np.ndarray:
    """Tokens consolidation saved: what the turns held minus what their facts hold."""
    return np.asarray(tokens_before) - np.asarray(tokens_after)


def ranked_metrics(gains: ArrayLike, stale: ArrayLike, n_relevant: ArrayLike, ideal_gains: ArrayLike,
                   k: int | None = None, foreign: ArrayLike | None = None, session_bits: ArrayLike | None = None,
                   n_sessions: ArrayLike | None = None, tokens_used: ArrayLike | None = None,
                   token_budget: ArrayLike | None = None) -> dict[str, np.ndarray]:
    """Every per-probe metric of ranked lists at once, as a dict of arrays.

    hit and reciprocal rank are NaN where ``n_relevant`` is 0: a probe with nothing to
    find (an abstention question, a probe that only lists stale labels) scores on
    stale-leak alone and does not drag the means down.
    """
    none = np.asarray(n_relevant) == 0
    out = {
        "hit": np.where(none, np.nan, hit_at_k(gains, k)), "recall": recall_at_k(gains, n_relevant, k),
        "rr": np.where(none, np.nan, reciprocal_rank(gains, k)), "ndcg": ndcg_at_k(gains, ideal_gains, k),
        "stale_leak": stale_leak_at_k(stale, k),
    }
    if foreign is not None:
        out["foreign_leak"] = stale_leak_at_k(foreign, k)
    if session_bits is not None and n_sessions is not None:
        out["session_recall"] = session_recall_at_k(session_bits, n_sessions, k)
    if tokens_used is not None:
        out["budget_fill"] = budget_fill(tokens_used, token_budget)
    return out


def aggregate(frame: Any, by: Sequence[str] = (), metrics: Iterable[str] | None = None, category: bool = False) -> Any:
    """Mean of each metric column per group (NaNs skipped), with the probe count.

    ``by`` names the grouping columns (e.g. the sweep's parameter columns);
    ``category=True`` adds the probe category to them when the data has one. The mean of
    ``rr`` is the MRR.
    """
    import pandas as pd

    cols = [c for c in (metrics or METRICS) if c in frame.columns]
    keys = list(by)
    if category and "category" in frame.columns and frame["category"].notna().any():
        keys.append("category")
    if not keys:
        row = {("mrr" if c == "rr" else c): frame[c].mean() for c in cols}
        row["probes"] = len(frame)
        return pd.DataFrame([row])
    g = frame.groupby(keys, dropna=False, sort=True)
    out = g[cols].mean()
    out["probes"] = g.size()
    return out.reset_index().rename(columns={"rr": "mrr"})


def by_category_and_conversation(frame: Any, metric: str = "recall", interval: Any = None) -> Any:
    """The benchmark table papers print: ``metric``'s mean per probe category (rows, then "all")
    and conversation (columns, then "all"), each cell ``"0.847 [0.802, 0.889]"`` when
    ``interval`` (values -> (mean, lo, hi), e.g. a bootstrap) is given, else the mean; "" where a
    category has no scored probe in a conversation. ``frame``: one row per probe with
    ``conversation``, ``category`` and ``metric``."""
    import pandas as pd

    def cell(values: Any) -> str:
        v = pd.to_numeric(values, errors="coerce").dropna().to_numpy()
        if not v.size:
            return ""
        if interval is None:
            return f"{v.mean():.3f}"
        mean, lo, hi = interval(v)
        return f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"

    cats = [c for c in pd.unique(frame["category"].astype(str))]
    convs = list(pd.unique(frame["conversation"].astype(str)))
    rows = []
    for cat in [*sorted(cats), "all"]:
        part = frame if cat == "all" else frame[frame["category"].astype(str) == cat]
        row = {"category": cat}
        for conv in [*convs, "all"]:
            row[conv] = cell((part if conv == "all" else part[part["conversation"].astype(str) == conv])[metric])
        row["probes"] = int(pd.to_numeric(part[metric], errors="coerce").notna().sum())
        rows.append(row)
    return pd.DataFrame(rows)
