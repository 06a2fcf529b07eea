"""Sweep speed: ranked probe-points per second over a replay of 500 probes with pools of 40.

A probe-point is one probe ranked at one grid point (scored, ordered, cut to the limit
and the token budget, and scored on every metric). The replay is a real one (the
feedback_loop scenario, whose pools carry feedback histories) with its probes repeated
to 500. The baseline ranks the same pools one at a time with the same scoring functions,
the way a loop over ``recall()`` parameters would.

    .venv/bin/python -m benchmarks.bench_sweep
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import numpy as np

from benchmarks.harness import Report, best_of, flags
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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=PROBES, help="probes in the tiled replay")
    args = flags(ap, rounds=2, rounds_help="rounds per grid (the best one counts)").parse_args(argv)
    rep = tiled_replay(args.probes)
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
        one, _ = best_of(lambda grid=grid, policy=policy: sweep(rep, grid, policy=policy, n_jobs=1), args.rounds)
        two, _ = best_of(lambda grid=grid, policy=policy: sweep(rep, grid, policy=policy, n_jobs=2), args.rounds)
        rows.append((label, points, points * rep.n_probes, one, two))
    label, policy, grid = grids[0]
    with_frame, _ = best_of(lambda: sweep(rep, grid, policy=policy, n_jobs=2).per_probe, args.rounds)
    rows.append(("  ... and its per-probe DataFrame", rows[0][1], rows[0][2], float("nan"), with_frame))
    # Baseline: one pool at a time, the same scoring functions, for 10 points.
    pools = [rep.pool(i) for i in range(rep.n_probes)]
    pts = [dict(half_life_days=h, recency_weight=r) for h in (1, 7) for r in (0.0, 0.25, 0.5, 0.75, 1.0)]

    def loop():
        for pt in pts:
            for pool in pools:
                rank_pool(pool, "blend", limit=10, **pt)

    secs, _ = best_of(loop, 1)
    rows.append(("baseline: one pool at a time", len(pts), len(pts) * rep.n_probes, secs, float("nan")))
    report = Report(f"sweep speed: {rep.n_probes} probes, pools of {n_pool}-{int(rep.pools['n'].max())} candidates")
    report.table("sweep", [{"grid": label, "points": points, "probe-points": pp, "1 thread s": f"{one:.3f}",
                            "M pp/s (1 thread)": f"{pp / one / 1e6:.2f}", "2 threads s": f"{two:.3f}",
                            "M pp/s (2 threads)": f"{pp / two / 1e6:.2f}"} for label, points, pp, one, two in rows])
    report.print()
    base = rows[-1][2] / rows[-1][3]
    print(f"speed-up of the first grid (2 threads) over the one-pool-at-a-time baseline: "
          f"{rows[0][2] / rows[0][4] / base:.0f}x")
    print(f"load average while running: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
