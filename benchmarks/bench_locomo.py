"""LoCoMo evidence recall of vxmem's embedders and search modes, BM25 beside them, in one run.

    .venv/bin/python -m benchmarks.bench_locomo PATH/locomo10.json
    .venv/bin/python -m benchmarks.bench_locomo PATH --systems default,bm25 --date-in-text --csv out.csv

LoCoMo (snap-research/locomo, CC BY-NC 4.0) is not shipped with vxmem: pass the path of its
JSON file. Each conversation is loaded with ``vxmem.workbench.datasets.load_locomo`` (turns stored as
``"Speaker: text"`` with photo captions, dated by their sessions, adversarial questions left out)
and replayed into a fresh in-memory ``Vectrix``; every question is asked across the whole
conversation at ``now`` = the last turn + 1 day (``--now-days``). The metrics are turn-level:

- R@k: the fraction of a question's evidence turns among the top k, averaged over questions;
- MRR: the reciprocal rank of the first evidence turn within the top 10 (0 when none is there).

Questions whose evidence names no turn of the conversation are left out. The systems:

- ``default``: the shipped defaults, literally ``Vectrix()`` and ``recall(question, now=...)``:
  bge-small-en-v1.5, hybrid (w 0.5), the default preset's late-interaction stage, the spec blend;
- ``bge-dense``, ``bge-hybrid``: the same embedder without the rerank;
- ``hashing-dense``, ``hashing-hybrid``, ``hashing-rerank`` (hybrid + the cross-encoder);
- ``lexical``: BM25 under the spec blend; ``bm25``: BM25 alone (lexical, recency_weight 0).

Time per stage, over the whole file: ``embed`` (every turn and question through the
embedder, cold, in calls of 64), ``remember`` (``remember()`` calls of the default system, embedding
included), ``search`` (a recall without its rerank) and ``rerank`` (what the rerank adds, its
cache cleared first). Every system but ``default`` gets the vectors computed in ``embed``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from benchmarks.harness import Report, flags, parse_list
from vxmem import Vectrix
from vxmem.core.clock import DAY
from vxmem.models.embed import default_embedder, get_embedder
from vxmem.models.late import default_late_interaction
from vxmem.models.rerank import default_reranker
from vxmem.workbench.datasets import Conversation, load_locomo
from vxmem.workbench.datasets.locomo import RETRIEVAL_CATEGORIES

SYSTEMS = ("default", "bge-hybrid", "bge-dense", "hashing-rerank", "hashing-hybrid", "hashing-dense", "lexical",
           "bm25")
# system -> (embedder name, recall arguments, memory settings)
SPECS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "bge-hybrid": ("bge-small", {"mode": "hybrid", "rerank": False}, {}),
    "bge-dense": ("bge-small", {"mode": "dense", "rerank": False}, {}),
    "hashing-rerank": ("hashing", {"mode": "hybrid", "rerank": True}, {}),
    "hashing-hybrid": ("hashing", {"mode": "hybrid", "rerank": False}, {}),
    "hashing-dense": ("hashing", {"mode": "dense", "rerank": False}, {}),
    "lexical": ("hashing", {"mode": "lexical", "rerank": False}, {}),
    "bm25": ("hashing", {"mode": "lexical", "rerank": False}, {"recency_weight": 0.0}),
}


class Precomputed:
    """An embedder that serves the vectors its model computed ahead (the model's ``name`` and
    hints pass through, so a memory over it is the memory over the model)."""

    def __init__(self, model: Any, vectors: dict[str, np.ndarray]):
        self.model, self.vectors = model, vectors

    def __getattr__(self, attr: str) -> Any:
        if attr in ("model", "vectors"):
            raise AttributeError(attr)
        return getattr(self.model, attr)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, np.asarray(self.model(missing), dtype=np.float32)))
        return np.stack([self.vectors[t] for t in texts])


def day_label(ts: float) -> str:
    d = datetime.fromtimestamp(ts, tz=UTC)
    return f"{d.day} {d.strftime('%B')} {d.year}"


def stored_text(ev: Any, date_in_text: bool) -> str:
    return f"[{day_label(ev.time)}] {ev.text}" if date_in_text else ev.text


def questions(conv: Conversation) -> list[Any]:
    return [p for p in conv.probes if p.relevant]


def build(conv: Conversation, embedder: Any, date_in_text: bool, **settings: Any) -> tuple[Vectrix, dict[str, str]]:
    """A fresh in-memory Vectrix holding the conversation's turns; memory id -> dia_id."""
    db = Vectrix(embedder=embedder, **settings) if embedder is not None else Vectrix(**settings)
    id2dia = {}
    for ev in conv.events:
        if ev.type == "turn":
            mid = db.remember(stored_text(ev, date_in_text), session=ev.session, role=ev.role, timestamp=ev.time)
            id2dia[mid] = ev.label
    return db, id2dia


def scores(ranked: list[str], evidence: set[str]) -> tuple[float, float, float]:
    r5 = len(evidence & set(ranked[:5])) / len(evidence)
    r10 = len(evidence & set(ranked[:10])) / len(evidence)
    mrr = next((1.0 / (i + 1) for i, d in enumerate(ranked[:10]) if d in evidence), 0.0)
    return r5, r10, mrr


def run_system(name: str, convs: list[Conversation], vectors: dict[str, dict[str, np.ndarray]], args: Any,
               timing: dict[str, float]) -> list[dict[str, Any]]:
    rows = []
    weight = {} if args.hybrid_weight is None else {"hybrid_weight": args.hybrid_weight}
    for conv in convs:
        t_end = max(e.time for e in conv.events if e.type == "turn")
        now = t_end + args.now_days * DAY
        if name == "default":
            os.environ.pop("VXMEM_EMBEDDER", None)  # the shipped default, whatever the shell says
            t = time.perf_counter()
            db, id2dia = build(conv, None, args.date_in_text, **weight)
            timing["remember"] += time.perf_counter() - t
            timing["remembered"] += len(id2dia)
            assert db.memory.pipeline() == {"mode": "hybrid", "rerank": default_late_interaction().name,
                                            "embedder": default_embedder().name}, db.memory.pipeline()
            call: Callable[[str], Any] = lambda q, db=db, now=now: db.recall(q, now=now)
            plain: Callable[[str], Any] | None = lambda q, db=db, now=now: db.recall(q, now=now, rerank=False)
        else:
            emb_name, recall_args, settings = SPECS[name]
            emb = Precomputed(get_embedder(emb_name), vectors[emb_name])
            db, id2dia = build(conv, emb, args.date_in_text, **settings, **weight)
            call = lambda q, db=db, now=now, a=recall_args: db.recall(q, now=now, **a)
            plain = (lambda q, db=db, now=now, a=recall_args: db.recall(q, now=now, **{**a, "rerank": False})) \
                if recall_args.get("rerank") else None
        qs = questions(conv)
        if plain is not None:  # the first stage alone, then the whole recall with a cold rerank cache
            t = time.perf_counter()
            for p in qs:
                plain(p.query)
            timing[f"{name}:search"] += time.perf_counter() - t
            default_reranker().clear_cache()
        t = time.perf_counter()
        ranked = [[id2dia[i] for i in call(p.query).ids] for p in qs]
        spent = time.perf_counter() - t
        timing[f"{name}:total" if plain is not None else f"{name}:search"] += spent
        timing[f"{name}:queries"] += len(qs)
        for p, r in zip(qs, ranked):
            r5, r10, mrr = scores(r, set(p.relevant))
            rows.append({"system": name, "conversation": conv.name, "category": p.category, "r5": r5, "r10": r10,
                         "mrr": mrr})
        db.close()
    if f"{name}:total" in timing:  # what the rerank adds to the first stage
        timing[f"{name}:rerank"] = timing[f"{name}:total"] - timing[f"{name}:search"]
    return rows


def embed_all(convs: list[Conversation], names: set[str], args: Any, timing: dict[str, float]) -> dict[str, Any]:
    """Every turn and question through each embedder, cold, in calls of 64 as a replay does
    (``remember()``, one text per call, is timed by the default system)."""
    texts = list(dict.fromkeys([stored_text(e, args.date_in_text) for c in convs for e in c.events if e.type == "turn"]
                               + [p.query for c in convs for p in questions(c)]))
    out = {}
    for name in sorted(names):
        model = get_embedder(name)
        model(["warm up"])  # loads the model: timed apart from the embedding
        t = time.perf_counter()
        vecs = np.concatenate([model(texts[i: i + 64]) for i in range(0, len(texts), 64)])
        out[name] = dict(zip(texts, vecs))
        timing[f"embed:{name}"] = time.perf_counter() - t
        timing[f"embedded:{name}"] = len(texts)
    return out


def table(rows: list[dict[str, Any]], systems: list[str]) -> list[dict[str, str]]:
    """R@5 / R@10 / MRR by category and overall, a row per system."""
    import pandas as pd

    df = pd.DataFrame(rows)
    cats = [c for c in RETRIEVAL_CATEGORIES if c in set(df["category"])]
    counts = df[df["system"] == systems[0]].groupby("category").size()
    out = []
    for s in systems:
        d = df[df["system"] == s]
        row = {"system": s}
        for c in cats:
            m = d[d["category"] == c][["r5", "r10", "mrr"]].mean()
            row[f"{c} (n={counts.get(c, 0)}) R@5 / R@10 / MRR"] = f"{m.r5:.3f} / {m.r10:.3f} / {m.mrr:.3f}"
        m = d[["r5", "r10", "mrr"]].mean()
        row |= {f"all (n={int(counts.sum())}) R@5": f"{m.r5:.3f}", "**R@10**": f"**{m.r10:.3f}**",
                "MRR": f"{m.mrr:.3f}"}
        out.append(row)
    return out


def goals(df: Any, systems: list[str]) -> str:
    """default's R@10 and its gap to bm25 against the goals, by category and conversation."""
    r10 = df.groupby("system")["r10"].mean()
    if not {"default", "bm25"} <= set(systems):
        return ""
    gap = r10["default"] - r10["bm25"]
    by_cat = df.pivot_table(index="category", columns="system", values="r10")
    per_cat = ", ".join(f"{c} {by_cat.loc[c, 'default'] - by_cat.loc[c, 'bm25']:+.3f}"
                        for c in RETRIEVAL_CATEGORIES if c in by_cat.index)
    by_conv = df.pivot_table(index="conversation", columns="system", values="r10")
    convs_s = ", ".join(f"{c} {by_conv.loc[c, 'default']:.3f} (bm25 {by_conv.loc[c, 'bm25']:.3f})"
                        for c in by_conv.index)
    return (f"default R@10 {r10['default']:.3f} (goal >= 0.70: {'met' if r10['default'] >= 0.70 else 'MISSED'}); "
            f"minus bm25 {gap:+.3f} (goal >= +0.10: {'met' if gap >= 0.10 else 'MISSED'}); by category {per_cat}\n"
            f"by conversation: {convs_s}")


def stages(timing: dict[str, float], systems: list[str]) -> list[dict[str, str]]:
    """Time per stage over the whole file: embed, remember, search, rerank."""
    rows = []
    for name in sorted(k.split(":")[1] for k in timing if k.startswith("embed:")):
        n, spent = timing[f"embedded:{name}"], timing[f"embed:{name}"]
        rows.append({"stage": f"embed, {name} (calls of 64)", "total s": f"{spent:.1f}",
                     "per item": f"{spent / n * 1e3:.1f} ms/text ({n / spent:.0f} texts/s)"})
    if timing["remembered"]:
        rows.append({"stage": "remember(), default (embedding included)", "total s": f"{timing['remember']:.1f}",
                     "per item": f"{timing['remember'] / timing['remembered'] * 1e3:.1f} ms/turn"})
    for s in systems:
        q = timing[f"{s}:queries"]
        for stage in ("search", "rerank"):
            if f"{s}:{stage}" in timing:
                spent = timing[f"{s}:{stage}"]
                rows.append({"stage": f"{stage}, {s}", "total s": f"{spent:.1f}",
                             "per item": f"{spent / q * 1e3:.1f} ms/query"})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="a LoCoMo JSON file (e.g. locomo10.json)")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {', '.join(SYSTEMS)}")
    ap.add_argument("--date-in-text", action="store_true", help="store '[8 May 2023] Speaker: text'")
    ap.add_argument("--now-days", type=float, default=1.0, help="questions asked this many days after the last turn")
    ap.add_argument("--hybrid-weight", type=float, default=None,
                    help="the memories' hybrid_weight (default: the memory's, 0.5); the default system then "
                         "differs from the shipped default in that one setting")
    ap.add_argument("--csv", help="also write one row per (system, question) here")
    args = flags(ap).parse_args(argv)
    systems = parse_list(args.systems)
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        ap.error(f"unknown system {sorted(unknown)[0]!r}; expected some of {', '.join(SYSTEMS)}")
    convs = load_locomo(args.path)
    timing: dict[str, float] = defaultdict(float)
    vectors = embed_all(convs, {SPECS[s][0] for s in systems if s != "default"} | {"bge-small"}, args, timing)
    rows: list[dict[str, Any]] = []
    for s in systems:
        t = time.perf_counter()
        rows += run_system(s, convs, vectors, args, timing)
        print(f"[{s}] {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    import pandas as pd

    df = pd.DataFrame(rows)
    n_q = sum(len(questions(c)) for c in convs)
    report = Report(f"LoCoMo {os.path.basename(args.path)}: {len(convs)} conversations, {n_q} questions "
                    f"(categories {', '.join(RETRIEVAL_CATEGORIES)}), text {'[date] ' if args.date_in_text else ''}"
                    f"Speaker: text, now = last turn + {args.now_days:g} d, hybrid_weight "
                    f"{0.5 if args.hybrid_weight is None else args.hybrid_weight:g}, spec blend (half-life 7 d, "
                    f"recency 0.5, feedback 0.25) except bm25 (recency 0); {os.cpu_count()} cpus, VXMEM_THREADS="
                    f"{os.environ.get('VXMEM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.1f}")
    report.table("recall", table(rows, systems), note=goals(df, systems))
    report.table("stages", stages(timing, systems))
    print(report.title)
    print()
    report.print()
    report.save(args)
    if args.csv:
        df.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
