"""A neutral harness: memory systems replayed through the same conversations, scored alike.

``compare(conversations, ["vxmem", "vxmem:fast", "bm25"], k=10)`` builds each system fresh
per conversation (:mod:`vxmem.workbench.systems`), hands it the events in time order
(turns, facts, corrections, feedback, forgets, expiries), asks it every probe, and scores
what it returns with the same functions a replay uses (:mod:`vxmem.workbench.analysis.metrics`):
hit@k, recall@k, MRR, nDCG@k and stale-leak@k, against the probe's relevant and stale
labels. Each write and each recall is timed. A system that raises on a write or a probe is
recorded (an ``errors`` count, the first ``error``; the probe scores as an empty answer)
and the run goes on.

:func:`quality_cost` reads the table as recall@k against milliseconds per recall, with the
Pareto front marked: the systems no other one beats on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import metrics as M
from ..analysis.questions import pareto_front
from ..datasets.model import Conversation, Event
from . import Query, SystemSpec, Turn, parse_systems

SYSTEM_COLUMNS = ("system", "hit", "recall", "mrr", "ndcg", "stale_leak", "ms_per_recall", "ms_per_write",
                  "probes", "writes", "ignored", "errors", "setup_s", "error")
_DAY = 86400.0


@dataclass
class CompareResult:
    """``table``: one row per system; ``per_probe``: one row per system and probe."""

    table: pd.DataFrame
    per_probe: pd.DataFrame
    k: int


@dataclass
class _Run:
    """One system's timings, counts and first error over every conversation."""

    name: str
    write_ms: list[float] = field(default_factory=list)
    recall_ms: list[float] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    ignored: int = 0
    errors: int = 0
    error: str | None = None
    setup_s: float = 0.0

    def failed(self, exc: BaseException, where: str) -> None:
        self.errors += 1
        if self.error is None:
            self.error = f"{where}: {type(exc).__name__}: {exc}"


def _turn(ev: Event) -> Turn:
    kind = "pinned" if ev.pinned else ("fact" if ev.type == "fact" else "turn")
    return Turn(label=str(ev.label), text=str(ev.text), time=ev.time, session=ev.session, role=ev.role,
                kind=kind, ttl_days=ev.ttl_days)


def _labels(item: Any) -> tuple[str, ...]:
    return (item,) if isinstance(item, str) else tuple(str(x) for x in item)


def score(ranked: Sequence[Any], probe: Event, existing: Iterable[str], k: int) -> dict[str, float]:
    """The probe's metrics of a ranked answer (labels, or tuples of labels, best first): each
    item's grade is its best label's, stale when any label is; ``existing`` are the labels said
    (and not forgotten) by then, so recall counts only what could have been found."""
    seen: list[tuple[str, ...]] = []
    for item in ranked:
        labs = _labels(item)
        if labs and labs not in seen:
            seen.append(labs)
    top = seen[:k]
    gains = np.zeros((1, k))
    stale = np.zeros((1, k), dtype=bool)
    for j, labs in enumerate(top):
        gains[0, j] = max(probe.relevant.get(lab, 0.0) for lab in labs)
        stale[0, j] = any(lab in probe.stale for lab in labs)
    have = set(existing)
    ideal = sorted((g for lab, g in probe.relevant.items() if lab in have), reverse=True)
    met = M.ranked_metrics(gains, stale, len(ideal), np.array([ideal + [0.0]]), k=k)
    return {name: float(np.ravel(v)[0]) for name, v in met.items()}


class _Feeder:
    """Hands one conversation's events to one system, timing each call."""

    def __init__(self, system: Any, run: _Run, k: int):
        self.system, self.run, self.k = system, run, k
        self.existing: dict[str, Event] = {}

    def _timed(self, fn: Callable[..., Any], *args: Any, where: str, into: list[float]) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        except Exception as exc:  # a failing system is reported, not fatal
            self.run.failed(exc, where)
            return None
        finally:
            into.append((time.perf_counter() - t0) * 1000.0)

    def event(self, ev: Event) -> None:
        sys_, run = self.system, self.run
        if ev.type in ("turn", "fact"):
            self.existing[str(ev.label)] = ev
            self._timed(sys_.add, _turn(ev), where=f"add {ev.label}", into=run.write_ms)
        elif ev.type == "feedback" and ev.correction is not None:
            turn = Turn(label=str(ev.label), text=ev.correction, time=ev.time, kind="fact",
                        session=getattr(self.existing.get(str(ev.target)), "session", None))
            self.existing[turn.label] = ev
            fn = getattr(sys_, "correct", None)
            args = (ev.target, turn) if fn is not None else (turn,)
            self._timed(fn or sys_.add, *args, where=f"correct {ev.target}", into=run.write_ms)
        elif ev.type == "probe":
            self.probe(ev)
        else:
            self.other(ev)

    def other(self, ev: Event) -> None:
        if ev.type == "forget" and ev.targets:
            for lab in ev.targets:
                self.existing.pop(lab, None)
        names = {"feedback": ("feedback", (ev.target, ev.outcome, ev.time)), "expire": ("expire", (ev.time,)),
                 "forget": ("forget", (list(ev.targets), ev.time))}
        name, args = names.get(ev.type, ("other", (ev,)))
        if ev.type == "forget" and not ev.targets:
            name, args = "other", (ev,)
        fn = getattr(self.system, name, None)
        if fn is None:
            self.run.ignored += 1
            return
        self._timed(fn, *args, where=f"{ev.type} at {ev.time:.0f}", into=[])

    def _existing_at(self, t: float) -> list[str]:
        return [lab for lab, e in self.existing.items()
                if e.ttl_days is None or e.time + e.ttl_days * _DAY > t]

    def probe(self, ev: Event) -> None:
        k = ev.limit or self.k
        q = Query(label=ev.label, text=str(ev.query), time=ev.time, session=ev.session, k=k)
        before = self.run.errors
        ranked = self._timed(self.system.recall, q, where=f"probe {ev.label}", into=self.run.recall_ms)
        met = score(list(ranked or []), ev, self._existing_at(ev.time), k)
        self.run.rows.append({"system": self.run.name, "probe": ev.label, "query": ev.query,
                              "category": ev.category, "ranked": [",".join(_labels(x)) for x in (ranked or [])][:k],
                              **met, "ms": self.run.recall_ms[-1], "failed": self.run.errors > before})


def _replay_one(spec: SystemSpec, conv: Conversation, run: _Run, k: int) -> None:
    """One conversation through a fresh instance of ``spec``'s system."""
    t0 = time.perf_counter()
    try:
        system = spec.factory()
        begin = getattr(system, "begin", None)
        if begin is not None:
            begin({"name": conv.name, "judge": conv.meta.get("judge"), "summarizer": conv.meta.get("summarizer")})
        warm = getattr(system, "warm", None)
        if warm is not None:
            warm()
    except Exception as exc:  # the whole conversation is lost to this system: say so and go on
        run.failed(exc, f"setup for {conv.name}")
        run.setup_s += time.perf_counter() - t0
        return
    run.setup_s += time.perf_counter() - t0
    feeder = _Feeder(system, run, k)
    n_rows = len(run.rows)
    try:
        for ev in conv.events:
            feeder.event(ev)
    finally:
        close = getattr(system, "close", None)
        if close is not None:
            try:
                close()
            except Exception as exc:
                run.failed(exc, "close")
    for row in run.rows[n_rows:]:
        row["conversation"] = conv.name


def compare(conversations: Conversation | Sequence[Conversation], systems: Sequence[str | SystemSpec],
            k: int = 10, progress: Callable[[int, int, str], None] | None = None) -> CompareResult:
    """Every system (names, see :func:`~vxmem.workbench.systems.system_factory`, or specs) over
    every conversation; every name is checked before any work. ``progress(done, total, desc)``
    hears each (system, conversation) finished."""
    convs = [conversations] if isinstance(conversations, Conversation) else list(conversations)
    if not convs or not all(isinstance(c, Conversation) for c in convs):
        raise TypeError("conversations must be a Conversation or a non-empty list of Conversations")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    named = iter(parse_systems([s for s in systems if not isinstance(s, SystemSpec)])
                 if not all(isinstance(s, SystemSpec) for s in systems) else [])
    specs: list[SystemSpec] = [s if isinstance(s, SystemSpec) else next(named) for s in systems]
    runs, total, done = [], len(specs) * len(convs), 0
    for spec in specs:
        run = _Run(spec.name)
        for conv in convs:
            _replay_one(spec, conv, run, k)
            done += 1
            if progress is not None:
                progress(done, total, f"{spec.name} on {conv.name}")
        runs.append(run)
    return _result(runs, k)


def _result(runs: list[_Run], k: int) -> CompareResult:
    per_probe = pd.DataFrame([r for run in runs for r in run.rows])
    rows = []
    for run in runs:
        mine = per_probe[per_probe["system"] == run.name] if len(per_probe) else per_probe
        agg = M.aggregate(mine, metrics=("hit", "recall", "rr", "ndcg", "stale_leak")).iloc[0].to_dict() \
            if len(mine) else {"probes": 0}
        rows.append({"system": run.name, **agg,
                     "ms_per_recall": float(np.median(run.recall_ms)) if run.recall_ms else np.nan,
                     "ms_per_write": float(np.median(run.write_ms)) if run.write_ms else np.nan,
                     "writes": len(run.write_ms), "ignored": run.ignored, "errors": run.errors,
                     "setup_s": run.setup_s, "error": run.error})
    table = pd.DataFrame(rows).reindex(columns=list(SYSTEM_COLUMNS))
    table["probes"] = table["probes"].fillna(0).astype(int)
    return CompareResult(table=table, per_probe=per_probe, k=k)


def quality_cost(table: pd.DataFrame, quality: str = "recall", cost: str = "ms_per_recall") -> pd.DataFrame:
    """``system``, ``quality`` (recall@k by default), ``cost`` (milliseconds per recall) and
    ``on_front``: True where no other system has at least its quality at no more cost and is
    better on one. Systems that could not be scored (NaN) are never on the front."""
    missing = [c for c in ("system", quality, cost) if c not in table.columns]
    if missing:
        raise KeyError(f"column {missing[0]!r} is not in the table")
    out = table[["system", quality, cost]].reset_index(drop=True)
    ok = out[quality].notna() & out[cost].notna()
    front = pareto_front(out, maximize=(quality,), minimize=(cost,)) & ok
    return out.assign(on_front=front.to_numpy(dtype=bool))
