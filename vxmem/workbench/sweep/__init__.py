"""Sweeps: the cached pools of replays re-ranked at every point of a parameter grid, vectorised.

- :mod:`~vxmem.workbench.sweep.run`: :func:`sweep`, :func:`rankings`, :func:`sweep_modes` and
  :class:`SweepResult`;
- :mod:`~vxmem.workbench.sweep.grid`: the names a sweep takes, their checks, and the grid;
- :mod:`~vxmem.workbench.sweep.engine`: chunks of probes ranked at every grid point at once;
- :mod:`~vxmem.workbench.sweep.policies`: the ranking policies compared over the same pools;
- :mod:`~vxmem.workbench.sweep.holdout`: tuning on some probes, reporting on the others;
- :mod:`~vxmem.workbench.sweep.constraints`: bounds on other metrics that a best point must keep.

``from vxmem.workbench.sweep import sweep`` hands those names on, each module imported when its
name is first asked for.
"""

from ...core.lazy import handed_on

__all__ = ["sweep", "rankings", "sweep_modes", "SweepResult", "METRIC_COLUMNS"]
__getattr__ = handed_on(__name__, {name: "run" for name in __all__})
