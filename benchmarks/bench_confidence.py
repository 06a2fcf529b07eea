"""The match probability, refitted and checked: does a recall know when it found nothing?

    .venv/bin/python -m benchmarks.bench_confidence [--locomo PATH/locomo10.json] [--seeds 1,2,3] [--write]

Every probe is asked of a fresh replay with each recall preset (``fast``, ``default``,
``accurate``; bge-small) and with the hashing embedder's pipeline; each recall's scores become
:func:`vxmem.memory.confidence.score_features` and its target is whether a memory the probe needs
is among the 10 results (0 for the ``"unanswerable"`` probes: questions about things the
conversation never mentions). A logistic regression per pipeline (balanced classes: the
probability holds for an even mix of questions with and without an answer) is fitted on the
synthetic scenarios at ``--seeds`` and, with ``--locomo``, on the first LoCoMo conversation with
questions about things it never mentions added (category 5, adversarial, is left out); it is
checked on questions held out from the fit: the shipped datasets (seed 0) and the other LoCoMo
conversations. The table gives, on the held-out questions, the precision and recall of the
warning (probability below :data:`~vxmem.memory.confidence.MATCH_THRESHOLD`) for "nothing relevant
was found", beside the raw-threshold warning it replaces. ``--write`` prints the coefficients as
the ``CALIBRATIONS`` entries of ``vxmem/memory/confidence.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.corpora import synthetic_datasets
from benchmarks.harness import Report, flags
from vxmem.memory.confidence import FEATURES, MATCH_THRESHOLD, Calibration, match_probability, score_features
from vxmem.models.embed import default_embedder
from vxmem.workbench.datasets import load_jsonl, load_locomo
from vxmem.workbench.datasets.model import Conversation, Event
from vxmem.workbench.replay.run import replay
from vxmem.workbench.synth import SCENARIOS, generate
from vxmem.workbench.synth.timeline import UNANSWERABLE

PRESETS = ("fast", "default", "accurate")
# The raw thresholds the warning used before (the stage's low_relevance; bge's cosine hint without one).
RAW = {"fast": 0.6, "default": 0.47, "accurate": 0.0, "hashing": 0.25}
# Questions about things neither LoCoMo development conversation mentions ({p}: a speaker).
NEVER_SAID = [
    "What is {p}'s passport number?", "What is the name of {p}'s landlord?", "Who is {p}'s accountant?",
    "What is {p}'s favourite board game?", "What colour is {p}'s front door?", "Which football team does {p} support?",
    "What is {p}'s phone number?", "Which university did {p} graduate from?", "Which chess opening does {p} play?",
    "Which podcast does {p} listen to?", "Which opera did {p} see?", "What was the title of {p}'s thesis?",
    "How old is {p}'s grandmother?", "What is the name of {p}'s boat?", "Which video game is {p} playing?",
    "Who is {p}'s dentist?", "What is {p} allergic to?", "When does {p} file taxes?", "What is {p}'s cousin called?",
    "What does {p}'s uncle do for a living?", "What brand of car does {p} drive?", "Which vaccine did {p} get?",
    "What surgery did {p} have?", "Did {p} win the lottery?", "Which cryptocurrency does {p} own?",
]


def with_unanswerable(conv: Conversation) -> Conversation:
    """A LoCoMo conversation with the :data:`NEVER_SAID` questions about each speaker added."""
    speakers = list(dict.fromkeys(e.role for e in conv.events if e.type == "turn"))[:2]
    t = conv.events[-1].time + 60.0
    extra = [Event(time=t, type="probe", label=f"never-{i}-{j}", query=q.format(p=p), session=None,
                   relevant={}, category=UNANSWERABLE)
             for i, p in enumerate(speakers) for j, q in enumerate(NEVER_SAID)]
    return Conversation(name=conv.name, events=[*conv.events, *extra], description=conv.description, meta=conv.meta)


def collect(conv: Conversation, split: str, hashing: bool = False) -> list[dict[str, Any]]:
    """One row per (probe, pipeline): the features, the target and the probe's category."""
    asked = [e for e in conv.events if e.type == "probe" and (e.relevant or e.category == UNANSWERABLE)]
    pipelines = ("hashing",) if hashing else PRESETS

    def at_probe(memory: Any, event: Event, t: float) -> Any:
        if event.category != UNANSWERABLE and not event.relevant:
            return None
        out = {}
        for name in pipelines:
            res = memory.recall(event.query, session=event.session, now=t, limit=10,
                                **({} if hashing else {"preset": name}))
            out[name] = (score_features(res), list(res.ids))
        return out

    rep = replay(conv, {"limit": 10}, "hashing" if hashing else None, on_probe=at_probe)
    labels = {m["id"]: set(m["labels"]) for m in rep.memories}
    rows = []
    for event, got in zip(asked, [x for x in rep.extras if x is not None]):
        for name, (feats, ids) in got.items():
            found = any(labels.get(i, set()) & set(event.relevant) for i in ids)
            rows.append({"conversation": conv.name, "split": split, "pipeline": name, "query": event.query,
                         "category": event.category, "found": int(found), **feats})
    print(f"  {conv.name} ({split}, {'hashing' if hashing else 'bge-small'}): {len(asked)} questions",
          file=sys.stderr, flush=True)
    return rows


def gather(seeds: list[int], locomo: str | None) -> pd.DataFrame:
    """Every row: the synthetic scenarios at ``seeds`` (fit), the shipped datasets (held out), LoCoMo."""
    rows: list[dict[str, Any]] = []
    for hashing in (False, True):
        for seed in seeds:
            for name in SCENARIOS:
                rows += collect(generate(name, seed=seed), "fit", hashing)
        for path in synthetic_datasets():
            rows += collect(load_jsonl(path), "held out", hashing)
        if locomo:
            for i, conv in enumerate(load_locomo(locomo)):
                rows += collect(with_unanswerable(conv), "fit" if i == 0 else "held out", hashing)
    return pd.DataFrame(rows)


def fit(frame: pd.DataFrame) -> Calibration:
    """A balanced logistic regression of ``found`` on :data:`FEATURES` (NaN as 0)."""
    from sklearn.linear_model import LogisticRegression

    x = frame[list(FEATURES)].fillna(0.0).to_numpy(dtype=np.float64)
    y = frame["found"].to_numpy()
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000).fit(x, y)
    return Calibration(round(float(model.intercept_[0]), 4), tuple(round(float(w), 4) for w in model.coef_[0]),
                       fitted_on=f"{len(frame)} recalls")


def warning_scores(found: np.ndarray, warned: np.ndarray) -> tuple[float, float, float]:
    """(precision, recall) of a warning for "nothing relevant found", and how often it fires on a found answer."""
    missed = found == 0
    precision = float((warned & missed).sum() / max(warned.sum(), 1))
    recall = float((warned & missed).sum() / max(missed.sum(), 1))
    false_alarm = float((warned & ~missed).sum() / max((~missed).sum(), 1))
    return precision, recall, false_alarm


def report(frame: pd.DataFrame, fitted: dict[str, Calibration]) -> list[dict[str, Any]]:
    """The held-out table: the calibrated warning beside the raw threshold, per pipeline and source."""
    rows = []
    held = frame[frame["split"] == "held out"]
    for name, cal in fitted.items():
        part = held[held["pipeline"] == name]
        groups = [("shipped datasets", part[~part["conversation"].str.startswith("conv-")]),
                  ("LoCoMo", part[part["conversation"].str.startswith("conv-")]), ("all", part)]
        for label, g in groups:
            if g.empty:
                continue
            x = g[list(FEATURES)].fillna(0.0).to_numpy(dtype=np.float64)
            p = np.array([cal.probability(row) for row in x])
            found = g["found"].to_numpy()
            cp, cr, cf = warning_scores(found, p < MATCH_THRESHOLD)
            rp, rr, rf = warning_scores(found, (g["best"] < RAW[name]).to_numpy())
            rows.append({"pipeline": name, "held out": label, "questions": len(g),
                         "nothing found": int((found == 0).sum()), "warning precision": f"{cp:.2f}",
                         "warning recall": f"{cr:.2f}", "false alarms": f"{cf:.2f}",
                         "raw-threshold precision / recall / false alarms": f"{rp:.2f} / {rr:.2f} / {rf:.2f}"})
    return rows


def absurd_check() -> None:
    """The absurd queries' probability (0: refused as matches)."""
    print("\nabsurd queries:", {q[:12]: match_probability([], query=q) for q in ("!!!???", "x" * 5000)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locomo", help="LoCoMo's locomo10.json (the first conversation joins the fit)")
    ap.add_argument("--seeds", default="1,2,3", help="synthetic seeds to fit on (seed 0 is held out)")
    ap.add_argument("--cache", help="a CSV of gathered rows to read (if it exists) or write")
    ap.add_argument("--write", action="store_true", help="print the coefficients as CALIBRATIONS entries")
    args = flags(ap).parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    if 0 in seeds:
        ap.error("seed 0 is the shipped datasets, which are held out")
    if args.cache and Path(args.cache).exists():
        frame = pd.read_csv(args.cache)
    else:
        frame = gather(seeds, args.locomo)
        if args.cache:
            frame.to_csv(args.cache, index=False)
    fitted = {name: fit(frame[(frame["split"] == "fit") & (frame["pipeline"] == name)])
              for name in frame["pipeline"].unique()}
    out = Report("the match probability, held out")
    out.table("held out", report(frame, fitted))
    out.print()
    out.save(args)
    absurd_check()
    if args.write:
        emb = default_embedder().name
        for name, cal in fitted.items():
            print(f"    # {name}: {cal.fitted_on}\n    {name!r}: Calibration({cal.intercept}, {cal.weights}),  # {emb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
