"""Constrained picking: a best point chosen only among the points that keep a bound on another metric.

"The best nDCG" alone picks whatever leaks most if leaking costs nothing; a researcher asks for
"the best nDCG with stale-leak at most 0.1". A :class:`Constraint` is one such bound,
``metric op value`` with ``op`` ``<=`` or ``>=``; :func:`parse_constraint` reads it from text
(``"stale_leak<=0.1"``), :func:`satisfied` says which rows of a sweep's frame keep every bound and
:func:`unmet` explains, when none does, how close the grid came.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["Constraint", "parse_constraint", "satisfied", "unmet"]

_TEXT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_@]*)\s*(<=|>=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True)
class Constraint:
    """``metric op value``: a point keeps it when its ``metric`` is ``<=`` (or ``>=``) ``value``.
    A point whose metric is NaN (nothing to score) keeps no bound."""

    metric: str
    op: str
    value: float

    def __post_init__(self) -> None:
        if self.op not in ("<=", ">="):
            raise ValueError(f"a constraint's operator is <= or >=, not {self.op!r}")
        if not np.isfinite(self.value):
            raise ValueError(f"a constraint's bound must be a finite number, not {self.value!r}")

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"

    def holds(self, values: pd.Series | np.ndarray) -> np.ndarray:
        """Whether each of ``values`` keeps the bound."""
        v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)
        with np.errstate(invalid="ignore"):
            ok = v <= self.value if self.op == "<=" else v >= self.value
        return ok & ~np.isnan(v)


def parse_constraint(text: str, metrics: Sequence[str] | None = None) -> Constraint:
    """``"stale_leak<=0.1"`` as a :class:`Constraint`; ``metrics``, if given, are the names it may bound."""
    m = _TEXT.match(text if isinstance(text, str) else "")
    if m is None:
        raise ValueError(f"{text!r} is not a constraint; write METRIC<=VALUE or METRIC>=VALUE, "
                         "for example stale_leak<=0.1")
    name, op, value = m.group(1), m.group(2), float(m.group(3))
    if metrics is not None and name not in metrics:
        raise ValueError(f"{text!r}: {name!r} is not a metric here; choose from {', '.join(metrics)}")
    return Constraint(name, op, value)


def satisfied(frame: pd.DataFrame, constraints: Sequence[Constraint]) -> np.ndarray:
    """The rows of ``frame`` that keep every one of ``constraints`` (a column per bounded metric)."""
    ok = np.ones(len(frame), dtype=bool)
    for c in constraints:
        if c.metric not in frame.columns:
            raise ValueError(f"cannot bound {c.metric!r}: the sweep has no such metric "
                             f"(it has {', '.join(map(str, frame.columns))})")
        ok &= c.holds(frame[c.metric])
    return ok


def unmet(frame: pd.DataFrame, constraints: Sequence[Constraint]) -> str:
    """Why no row of ``frame`` keeps ``constraints``: each bound no point reaches, with the best value on the grid."""
    parts = []
    for c in constraints:
        v = pd.to_numeric(frame[c.metric], errors="coerce")
        if not c.holds(v).any():
            best = v.min() if c.op == "<=" else v.max()
            parts.append(f"{c} (the best point of the grid reaches {best:.3f})" if pd.notna(best)
                         else f"{c} (no point can be scored on {c.metric})")
    together = "" if parts else " (each bound is met somewhere, never all at one point)"
    return "no point of the grid keeps " + "; ".join(parts or [", ".join(map(str, constraints))]) + together
