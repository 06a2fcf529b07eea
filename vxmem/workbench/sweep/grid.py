"""A sweep's parameters: which names a sweep takes, their checks, and the grid they make.

:func:`make_grid` turns a grid (``{"half_life_days": [1, 7, 30], "limit": 5}``) over some
replays into a :class:`Grid`: one array axis per swept parameter, and each probe's own value
of every parameter left out (its replay's setting, else the policy's default).
:func:`check_sweepable` and :func:`check_pool_sizes` refuse what recorded pools cannot rank,
before any work; :func:`as_point` reads one point's parameters as a dict.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ranking import scoring
from ...ranking.blend import BLEND_FIELDS, Blend
from ..replay.record import Replay
from .policies import Policy, check_param

SWEEP_KEYS = ("limit", "token_budget", "hybrid_weight")
RANKING_KEYS = ("token_budget", "limit", "hybrid_weight")  # grid axes come in this order, then the policy's


def as_point(params: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """``params`` (one value per parameter) as a new dict; None is no parameters at all.
    ``name`` names the argument in the error a non-mapping gets."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"{name} must be a dict of parameter -> value, not {type(params).__name__}")
    return dict(params)


def blend_axes(blends: Blend | Sequence[Blend], replays: Sequence[Replay]) -> dict[str, list[float]]:
    """A set of blends (one, or :meth:`Blend.grid <vxmem.ranking.blend.Blend.grid>`'s) as a
    sweep grid: each field with its distinct values. The hybrid weight is left out when every
    blend and every replay has the same one (there is nothing to sweep, and only hybrid pools
    take it). The set must be the whole product of those values."""
    points = [blends] if isinstance(blends, Blend) else list(blends)
    if not points or not all(isinstance(b, Blend) for b in points):
        raise TypeError("a sweep grid is a mapping of parameter -> values, a Blend, or a list of Blends")
    axes = {f: sorted({getattr(b, f) for b in points}) for f in BLEND_FIELDS}
    if len(axes["hybrid_weight"]) == 1 and {r.hybrid_weight for r in replays} == set(axes["hybrid_weight"]):
        del axes["hybrid_weight"]
    if int(np.prod([len(v) for v in axes.values()])) != len(set(points)):
        raise ValueError(f"these {len(points)} blends are not a grid (every combination of their values): "
                         "make one with Blend.grid(...), or sweep them one at a time")
    return axes


def _as_list(name: str, values: Any) -> list[Any]:
    """A grid axis's values: a list, tuple, array, range, set (in sorted order) or any other
    iterable (a generator, a Series) as they come; a single value is a list of one."""
    if isinstance(values, (set, frozenset)):
        try:
            values = sorted(values, key=lambda v: (v is None, v))
        except TypeError:  # values of several types: each is checked, and refused, below
            values = list(values)
    elif isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        values = [values]
    values = list(values)
    if not values:
        raise ValueError(f"grid value list for {name} is empty")
    return values


def _check_int(name: str, v: Any, allow_none: bool = False) -> int | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} values must be ints >= 1{' or None' if allow_none else ''}, got {v!r}")
    if v < 1:
        raise ValueError(f"{name} values must be ints >= 1{' or None' if allow_none else ''}, got {v!r}")
    return int(v)


def _check_values(name: str, values: list[Any]) -> list[Any]:
    if name in ("limit", "token_budget"):
        return [_check_int(name, v, allow_none=name == "token_budget") for v in values]
    return [check_param(name, v) for v in values]


def _inf_if_none(value: float | None) -> float:
    """A parameter value as a float; None (a token budget of none) is no limit at all."""
    return np.inf if value is None else float(value)


def _per_probe(replays: Sequence[Replay], value: Callable[[Replay], Any]) -> list[Any]:
    """``value(replay)`` once for each of the replay's probes, over all replays."""
    return [v for r in replays for v in [value(r)] * r.n_probes]


@dataclass
class Grid:
    """What ranks the probes at every point: the policy, the grid's axes (``names``, each
    with its ``values``), each probe's own value of everything not swept (``fixed``),
    whether the pools are hybrid and reranked, and the longest list any point ranks (``kmax``)."""

    policy: Policy
    names: list[str]
    values: dict[str, list[Any]]
    fixed: dict[str, np.ndarray]
    hybrid: bool
    reranked: bool
    kmax: int
    floors: tuple[int, int] = (scoring.POOL_FLOOR, scoring.RERANK_FLOOR)
    smoothed: bool = False
    cascade: bool = False  # a final stage reorders the blend's top limit (pools["final_score"])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(self.values[k]) for k in self.names)

    @property
    def points(self) -> list[tuple[Any, ...]]:
        return list(itertools.product(*[self.values[k] for k in self.names])) if self.names else [()]

    def param(self, k: str, sl: slice, n_probes: int) -> np.ndarray:
        """Parameter ``k`` for the probes of ``sl``: its grid axis, shape (*grid, 1, 1) with
        ``k``'s values along its own axis, or each probe's own value, shape (probes, 1)."""
        if k in self.values:
            shp = [1] * len(self.names)
            shp[self.names.index(k)] = len(self.values[k])
            vals = [_inf_if_none(v) for v in self.values[k]]
            return np.asarray(vals, dtype=np.float64).reshape(shp + [1, 1])
        return self.fixed[k][sl].reshape(n_probes, 1)


def make_grid(replays: Sequence[Replay], pol: Policy, grid: Mapping[str, Any], pool_limits: np.ndarray) -> Grid:
    """The :class:`Grid` of ``grid``'s checked values over ``replays`` (whose stacked
    ``pool_limits`` are the probes' recorded limits)."""
    names = [k for k in RANKING_KEYS if k in grid] + [k for k in pol.params if k in grid]
    values = {k: _check_values(k, _as_list(k, grid[k])) for k in names}
    probes = pool_limits.size

    def own(value: Callable[[Replay], float]) -> np.ndarray:  # each probe's value, from its replay
        return np.array(_per_probe(replays, value), dtype=np.float64)

    def setting(k: str) -> Callable[[Replay], float]:
        return lambda r: check_param(k, r.settings.get(k, pol.defaults[k]))

    fixed = {k: own(setting(k)) for k in pol.params if k not in values}
    fixed["limit"] = pool_limits.astype(np.float64)
    fixed["token_budget"] = own(lambda r: _inf_if_none(r.settings.get("token_budget")))
    fixed["hybrid_weight"] = own(lambda r: r.hybrid_weight)
    limits = values.get("limit")
    kmax = max(limits) if limits else (int(pool_limits.max()) if probes else 1)
    return Grid(pol, names, values, fixed, hybrid=any(r.mode == "hybrid" for r in replays),
                reranked=any(r.rerank is not None for r in replays), kmax=kmax, floors=replays[0].floors,
                smoothed=replays[0].smoothed, cascade=replays[0].cascade)


def check_sweepable(replays: list[Replay], pol: Policy, grid: Mapping[str, Any]) -> None:
    """Refuse a grid the recorded pools of ``replays`` cannot rank under ``pol``."""
    allowed = set(pol.params) | set(SWEEP_KEYS)
    unknown = set(grid) - allowed
    if unknown:
        raise ValueError(f"cannot sweep {sorted(unknown)[0]!r} with policy {pol.name!r}; "
                         f"sweepable: {', '.join(sorted(allowed))}")
    if any(r.settings.get("score_gap") is not None for r in replays):
        raise ValueError("sweeps do not apply score_gap; replay with score_gap=None")
    if "hybrid_weight" in grid and {r.mode for r in replays} != {"hybrid"}:
        raise ValueError("hybrid_weight can be swept only over replays recorded with mode='hybrid'")
    if "hybrid_weight" in grid and any(r.rerank is not None and not _scored_whole_pools(r) for r in replays):
        weights = [check_param("hybrid_weight", w) for w in _as_list("hybrid_weight", grid["hybrid_weight"])]
        if any(w != r.hybrid_weight for w in weights for r in replays if r.rerank is not None):
            raise ValueError("hybrid_weight decides which candidates a reranked pool holds, and this replay has "
                             "the reranker's scores of those its own weight chose only: replay it again (a "
                             "reranked hybrid replay now scores every candidate) or with rerank=False")
    if "hybrid_weight" in grid and any(r.cascade for r in replays):
        weights = [check_param("hybrid_weight", w) for w in _as_list("hybrid_weight", grid["hybrid_weight"])]
        if any(w != r.hybrid_weight for w in weights for r in replays if r.cascade):
            raise ValueError("hybrid_weight decides which candidates the accurate preset's cross-encoder reads, "
                             "and this replay has its scores of those its own weight chose only: replay with "
                             "that hybrid_weight, or sweep it over another preset")
    if len({(r.floors, r.smoothed, r.cascade) for r in replays}) > 1:
        raise ValueError("sweep replays recorded with one second stage together: these read pools of different "
                         "depths (replay them with one preset)")
    if len({r.rerank is None for r in replays}) > 1 or len({r.mode == "hybrid" for r in replays}) > 1:
        raise ValueError("sweep replays recorded with one pipeline together: these mix reranked and plain, or "
                         "hybrid and other modes (sweep_modes() takes one group per mode)")


def _scored_whole_pools(replay: Replay) -> bool:
    """Whether a reranked replay holds the reranker's score of every recorded candidate."""
    scores, n = replay.pools.get("rerank_score"), replay.pools["n"]
    if scores is None:
        return False
    recorded = np.arange(scores.shape[1]) < n[:, None]
    return bool(np.isfinite(scores[recorded]).all())


def check_pool_sizes(replays: list[Replay], g: Grid) -> None:
    """A swept limit needs its whole pool recorded (and, for hybrid, exactly that pool)."""
    limits = g.values.get("limit")
    if not limits or not any(r.n_probes for r in replays):
        return
    floor = replays[0].floors[0]
    recorded = {scoring.pool_size(int(r.settings["pool_limit"]), floor) for r in replays if r.n_probes}
    need = max(scoring.pool_size(lim, floor) for lim in limits)
    if need > min(recorded):
        raise ValueError(f"limit {max(limits)} needs pools of {need} candidates; these replays recorded "
                         f"{min(recorded)} (replay with pool_limit={max(limits)})")
