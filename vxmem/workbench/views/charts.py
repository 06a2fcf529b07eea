"""What a chart needs beyond a library frame: whether there is anything to draw, and the A/B
scatter's probes gathered where they coincide (a tie at 1.0 is most probes, drawn as one dot)."""

from __future__ import annotations

import numpy as np
import pandas as pd

AB_POINT_COLUMNS = ["a", "b", "outcome", "probes", "examples"]


def is_flat(values) -> bool:
    """Whether ``values`` hold one value only (all zero, say), NaNs left out: a chart of them
    draws nothing worth reading, so a page says so in words instead."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    return v.empty or bool(np.isclose(v.min(), v.max(), rtol=0.0, atol=1e-12))


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
