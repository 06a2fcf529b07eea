"""Sweep speed: ranked probe-points per second over a replay of 500 probes with pools of 40.

A probe-point is one probe ranked at one grid point (scored, ordered, cut to the limit
and the token budget, and scored on every metric). The replay is a real one (the
feedback_loop scenario, whose pools carry feedback histories) with its probes repeated
to 500. The baseline ranks the same pools one at a time with the same scoring functions,
the way a loop over ``recall()`` parameters would.

    .venv/bin/python benchmarks/bench_sweep.py
"""

from __future__ import annotations

import os
import time

import numpy as np

from vxmem.workbench.replay.record import Replay
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.policies import rank_pool
from vxmem.workbench.sweep.run import sweep
from vxmem.workbench.synth import generate

PROBES = 500


def tiled_replay(n_probes: int = PROBES) -> Replay:
    base = replay(generate("feedback_loop", rounds=6, topics=5))
    reps = -(-n_probes // base.n_probes)
    pools = {k: (np.concatenate([v] * reps)[:n_probes] if np.ndim(v) else v) for k, v in base.pools.items()}
    probes = [dict(p, probe=i) for i, p in enumerate((base.probes * reps)[:n_probes])]
    return Replay(name="bench", settings=base.settings, events=base.events, memories=base.memories, probes=probes,
                  pools=pools, pool_ids=(base.pool_ids * reps)[:n_probes], meta=base.meta)


def timed(fn, repeat: int = 3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    rep = tiled_replay()
    n_pool = int(rep.pools["n"].min())
    print(f"replay: {rep.n_probes} probes, pools of {n_pool}-{int(rep.pools['n'].max())} candidates, "
          f"feedback width {rep.pools['feedback_signs'].shape[2]}")
    grids = [
        ("blend 4 hl x 11 rw x 5 fw x 4 fhl", "blend",
         {"half_life_days": [1, 3, 7, 30], "recency_weight": list(np.linspace(0, 1, 11)),
          "feedback_weight": [0, 0.25, 0.5, 0.75, 1.0], "feedback_half_life_days": [5, 15, 30, 90]}),
        ("  ... x limit 5,10 x budget none,60", "blend",
         {"half_life_days": [1, 3, 7, 30], "recency_weight": list(np.linspace(0, 1, 11)),
          "feedback_weight": [0, 0.25, 0.5, 0.75, 1.0], "feedback_half_life_days": [5, 15, 30, 90],
          "limit": [5, 10], "token_budget": [None, 60]}),
        ("blend 6 hl x 21 rw", "blend",
         {"half_life_days": [0.5, 1, 3, 7, 30, 90], "recency_weight": list(np.linspace(0, 1, 21))}),
        ("langchain 20 decay rates", "langchain", {"decay_rate": list(np.linspace(0.0, 0.2, 20))}),
        ("generative_agents 20 decays", "generative_agents", {"recency_decay": list(np.linspace(0.9, 0.999, 20))}),
        ("memorybank 20 strengths", "memorybank", {"strength_days": list(np.geomspace(0.5, 500, 20))}),
    ]
    rows = []
    for label, policy, grid in grids:
        points = int(np.prod([len(v) for v in grid.values()]))
        one, _ = timed(lambda grid=grid, policy=policy: sweep(rep, grid, policy=policy, n_jobs=1), repeat=2)
        two, _ = timed(lambda grid=grid, policy=policy: sweep(rep, grid, policy=policy, n_jobs=2), repeat=2)
        rows.append((label, points, points * rep.n_probes, one, two))
    label, policy, grid = grids[0]
    with_frame, _ = timed(lambda: sweep(rep, grid, policy=policy, n_jobs=2).per_probe, repeat=2)
    rows.append(("  ... and its per-probe DataFrame", rows[0][1], rows[0][2], float("nan"), with_frame))
    # Baseline: one pool at a time, the same scoring functions, for 10 points.
    pools = [rep.pool(i) for i in range(rep.n_probes)]
    pts = [dict(half_life_days=h, recency_weight=r) for h in (1, 7) for r in (0.0, 0.25, 0.5, 0.75, 1.0)]

    def loop():
        for pt in pts:
            for pool in pools:
                rank_pool(pool, "blend", limit=10, **pt)

    secs, _ = timed(loop, repeat=1)
    rows.append(("baseline: one pool at a time", len(pts), len(pts) * rep.n_probes, secs, float("nan")))
    print(f"{'grid':38s} {'points':>7s} {'probe-points':>13s} {'1 thread s':>10s} {'M pp/s':>7s} "
          f"{'2 threads s':>11s} {'M pp/s':>7s}")
    for label, points, pp, one, two in rows:
        print(f"{label:38s} {points:7d} {pp:13d} {one:10.3f} {pp / one / 1e6:7.2f} {two:11.3f} {pp / two / 1e6:7.2f}")
    base = rows[-1][2] / rows[-1][3]
    print(f"speed-up of the first grid (2 threads) over the one-pool-at-a-time baseline: "
          f"{rows[0][2] / rows[0][4] / base:.0f}x")
    try:
        print(f"load average while running: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    except OSError:  # pragma: no cover
        pass

if __name__ == "__main__":
    main()
