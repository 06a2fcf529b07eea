"""What a chart needs beyond a library frame: whether there is anything to draw, the A/B
scatter's probes gathered where they coincide (a tie at 1.0 is most probes, drawn as one dot),
the points and labels of a quality-cost chart gathered the same way, and a time axis's format."""

from __future__ import annotations

import numpy as np
import pandas as pd

AB_POINT_COLUMNS = ["a", "b", "outcome", "probes", "examples"]
SPOT_COLUMNS = ["ms_per_recall", "recall", "text", "above"]
LABEL_SEP = " · "  # "default · blend": a preset, then its policies


def is_flat(values) -> bool:
    """Whether ``values`` hold one value only (all zero, say), NaNs left out: a chart of them
    draws nothing worth reading, so a page says so in words instead."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    return v.empty or bool(np.isclose(v.min(), v.max(), rtol=0.0, atol=1e-12))


def time_format(times) -> str:
    """The tick format of a time axis over ``times`` (datetimes): every label with its year, and the
    hour too where the whole span is under two days (Vega's own mixes "March", "Tue 05" and "12 PM")."""
    t = pd.to_datetime(pd.Series(times), utc=True, errors="coerce").dropna()
    short = t.empty or (t.max() - t.min()) < pd.Timedelta(days=2)
    return "%Y-%m-%d %H:%M" if short else "%Y-%m-%d"


def ab_points(frame: pd.DataFrame, metric: str, lower_is_better: bool = False, examples: int = 4) -> pd.DataFrame:
    """The probes of an A/B frame both sides can score on ``metric``, one row per distinct
    (A, B) pair: ``outcome`` (B better, B worse, tie), how many ``probes`` sit there and a
    few of their labels (``examples``), so a chart sizes a dot by its probes rather than
    drawing thirty on top of each other."""
    a, b = frame[f"{metric}_a"], frame[f"{metric}_b"]
    scored = frame[a.notna() & b.notna()]
    if scored.empty:
        return pd.DataFrame(columns=AB_POINT_COLUMNS)
    better = (scored[f"{metric}_b"] - scored[f"{metric}_a"]).to_numpy() * (-1 if lower_is_better else 1)
    names = scored["conversation"].astype(str) + ":" + scored["label"].astype(str)
    dots = pd.DataFrame({"a": scored[f"{metric}_a"].round(6).to_numpy(), "b": scored[f"{metric}_b"].round(6).to_numpy(),
                         "outcome": np.where(better > 1e-12, "B better", np.where(better < -1e-12, "B worse", "tie")),
                         "name": names.to_numpy()})
    out = dots.groupby(["a", "b", "outcome"], sort=True).agg(
        probes=("name", "size"),
        examples=("name", lambda s: ", ".join(s.iloc[:examples]) + (f" and {len(s) - examples} more"
                                                                       if len(s) > examples else "")))
    return out.reset_index()[AB_POINT_COLUMNS]


def spot_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """The labels a quality-cost chart writes (``frame``: :func:`~vxmem.workbench.views.presets_quality_cost`'s):
    one per spot (``ms_per_recall``, ``recall``) where points on the front sit, naming every
    such point there, so points that coincide (a preset's policies all have its milliseconds)
    get one label, not several drawn over each other: "fast · blend, cosine" for policies of
    one preset, the labels joined otherwise. ``above`` alternates along the front (False for
    the cheapest), so a chart that writes those labels up and to the left and the others down
    and to the right puts neighbours' labels on either side of the front, not on each other."""
    shown = frame[frame["on_front"].astype(bool)].dropna(subset=["ms_per_recall", "recall"])
    rows = []
    spots = shown.assign(x=shown["ms_per_recall"].round(9), y=shown["recall"].round(9))
    for j, ((x, y), group) in enumerate(spots.groupby(["x", "y"], sort=True)):
        if (group["kind"] == "policy").all() and group["preset"].nunique() == 1:
            text = f"{group['preset'].iloc[0]}{LABEL_SEP}{', '.join(group['policy'])}"
        else:
            text = ", ".join(group["label"])
        rows.append({"ms_per_recall": x, "recall": y, "text": text, "above": j % 2 == 1})
    return pd.DataFrame(rows, columns=SPOT_COLUMNS)


def spot_sizes(frame: pd.DataFrame, size: float = 90.0, step: float = 80.0) -> pd.Series:
    """A dot size per row of a quality-cost frame: ``size`` for a point alone at its spot
    (``ms_per_recall``, ``recall``); where points coincide (a preset's policies that recall
    alike), each one ``step`` bigger than the one after it, so they draw as rings around each
    other, the last on top and smallest, rather than the last hiding the others."""
    spot = [frame["ms_per_recall"].round(9), frame["recall"].round(9)]
    later = frame.groupby(spot, dropna=False, sort=False).cumcount(ascending=False)
    return (size + step * later).rename("size")
