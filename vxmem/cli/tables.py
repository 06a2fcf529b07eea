"""What the ``vxmem`` command shows while and after it works: a progress bar on a terminal, and a sweep's
table with its ties gathered.

- :func:`terminal_progress`: a ``progress(done, total, desc)`` callable that draws a tqdm bar on stderr when
  stderr is a terminal (a replay's events, one count over every conversation), else None.
- :func:`gather_ties`: a sweep's points sorted by a metric, with the points that tie on every metric shown
  once (the one nearest the policy's defaults) and how many tie, so the top of the table is not twenty
  copies of one result.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..workbench.analysis.metrics import LOWER_IS_BETTER

TIE_DIGITS = 9  # metrics equal to this many decimals are one result (float noise of the same rankings)


def terminal_progress(stream: Any = None) -> Callable[[int, int, str], None] | None:
    """A progress callable drawing one tqdm bar on ``stream`` (default stderr) when it is a terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return None
    from tqdm import tqdm

    bars: dict[str, Any] = {}

    def progress(done: int, total: int, desc: str) -> None:
        bar = bars.get("bar")
        if bar is None or bar.total != total:
            if bar is not None:
                bar.close()
            # The terminal's width, 80 where it reports none (a bare pty): tqdm draws nothing at width 0.
            bar = bars["bar"] = tqdm(total=total, desc=desc, file=stream, leave=False,
                                     ncols=shutil.get_terminal_size().columns)
        bar.set_description(desc, refresh=False)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()
            bars.pop("bar", None)

    return progress


def gather_ties(points: Any, sort: str, params: Sequence[str], defaults: Mapping[str, Any]) -> Any:
    """``points`` (a sweep's ``per_point``) best first on ``sort`` (lowest first for the leaks), one row per
    distinct result: points whose metrics all agree are one row, the one nearest ``defaults`` on ``params``
    (each scaled to its range), with ``tied``, how many points share it."""
    skip = {"policy", "point", "probes", *params}
    metrics = [c for c in points.columns if c not in skip and points[c].dtype.kind in "fiu"]
    key = points[metrics].round(TIE_DIGITS).fillna(np.inf).groupby(metrics, sort=False).ngroup()
    distance = np.zeros(len(points))
    for p in params:
        v = points[p].astype(float).fillna(0).to_numpy()
        span = float(v.max() - v.min()) or 1.0
        distance += np.abs(v - float(defaults.get(p) or 0)) / span
    frame = points.assign(_key=key.to_numpy(), _distance=distance)
    frame["tied"] = frame.groupby("_key")["_key"].transform("size")
    frame = frame.sort_values("_distance", kind="stable").drop_duplicates("_key")
    frame = frame.sort_values(sort, ascending=sort in LOWER_IS_BETTER, kind="stable")
    return frame.drop(columns=["_key", "_distance"])
