"""Quality per millisecond of each recall preset, in one run: R@10, coverage, time per recall and write.

    .venv/bin/python -m benchmarks.bench_quality --locomo PATH/locomo10.json
    .venv/bin/python -m benchmarks.bench_quality --locomo PATH --presets fast,default --synthetic none

For each preset (``fast``, ``default``, ``accurate``) it prints, on LoCoMo conversations (a
path: the file is not shipped) and on the shipped synthetic datasets:

- R@10 of the evidence turns, overall, per category and per conversation (LoCoMo), with
  the overall R@5 and MRR@10 (how high the first evidence turn sits); the replay's mean
  recall@10 and stale-leak@10 (synthetic);
- first-stage coverage: the evidence within the first stage's top D, D being how deep the
  preset's second stage reads (120 for late interaction, which the accurate preset's cascade
  runs too before its cross-encoder; 10 for fast);
- ms per recall, p50 and p99, beside the floor measured in the same run: the query's bge-small
  embedding on onnxruntime plus one exact dot product over the conversation's turns. Each round
  asks every question of one preset, then of the next (the starting preset rotating from round
  to round, so load drifts hit all alike): asked one question at a time in turn, the accurate
  preset's cross-encoder evicts the caches the next preset's recall would find warm, and every
  other preset's p99 doubles (2.2x its p50 instead of 1.3-1.4x for the default), which no user
  who keeps one preset would see;
- ms per ``remember()`` of a turn (one call each, the first WRITES turns of each conversation),
  which for the default preset includes storing the turn's token vectors.

Every question is asked across the whole conversation at the last turn + 1 day.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.corpora import synthetic_datasets
from benchmarks.harness import Report, Timer, flags, parse_list, percentiles
from vxmem import Vectrix
from vxmem.core.clock import DAY
from vxmem.memory.stages import PRESETS
from vxmem.models.embed import default_embedder
from vxmem.ranking import deep, scoring
from vxmem.workbench.datasets import load_jsonl, load_locomo
from vxmem.workbench.datasets.locomo import RETRIEVAL_CATEGORIES
from vxmem.workbench.replay.run import replay

WRITES = 40  # turns per conversation timed one remember() at a time, per preset
DEPTH = {"fast": 10, "default": 120, "accurate": 120}  # how deep each preset's second stage reads


def _build(conv: Any, preset: str, timed: int) -> tuple[Vectrix, dict[str, str], list[float]]:
    """A fresh in-memory Vectrix of ``preset`` holding the conversation's turns (the first
    ``timed`` remembered one call each, timed; the rest in one batch); memory id -> dia_id."""
    db = Vectrix(preset=preset)
    db.warm()
    turns = [e for e in conv.events if e.type == "turn"]
    id2dia, ms = {}, []
    for ev in turns[:timed]:
        with Timer() as t:
            mid = db.remember(ev.text, session=ev.session, role=ev.role, timestamp=ev.time)
        ms.append(t.wall * 1e3)
        id2dia[mid] = ev.label
    rest = turns[timed:]
    ids = db.remember_many([{"text": e.text, "session": e.session, "role": e.role, "timestamp": e.time} for e in rest])
    id2dia.update(zip(ids, (e.label for e in rest)))
    return db, id2dia, ms


def _coverage(db: Vectrix, q: str, now: float, preset: str, id2dia: dict[str, str]) -> list[str]:
    """The dia_ids of the turns the preset's second stage reads for ``q`` (for fast, the top 10
    of its first stage): the first stage's best, by its relevance as the stage orders it."""
    mem, depth = db.memory, DEPTH[preset]
    request = mem.request(q, now=now, limit=10, rerank=False)
    gathered = mem.second_stage(mem.request(q, now=now, limit=10)).pool_floor  # as deep as the preset gathers
    pool = mem.pool_for(request, scoring.pool_size(10, gathered))
    relevance = np.asarray(pool.relevance)
    prev, nxt = deep.neighbour_slots(np.asarray(pool.neighbour_key))  # every preset reads the smoothed first stage
    relevance = deep.read_slots(relevance, pool.ts, np.ones(len(pool), bool), prev, nxt, 10, depth)[0]
    order = scoring.rank_order(relevance, np.asarray(pool.ts))[:depth]
    return [id2dia[pool.ids[i]] for i in order.tolist()]


def _forget_scores(db: Vectrix) -> None:
    """Clear the rerankers' memos of (query, text) scores, so a timing round after the first
    scores from the model again instead of reading the previous round's answers."""
    for stage in (db.memory.reranker, db.memory.final):
        clear = getattr(stage, "clear_cache", None)
        if callable(clear):
            clear()


def _floor(embed: Any, matrix: np.ndarray, q: str) -> float:
    with Timer() as t:
        v = np.asarray(embed([q]), dtype=np.float32)[0]
        sims = matrix @ v
        np.argpartition(-sims, min(10, sims.size - 1))[:10]
    return t.wall * 1e3


def _recall_times(dbs: dict, presets: Sequence[str], qs: list, now: float, rounds: int, embed: Any,
                  matrix: np.ndarray) -> list[dict]:
    """Timing rounds: each preset (and the floor) asks every question in turn, the start rotating."""
    times = []
    for r in range(rounds):
        order = ["floor", *presets]
        for p in order[r % len(order):] + order[: r % len(order)]:
            for pr in qs:
                if p == "floor":
                    ms = _floor(embed, matrix, pr.query)
                else:
                    _forget_scores(dbs[p][0])
                    with Timer() as t:
                        dbs[p][0].recall(pr.query, now=now)
                    ms = t.wall * 1e3
                times.append({"preset": p, "kind": "recall", "ms": ms})
    return times


def _scores(name: str, p: str, qs: list, now: float, db: Vectrix, id2dia: dict[str, str]) -> list[dict]:
    """R@10, R@5, MRR@10 and first-stage coverage of each question."""
    rows = []
    for pr in qs:
        ev = set(pr.relevant)
        top = [id2dia[i] for i in db.recall(pr.query, now=now).ids[:10]]
        first = _coverage(db, pr.query, now, p, id2dia)
        rank1 = next((i + 1 for i, x in enumerate(top) if x in ev), None)
        rows.append({"preset": p, "conversation": name, "category": pr.category,
                     "r10": len(ev & set(top)) / len(ev), "r5": len(ev & set(top[:5])) / len(ev),
                     "mrr": 1.0 / rank1 if rank1 else 0.0, "coverage": len(ev & set(first)) / len(ev)})
    return rows


def locomo(path: str, presets: Sequence[str], rounds: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (preset, question) and one per (preset, timing kind)."""
    os.environ.pop("VXMEM_EMBEDDER", None)  # the shipped default embedder, whatever the shell says
    rows, times = [], []
    embed = default_embedder()
    for conv in load_locomo(path):
        now = max(e.time for e in conv.events if e.type == "turn") + DAY
        dbs = {}
        for p in presets:
            dbs[p] = _build(conv, p, WRITES)
            times += [{"preset": p, "kind": "write", "ms": m} for m in dbs[p][2]]
        db0, id2dia0, _ = dbs[presets[0]]
        with db0.engine.locked() as m:
            matrix = np.asarray(m.vectors(m.live_positions()), dtype=np.float32)
        qs = [pr for pr in conv.probes if pr.relevant]
        times += _recall_times(dbs, presets, qs, now, rounds, embed, matrix)
        for p in presets:
            rows += _scores(conv.name, p, qs, now, *dbs[p][:2])
        for db, _, _ in dbs.values():
            db.close()
    return pd.DataFrame(rows), pd.DataFrame(times)


def synthetic(files: list[str], presets: Sequence[str]) -> pd.DataFrame:
    """Each shipped synthetic dataset replayed with each preset: mean recall@10, stale-leak@10."""
    os.environ.pop("VXMEM_EMBEDDER", None)
    out = []
    for f in files:
        conv = load_jsonl(f)
        for p in presets:
            rep = replay(conv, {"preset": p, "rerank": p != "fast"}, progress=False)
            probes = pd.DataFrame(rep.probes)
            out.append({"dataset": os.path.basename(f).removesuffix(".jsonl"), "preset": p,
                        "recall@10": probes["recall"].mean(), "stale_leak@10": probes["stale_leak"].mean()})
    return pd.DataFrame(out)


def locomo_table(rows: pd.DataFrame, times: pd.DataFrame, presets: Sequence[str], report: Report) -> None:
    """The LoCoMo table: R@10 by category and conversation, R@5, MRR, coverage, ms beside the floor."""
    cats = [c for c in RETRIEVAL_CATEGORIES if c in set(rows["category"])]
    convs = sorted(set(rows["conversation"]))
    rec = {p: percentiles(g["ms"]) for p, g in times[times.kind == "recall"].groupby("preset")}
    p50 = {p: v["p50"] for p, v in rec.items()}
    p99 = {p: v["p99"] for p, v in rec.items()}
    write = times[times.kind == "write"].groupby("preset")["ms"].median()
    floor = p50["floor"]
    table = []
    for p in presets:
        d = rows[rows.preset == p]
        worst = d.groupby("category")["coverage"].mean().min()
        row = {"preset": p} | {f"{c} R@10": f"{d[d.category == c].r10.mean():.3f}" for c in cats}
        row |= {f"{c} R@10": f"{d[d.conversation == c].r10.mean():.3f}" for c in convs}
        row |= {"**all R@10**": f"**{d.r10.mean():.3f}**", "all R@5": f"{d.r5.mean():.3f}",
                "MRR@10": f"{d.mrr.mean():.3f}", "coverage@D (D)": f"{d.coverage.mean():.3f} ({DEPTH[p]})",
                "coverage, worst category": f"{worst:.3f}", "ms p50 (x floor)": f"{p50[p]:.1f} ({p50[p] / floor:.1f}x)",
                "ms p99 (x p50)": f"{p99[p]:.1f} ({p99[p] / p50[p]:.1f}x)", "ms / remember()": f"{write[p]:.1f}"}
        table.append(row)
    n = len(rows[rows.preset == presets[0]])
    report.table("LoCoMo", table, note=(
        f"{n} questions; floor (query embedding + exact dot product) p50 {floor:.1f} ms, "
        f"p99 {p99['floor']:.1f} ms ({p99['floor'] / floor:.1f}x), measured in the same run."))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locomo", help="a LoCoMo JSON file (not shipped)")
    ap.add_argument("--presets", default=",".join(PRESETS), help=f"comma-separated, of {', '.join(PRESETS)}")
    ap.add_argument("--synthetic", default="datasets/*.jsonl",
                    help="a glob of synthetic datasets (relative to the repository's root), or 'none'")
    args = flags(ap, rounds=1, rounds_help="timing rounds over the questions").parse_args(argv)
    presets = parse_list(args.presets)
    unknown = set(presets) - set(PRESETS)
    if unknown:
        ap.error(f"unknown preset {sorted(unknown)[0]!r}; expected some of {', '.join(PRESETS)}")
    report = Report("quality per millisecond of each recall preset")
    if args.locomo:
        rows, times = locomo(args.locomo, presets, args.rounds)
        locomo_table(rows, times, presets, report)
        report.print("LoCoMo")
    files = synthetic_datasets(args.synthetic)
    if files:
        syn = synthetic(files, presets)
        wide = syn.pivot(index="dataset", columns="preset", values="recall@10")[presets]
        leak = syn.groupby("preset")["stale_leak@10"].mean()[presets]
        report.table("synthetic", [{"dataset": name} | {p: f"{row[p]:.3f}" for p in presets}
                                   for name, row in wide.iterrows()],
                     note="mean stale-leak@10: " + ", ".join(f"{p} {leak[p]:.3f}" for p in presets))
        print("\nSynthetic datasets, mean recall@10 of the replay's probes:\n")
        report.print("synthetic")
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
