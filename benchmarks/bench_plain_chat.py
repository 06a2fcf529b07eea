"""Does recall know what changed in a plain chat? Updates, old-above-update and controls, per split.

    .venv/bin/python -m benchmarks.bench_plain_chat [--seeds 4 --rounds 2 --configs shipped,no-recency]
    .venv/bin/python -m benchmarks.bench_plain_chat --configs shipped --signals
    .venv/bin/python -m benchmarks.bench_plain_chat --configs shipped --oracle

A chat product calls ``remember()`` on every turn and nothing else. The ``plain_chat`` scenario
(:mod:`vxmem.workbench.synth.plain_chat`) writes such chats: a fact of the user's life, small talk
over weeks, then the new value told in passing and in other words (``update`` sessions) or only
restated (``control`` sessions), a mention of the old value in another sense and fresh small talk
sharing a word with the question. Each session's probe is asked with ``recall(question,
session=..., now=...)`` at the probe's moment, and three figures are printed per configuration:

- **update top-1**: the update is the first result;
- **old above update**: the old statement ranks above the update, or the update is not in the top 10;
- **controls**: the first result is the fact or its restatement (not the small talk, not the
  other-sense mention).

Two splits, frozen before any tuning: ``dev`` is the first six slots on seeds 0..S-1, ``held`` the
last six slots on seeds 1000..1000+S-1; tune on the first, report the second. Each figure comes
with a 95% bootstrap interval over sessions.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from benchmarks.harness import Report, flags, parse_list
from vxmem import Vectrix
from vxmem.workbench import synth

HELD_SEED = 1000  # the held-out split's seeds start here
CONFIGS: dict[str, dict[str, Any]] = {
    "shipped": {},
    "no-recency": {"recency_weight": 0.0},
    "fast": {"preset": "fast"},
    "accurate": {"preset": "accurate"},
}


def _probes(conv: Any, db: Vectrix, split: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """Each probe of ``split`` at its moment, with every turn of its sessions remembered at its
    time before it: (the probe, memory id -> label)."""
    label_of: dict[str, str] = {}
    asked = {ev.session for ev in conv.events if ev.type == "probe" and ev.meta.get("split") == split}
    for ev in conv.events:
        if ev.type == "turn" and ev.session in asked:
            label_of[db.remember(ev.text, session=ev.session, role=ev.role, timestamp=ev.time)] = ev.label
        elif ev.type == "probe" and ev.meta.get("split") == split:
            yield ev, label_of


def _replay(conv: Any, db: Vectrix, split: str) -> list[tuple[dict[str, Any], list[str]]]:
    """Each probe of ``split`` recalled at its moment: (probe meta with its category, ranked labels)."""
    return [({**ev.meta, "category": ev.category},
             [label_of.get(r.id, "?") for r in db.recall(ev.query, session=ev.session, now=ev.time)])
            for ev, label_of in _probes(conv, db, split)]


SIGNALS = ("dense", "lexical", "late", "fused", "cross_in_context", "cross_own")


def _signal_rows(conv: Any, split: str) -> list[tuple[dict[str, Any], list[str]]]:
    """Per probe of ``split``, the labels ranked by each relevance signal alone (no recency):
    the first stage's dense cosine and BM25, the late-interaction score and its fusion with the
    first stage (the default preset's), and the cross-encoder reading each turn in its context
    (the accurate preset's) and alone. Rows carry the signal's name in their meta."""
    from vxmem.models.rerank import default_reranker

    cross = default_reranker()
    out = []
    with Vectrix() as db:
        for ev, label_of in _probes(conv, db, split):
            scores: dict[str, dict[str, Any]] = {}
            for preset in ("default", "accurate"):
                for r in db.recall(ev.query, session=ev.session, now=ev.time, limit=100, preset=preset):
                    sc = r.metadata["_vx_scoring"]
                    got = scores.setdefault(label_of.get(r.id, "?"), {"text": r.text})
                    if preset == "accurate":
                        got["cross_in_context"] = sc["relevance"]
                    else:
                        got.update(dense=sc.get("dense"), lexical=sc.get("lexical"), late=sc["relevance"],
                                   fused=sc["fused"])
            labels = list(scores)
            for k, v in zip(labels, cross(ev.query, [scores[k]["text"] for k in labels])):
                scores[k]["cross_own"] = float(v)
            for name in SIGNALS:
                out.append(({**ev.meta, "category": ev.category, "signal": name}, _ranked(scores, name)))
    return out


def _ranked(scores: dict[str, dict[str, Any]], name: str) -> list[str]:
    """The labels of ``scores`` by the signal ``name``, best first (a label without it last)."""
    return sorted(scores, key=lambda k: -np.inf if scores[k].get(name) is None else float(scores[k][name]),
                  reverse=True)


def signals(seeds: int, rounds: int) -> list[dict[str, Any]]:
    """What each relevance signal alone gets right on the development split: the ceiling the
    blend works under (a blend cannot put first what its relevance ranks low)."""
    rows: list[Any] = []
    for s in range(seeds):
        rows += _signal_rows(synth.generate("plain_chat", seed=s, rounds=rounds), "dev")
    table = []
    for name in SIGNALS:
        f = figures([r for r in rows if r[0]["signal"] == name])
        table.append({"split": "dev", "config": f"{name} alone", "sessions": len(f["update_top1"]) * 2,
                      **{k: f"{x.mean():.2f}" for k, x in f.items()}})
    return table


ORACLES = ("shipped relevance", "the update as relevant as the old statement",
           "that, and every other memory at relevance 0")


def _oracle_rows(conv: Any, split: str) -> list[tuple[dict[str, Any], list[str]]]:
    """Per probe of ``split``, the labels ranked by the shipped blend (normalised relevance + 0.5 x
    recency, the seed's defaults) with the relevance of some memories replaced, per :data:`ORACLES`:
    what the blend would do with a relevance model that knew the update answers the question."""
    out = []
    with Vectrix() as db:
        for ev, label_of in _probes(conv, db, split):
            parts = {label_of.get(r.id, "?"): r.metadata["_vx_scoring"]
                     for r in db.recall(ev.query, session=ev.session, now=ev.time, limit=100)}
            meta = {**ev.meta, "category": ev.category}
            answers = {meta.get("old"), meta.get("update"), meta.get("restatement")}
            for i, name in enumerate(ORACLES):
                rel = {k: p["relevance_norm"] for k, p in parts.items()}
                if i >= 1 and meta.get("update") in rel and meta.get("old") in rel:
                    rel[meta["update"]] = rel[meta["old"]]
                if i == 2:
                    rel = {k: v if k in answers else 0.0 for k, v in rel.items()}
                score = {k: rel[k] + 0.5 * parts[k]["recency"] for k in parts}
                out.append(({**meta, "oracle": name},
                            sorted(parts, key=lambda k: (score[k], parts[k]["recency"]), reverse=True)[:10]))
    return out


def oracle(seeds: int, rounds: int) -> list[dict[str, Any]]:
    """Both splits ranked by :func:`_oracle_rows`: the ceiling a better relevance signal would lift
    the shipped blend to, with the formula and its defaults unchanged."""
    table = []
    for split, first in (("dev", 0), ("held", HELD_SEED)):
        rows: list[Any] = []
        for s in range(seeds):
            rows += _oracle_rows(synth.generate("plain_chat", seed=first + s, rounds=rounds), split)
        for name in ORACLES:
            f = figures([r for r in rows if r[0]["oracle"] == name])
            table.append({"split": split, "config": name, "sessions": len(f["update_top1"]) + len(f["controls"]),
                          **{k: f"{x.mean():.2f}" for k, x in f.items()}})
    return table


def figures(rows: list[tuple[dict[str, Any], list[str]]]) -> dict[str, np.ndarray]:
    """Per session, 1/0: ``update_top1``, ``old_above`` (update sessions), ``controls`` (control sessions)."""
    up, inv, ctl = [], [], []
    for meta, ranked in rows:
        if meta["category"] == "update":
            up.append(bool(ranked) and ranked[0] == meta["update"])
            if meta["update"] not in ranked:
                inv.append(True)
            else:
                old = ranked.index(meta["old"]) if meta["old"] in ranked else len(ranked)
                inv.append(old < ranked.index(meta["update"]))
        elif meta["category"] == "control":
            ctl.append(bool(ranked) and ranked[0] in (meta["old"], meta["restatement"]))
    return {"update_top1": np.array(up, float), "old_above": np.array(inv, float), "controls": np.array(ctl, float)}


def interval(x: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% bootstrap interval of the mean of ``x``."""
    if not x.size:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(reps, x.size))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def run(configs: list[str], seeds: int, rounds: int, say: Callable[[str], None]) -> list[dict[str, Any]]:
    table = []
    for split, first in (("dev", 0), ("held", HELD_SEED)):
        convs = [synth.generate("plain_chat", seed=first + s, rounds=rounds) for s in range(seeds)]
        for name in configs:
            t0 = time.perf_counter()
            rows: list[Any] = []
            for conv in convs:
                with Vectrix(**CONFIGS[name]) as db:
                    rows += _replay(conv, db, split)
            f = figures(rows)
            row: dict[str, Any] = {"split": split, "config": name, "sessions": len(rows)}
            for key, x in f.items():
                lo, hi = interval(x)
                row[key] = f"{x.mean():.2f} [{lo:.2f}, {hi:.2f}]"
            table.append(row)
            say(f"{split} {name}: {time.perf_counter() - t0:.0f} s")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    ap.add_argument("--seeds", type=int, default=4, help="conversations per split")
    ap.add_argument("--rounds", type=int, default=2, help="sessions per slot and kind in each conversation")
    ap.add_argument("--signals", action="store_true",
                    help="also rank the development split by each relevance signal alone (no recency)")
    ap.add_argument("--oracle", action="store_true",
                    help="also rank both splits by the shipped blend with the update's relevance set to the old "
                         "statement's (and, second, every other memory's to 0): the ceiling of a better relevance")
    args = flags(ap).parse_args(argv)
    names = parse_list(args.configs)
    unknown = [c for c in names if c not in CONFIGS]
    if unknown or args.seeds < 1 or args.rounds < 1:
        ap.error(f"unknown configuration {unknown[0]!r}" if unknown else "--seeds and --rounds must be >= 1")
    table = run(names, args.seeds, args.rounds, lambda m: print(m, file=sys.stderr, flush=True))
    report = Report("does recall know what changed in a plain chat?")
    heads = {"split": "split", "config": "configuration", "sessions": "sessions", "update_top1": "update top-1",
             "old_above": "old above update", "controls": "controls top-1"}
    report.table("configurations", [{heads[k]: v for k, v in r.items()} for r in table],
                 note=f"{args.seeds} conversation(s) per split, {args.rounds} round(s); 95% bootstrap intervals")
    if args.signals:
        report.table("relevance alone", [{heads[k]: v for k, v in r.items()} for r in signals(args.seeds, args.rounds)],
                     note="each relevance signal alone ranks the development split (no recency)")
    if args.oracle:
        report.table("the blend with a relevance that knew", [{heads[k]: v for k, v in r.items()}
                                                              for r in oracle(args.seeds, args.rounds)],
                     note="the shipped blend (relevance normalised + 0.5 x recency, half-life 7 days) re-ranked "
                          "with some relevances replaced; everything else as shipped")
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
