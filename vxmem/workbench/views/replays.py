"""The frames the workbench draws from replays: the Tune, Sweep, Compare, A/B, Replay and
Budget pages' (and the notebooks').

Each calls the library (the sweep, :mod:`vxmem.workbench.analysis.questions`, :mod:`vxmem.workbench.sweep.holdout`,
:mod:`vxmem.workbench.analysis.why`, the replay) at the workbench's settings
(:mod:`vxmem.workbench.views.settings`) and reshapes what it returns; no ranking happens here.
:mod:`vxmem.workbench.views` hands these names on.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...core.progress import Progress
from ...models.embed import Embedder
from ...ranking.scoring import BLEND_DEFAULTS
from ..analysis import metrics as M
from ..analysis import questions
from ..analysis.why import why_recalled
from ..datasets.model import Conversation
from ..replay.record import Replay
from ..replay.run import replay
from ..sweep.constraints import Constraint
from ..sweep.holdout import TuningResult, bootstrap_ci, split_probes, tune_holdout
from ..sweep.policies import POLICIES
from ..sweep.run import sweep
from .intervals import with_intervals
from .settings import DEFAULT_MODE, DEFAULT_POINT, DEFAULT_SETTINGS, REPLAY_SETTINGS, grid_point

# The metric columns of a sweep's per_point frame, in metrics order (a mean of rr is mrr).
POINT_METRICS = tuple("mrr" if m == "rr" else m for m in M.METRICS)

# What compare_policies (views.picking) searches for each policy's best point.
POLICY_GRIDS: dict[str, dict[str, list]] = {
    "blend": {"half_life_days": [1, 3, 7, 14, 30, 90, 180], "recency_weight": [0.0, 0.1, 0.25, 0.5, 1.0],
              "feedback_weight": [0.0, 0.25, 0.5, 1.0]},
    "cosine": {},
    "multiplicative": {"half_life_days": [1, 3, 7, 14, 30, 90, 180, 365, 1000]},
    "langchain": {"decay_rate": [0.0, 0.0001, 0.001, 0.005, 0.01, 0.05, 0.2]},
    "generative_agents": {"recency_decay": [0.9, 0.95, 0.99, 0.995, 0.999, 0.9999]},
    "memorybank": {"strength_days": [0.5, 1, 3, 7, 30, 90, 365, 1000]},
}

_RESULT_COLUMNS = ["rank", "label", "text", "kind", "session", "tokens", "relevant", "stale"]
_TIMELINE_COLUMNS = ["created", "end", "session", "kind", "lane", "jitter", "status", "label", "text", "tokens", "id"]
_SECTIONS = ("pinned", "recent", "recalled")


# ---------------------------------------------------------------------------- Tune


def point_metrics(replays: Sequence[Replay], params: Mapping[str, Any]) -> pd.Series:
    """The mean metrics of one parameter point over every probe of ``replays``."""
    grid = {k: [v] for k, v in grid_point(params).items()}
    return sweep(list(replays), grid).per_point.iloc[0]


def probe_table(replays: Sequence[Replay]) -> pd.DataFrame:
    """Every probe of ``replays``: conversation, index, label, query, category."""
    rows = []
    for ri, r in enumerate(replays):
        for p in r.probes:
            rows.append({"replay": ri, "conversation": r.name, "probe": p["probe"], "label": p["label"],
                         "query": p["query"], "session": p["session"], "category": p["category"],
                         "time": pd.Timestamp(p["time"], unit="s", tz="UTC")})
    return pd.DataFrame(rows)


def _marks(replay: Replay, probe: int) -> dict[str, tuple[float, bool]]:
    """Pool id -> (grade, stale) at ``probe``, as the replay recorded them."""
    pool = replay.pool(probe)
    return {mid: (float(g), bool(s)) for mid, g, s in zip(pool.ids, pool.grade, pool.stale)}


def _result_rows(replay: Replay, probe: int, ids: Sequence[str]) -> pd.DataFrame:
    """One row per memory id in ``ids``, ranked in that order, marked relevant or stale at ``probe``."""
    mems = {m["id"]: m for m in replay.memories}
    marks = _marks(replay, probe)
    rows = []
    for rank, mid in enumerate(ids, 1):
        m = mems.get(mid, {})
        grade, stale = marks.get(mid, (0.0, False))
        rows.append({"rank": rank, "label": ", ".join(m.get("labels") or []) or "-", "text": m.get("text", ""),
                     "kind": m.get("kind"), "session": m.get("session"), "tokens": m.get("tokens"),
                     "relevant": grade > 0, "stale": stale})
    return pd.DataFrame(rows, columns=_RESULT_COLUMNS)


def ranking_at(replay: Replay, probe: int, params: Mapping[str, Any],
               conversation: Conversation | None = None) -> pd.DataFrame:
    """What ``recall()`` ships for ``probe`` at ``params``, from the cached pool: rank,
    label, text, kind, session, tokens, relevant, stale and the score parts (raw
    ``relevance`` beside ``relevance_norm``, ``recency``, ``feedback``, ``score``)."""
    return returned(explain(replay, probe, params, conversation))


def _why_point(replay: Replay, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as :func:`vxmem.workbench.analysis.why.why_recalled` takes them for ``replay``."""
    point = grid_point({k: v for k, v in params.items() if k in DEFAULT_POINT})
    if replay.mode == "hybrid" and replay.rerank is None and "hybrid_weight" in params:
        point["hybrid_weight"] = float(params["hybrid_weight"])
    return point


def explain(replay: Replay, probe: int, params: Mapping[str, Any],
            conversation: Conversation | None = None) -> pd.DataFrame:
    """Why each memory that existed at ``probe`` was or was not returned at ``params``
    (:func:`vxmem.workbench.analysis.why.why_recalled`, one row per memory, reason first)."""
    return why_recalled(replay, probe, _why_point(replay, params), conversation=conversation)


_RETURNED_COLUMNS = ["rank", "label", "text", "kind", "session", "tokens", "relevant", "stale", "score", "relevance",
                     "relevance_norm", "recency", "feedback"]
# The columns of an explanation as the dashboard shows it (why_table; the Playground's too).
WHY_COLUMNS = ["reason", "rank", "label", "text", "detail", "relevant", "stale", "score", "relevance",
               "relevance_norm", "recency", "feedback", "pool_rank", "versus_label", "score_deficit", "deciding_part"]


def returned(why: pd.DataFrame) -> pd.DataFrame:
    """The returned rows of an explanation, in rank order, with their score parts."""
    out = why[why["reason"] == "returned"].sort_values("rank")
    out = out.assign(label=out["label"].fillna("-"), rank=out["rank"].astype(int))
    return out[_RETURNED_COLUMNS].reset_index(drop=True)


def why_table(why: pd.DataFrame, only_relevant: bool = False) -> pd.DataFrame:
    """An explanation as the dashboard shows it: reason, rank, label, text, detail and parts."""
    out = why[why["relevant"]] if only_relevant else why
    out = out.assign(reason=out["reason"].astype(str), label=out["label"].fillna("-"))
    return out[WHY_COLUMNS].reset_index(drop=True)


def missed_at(why: pd.DataFrame) -> pd.DataFrame:
    """Relevant memories that existed but were not returned, each with why."""
    out = why[why["relevant"] & (why["reason"] != "returned")]
    return why_table(out)


def probe_metrics_at(replays: Sequence[Replay], params: Mapping[str, Any]) -> pd.DataFrame:
    """Every probe's metrics at ``params`` (the sweep engine's, so exactly ``recall()``'s)."""
    grid = {k: [v] for k, v in grid_point(params).items()}
    return sweep(list(replays), grid).per_probe


REPORT_METRICS = ("hit", "mrr", "ndcg", "stale_leak")


def point_report(replays: Sequence[Replay], params: Mapping[str, Any], *, holdout: float = 0.3, seed: int = 0,
                 n_boot: int = 500, ci: float = 0.95) -> pd.DataFrame:
    """Means with bootstrap intervals at ``params``: over all probes, and over a tune and a
    holdout share (split by conversation where there are several, see
    :func:`vxmem.workbench.sweep.holdout.split_probes`). One row per metric and subset: ``mean``,
    ``lo``, ``hi``, the ``probes`` scored; no holdout rows with fewer than two probes."""
    per = probe_metrics_at(replays, params)
    subsets: list[tuple[str, np.ndarray]] = [("all", np.ones(len(per), dtype=bool))]
    if len(per) >= 2:
        split = split_probes(list(replays), holdout=holdout, seed=seed)
        subsets += [("tune", split.tune), ("holdout", split.holdout)]
    rows = []
    for m in REPORT_METRICS:
        col = per["rr" if m == "mrr" else m].to_numpy(dtype=np.float64)
        for name, mask in subsets:
            mean, lo, hi = bootstrap_ci(col[mask], n_boot=n_boot, seed=seed, ci=ci)
            rows.append({"metric": m, "subset": name, "mean": mean, "lo": lo, "hi": hi,
                         "probes": int(np.count_nonzero(~np.isnan(col[mask])))})
    return pd.DataFrame(rows, columns=["metric", "subset", "mean", "lo", "hi", "probes"])


def inert_at(replays: Sequence[Replay], settings: Mapping[str, Any]) -> dict[str, str]:
    """Parameters that cannot move any ranking at ``settings`` over ``replays``, with why."""
    s = {**DEFAULT_SETTINGS, **dict(settings)}
    point = {k: s[k] for k in (*BLEND_DEFAULTS, "hybrid_weight", "mode")}
    return questions.inert_parameters(point, replays=list(replays))


def stale_above_at(replays: Sequence[Replay], params: Mapping[str, Any]) -> tuple[float, int]:
    """How often a memory a probe calls stale ranks above one it calls relevant, at ``params``:
    ``(rate, ranked pairs)`` over every probe (NaN with no pair ranked)."""
    point = grid_point({k: v for k, v in params.items() if k in (*DEFAULT_POINT, "hybrid_weight")})
    frames = [questions.stale_replacement_pairs(r, pairs="probe", **point) for r in replays]
    pairs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["above"])
    ranked = pairs["above"].notna()
    return (float(pairs.loc[ranked, "above"].mean()) if ranked.any() else math.nan), int(ranked.sum())


def rank_movement(replays: Sequence[Replay], params: Mapping[str, Any], vary: str, values: Sequence) -> pd.DataFrame:
    """Rank of each probe's first relevant memory as ``vary`` takes ``values`` (others at ``params``).

    ``rank`` is ``1 / reciprocal rank`` from the sweep; NaN where no relevant memory made
    the list (``found`` False). Probes with nothing relevant are left out.
    """
    grid = {k: [v] for k, v in grid_point(params).items() if k != vary}
    grid[vary] = list(values)
    if vary == "token_budget":
        grid[vary] = [None if not v else int(v) for v in values]
    res = sweep(list(replays), grid).per_probe
    res = res[res["rr"].notna()].copy()
    res["value"] = res[vary].fillna(0) if vary == "token_budget" else res[vary]
    res["rank"] = np.where(res["rr"] > 0, 1.0 / res["rr"].where(res["rr"] > 0, 1.0), np.nan)
    res["found"] = res["rr"] > 0
    res["probe_label"] = res["conversation"].astype(str) + ":" + res["label"].astype(str)
    # Whether the probe's rank changes at all over the values (not found counts as a rank).
    res["moves"] = res.groupby("probe_label", observed=True)["rank"].transform(lambda r: r.fillna(-1).nunique() > 1)
    cols = ["value", "conversation", "probe", "label", "probe_label", "rank", "found", "rr", "moves"]
    return res[cols].reset_index(drop=True)


# ---------------------------------------------------------------------------- Sweep


def sweep_grid(replays: Sequence[Replay], x: str, x_values: Sequence, y: str, y_values: Sequence,
               fixed: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Mean metrics at every point of ``x`` x ``y`` (other parameters at ``fixed``)."""
    if x == y:
        raise ValueError("choose two different parameters")
    grid = {k: [v] for k, v in grid_point(fixed or {}).items() if k not in (x, y)}
    for name, vals in ((x, x_values), (y, y_values)):
        grid[name] = [None if (name == "token_budget" and not v) else v for v in vals]
    res = sweep(list(replays), grid)
    out = with_intervals(res.per_point, res.per_probe, POINT_METRICS)
    if "token_budget" in (x, y):
        out["token_budget"] = out["token_budget"].fillna(0)
    return out


def pareto_points(frame: pd.DataFrame) -> pd.DataFrame:
    """A sweep's points with ``pareto``: no other point has at least their nDCG, at most
    their stale-leak and at most their context tokens, and is better on one."""
    return frame.assign(pareto=questions.pareto_front(frame, maximize=("ndcg",), minimize=("stale_leak", "tokens")))


def sweep_holdout(replays: Sequence[Replay], x: str, x_values: Sequence, y: str, y_values: Sequence,
                  fixed: Mapping[str, Any] | None, metric: str, *, seed: int = 0,
                  n_boot: int = 500, subject_to: Sequence[Constraint] = ()) -> TuningResult:
    """The grid point best on a tune share of the probes (keeping the bounds ``subject_to``
    on their tune means), reported on the held-out rest
    (:func:`vxmem.workbench.sweep.holdout.tune_holdout`)."""
    grid = {k: [v] for k, v in grid_point(fixed or {}).items() if k not in (x, y)}
    for name, vals in ((x, x_values), (y, y_values)):
        grid[name] = [None if (name == "token_budget" and not v) else v for v in vals]
    split = split_probes(list(replays), seed=seed)
    bounds = [Constraint("rr", c.op, c.value) if c.metric == "mrr" else c for c in subject_to]
    return tune_holdout(list(replays), grid, split, metric="rr" if metric == "mrr" else metric,
                        n_boot=n_boot, seed=seed, subject_to=bounds)


def best_row(frame: pd.DataFrame, metric: str) -> pd.Series:
    """The row with the best ``metric`` (lowest for the leaks), first on ties."""
    return frame.sort_values(metric, ascending=metric in M.LOWER_IS_BETTER, kind="stable").iloc[0]


# ---------------------------------------------------------------------------- A/B


def ab_frames(replays: Sequence[Replay], params_a: Mapping[str, Any], params_b: Mapping[str, Any],
              policy_a: str = "blend", policy_b: str = "blend", replays_b: Sequence[Replay] | None = None,
              metric: str = "rr") -> tuple[pd.DataFrame, questions.ABSummary]:
    """Every probe under A and under B (:func:`vxmem.workbench.analysis.questions.ab_compare`) and its summary on
    ``metric``. ``params_*`` are slider points; each policy takes only its own parameters
    (the others keep the policy's defaults), ``limit`` and ``token_budget`` apply to both."""
    def point(params: Mapping[str, Any], policy: str, reps: Sequence[Replay]) -> dict[str, Any]:
        g = grid_point({k: v for k, v in params.items() if k in DEFAULT_POINT or k in POLICIES[policy].params})
        own = set(POLICIES[policy].params) | {"limit", "token_budget"}
        out = {k: v for k, v in g.items() if k in own}
        # a reranked replay ranks at the weight it was recorded with (its pools were reranked so)
        if "hybrid_weight" in params and all(r.mode == "hybrid" and r.rerank is None for r in reps):
            out["hybrid_weight"] = float(params["hybrid_weight"])
        return out

    reps_b = list(replays if replays_b is None else replays_b)
    frame = questions.ab_compare(list(replays), point(params_a, policy_a, replays), point(params_b, policy_b, reps_b),
                                policy_a, policy_b, replays_b=None if replays_b is None else reps_b)
    return frame, questions.ab_summary(frame, metric, top=10)


# ---------------------------------------------------------------------------- Replay


def memory_timeline(replay: Replay) -> pd.DataFrame:
    """One row per memory: when it was created and its fate (live, superseded, expired,
    consolidated into a summary, forgotten), for a timeline by session and kind."""
    frames = replay.to_frames()
    mem = frames["memories"].copy()
    ev = frames["events"]
    if mem.empty:
        return pd.DataFrame(columns=_TIMELINE_COLUMNS)
    # The replay records which event deleted each memory; a replay saved before it did is
    # read by the first deleting event at that moment.
    deleted_at: dict[Any, str] = {}
    for _, e in ev[ev["type"].isin(["expire", "consolidate", "forget"])].iterrows():
        deleted_at.setdefault(e["time"], e["type"])
    fate = {"expire": "expired", "consolidate": "consolidated", "forget": "forgotten"}
    how = mem["deleted_how"] if "deleted_how" in mem else pd.Series(None, index=mem.index, dtype=object)

    def status(r: pd.Series) -> str:
        if pd.notna(r["deleted"]):
            by = how[r.name] if isinstance(how[r.name], str) else deleted_at.get(r["deleted"], "")
            return fate.get(by, "deleted")
        if pd.notna(r["superseded_at"]):
            return "superseded"
        if r["derived_from"]:
            return "summary"
        return "live"

    mem["status"] = mem.apply(status, axis=1)
    mem["label"] = mem["labels"].apply(lambda x: ", ".join(x) if x else "-")
    mem["session"] = mem["session"].fillna("(none)")
    mem["end"] = mem["deleted"].fillna(mem["superseded_at"])
    mem["lane"] = mem["session"].astype(str) + " / " + mem["kind"].astype(str)
    # A spread within the lane, the same on every draw, so memories made at one moment stay apart.
    mem["jitter"] = (mem.groupby("lane").cumcount() * 0.618034) % 1.0 - 0.5
    return mem[_TIMELINE_COLUMNS]


def probe_results(replay: Replay, probe: int) -> pd.DataFrame:
    """What the live ``recall()`` returned at ``probe`` (at the replay's settings), with which
    were relevant or stale."""
    return _result_rows(replay, probe, replay.probes[probe]["recalled_ids"])


def missed_relevant(replay: Replay, probe: int) -> pd.DataFrame:
    """Relevant memories that existed at ``probe`` but ``recall()`` did not return."""
    got = set(replay.probes[probe]["recalled_ids"])
    pool = replay.pool(probe)
    ids = [m for m, g in zip(pool.ids, pool.grade) if g > 0 and m not in got]
    return _result_rows(replay, probe, ids).drop(columns=["rank"])


def probe_metrics(replay: Replay) -> pd.DataFrame:
    """The recorded metrics of every probe (hit, rr, nDCG, stale-leak...)."""
    frame = replay.to_frames()["probes"]
    cols = ["probe", "label", "time", "query", "session", "category"] + \
        [c for c in ("hit", "rr", "ndcg", "stale_leak", "foreign_leak") if c in frame]
    return frame[cols]


# ---------------------------------------------------------------------------- Budget


def context_budgets(conversation: Conversation, probe: int, budgets: Sequence[int],
                    settings: Mapping[str, Any] | None = None, recent_turns: int = 6,
                    limit: int = 10) -> dict[str, Any]:
    """``context()`` at probe number ``probe`` of ``conversation`` under each of ``budgets``.

    Replays the conversation and, at that probe, assembles the context block for every
    budget. Returns ``sections`` (tokens by section per budget), ``items`` (every line
    the most generous budget ships, and whether each budget kept it), ``texts``
    (budget -> the assembled text) and ``notes`` (per budget: tokens used, what was cut).
    """
    probes = conversation.probes
    if not 0 <= probe < len(probes):
        raise ValueError(f"probe must be in [0, {len(probes)}), got {probe}")
    target = probes[probe]
    blocks: dict[int, Any] = {}
    mode = {"mode": DEFAULT_MODE, **dict(settings or {})}["mode"]  # the workbench's mode, as budget_replay's

    def at_probe(memory, event, t):
        if event is target:
            look = unrecorded_look(memory)
            for b in budgets:
                blocks[int(b)] = look.context(event.query, session=event.session, token_budget=int(b),
                                              recent_turns=recent_turns, limit=limit, now=t, mode=mode,
                                              recency_from=memory.recency_from)
        return None

    replay(conversation, {**REPLAY_SETTINGS, **dict(settings or {}), "mode": mode}, on_probe=at_probe)
    return {"sections": _budget_sections(blocks), "items": _budget_items(blocks),
            "texts": {b: blk.text for b, blk in blocks.items()},
            "notes": _budget_notes(blocks), "query": target.query, "session": target.session}


def budget_replay(conversation: Conversation, budgets: Sequence[int], settings: Mapping[str, Any] | None = None,
                  recent_turns: int = 6, embedder: Embedder | None = None,
                  progress: Progress = False) -> list[dict[str, Any]]:
    """``context()`` at every probe of ``conversation`` under each of ``budgets``, in one replay.

    One entry per probe, as :func:`context_budgets` returns it (``sections``, ``items``,
    ``texts``, ``notes``, ``query``, ``session``), so a page that moves between probes and
    budgets replays once per ``settings`` and ``recent_turns``, not once per click.
    ``settings`` are the workbench's (blend, ``limit``, ``mode``, ``hybrid_weight``).
    """
    s = {**DEFAULT_SETTINGS, **dict(settings or {})}
    rs: dict[str, Any] = {**REPLAY_SETTINGS, **{k: float(s[k]) for k in BLEND_DEFAULTS}, "mode": s["mode"]}
    if s["mode"] == "hybrid":
        rs["hybrid_weight"] = float(s["hybrid_weight"])
    if s["recency_from"] != "created":
        rs["recency_from"] = s["recency_from"]
    limit = int(s["limit"])

    def at_probe(memory, event, t):
        look = unrecorded_look(memory)
        blocks = {int(b): look.context(event.query, session=event.session, token_budget=int(b),
                                       recent_turns=recent_turns, limit=limit, now=t, mode=s["mode"],
                                       recency_from=memory.recency_from)
                  for b in budgets}
        return {"sections": _budget_sections(blocks), "items": _budget_items(blocks),
                "texts": {b: blk.text for b, blk in blocks.items()}, "notes": _budget_notes(blocks),
                "query": event.query, "session": event.session}

    return list(replay(conversation, rs, embedder, on_probe=at_probe, progress=progress).extras)


def unrecorded_look(memory: Any) -> Any:
    """The replay's memory as a look that records no access: the blocks a page compares
    (one per budget) are what ``context()`` would give at that moment, not events of the
    replay; they rank with the memory's own ``recency_from``."""
    look = copy.copy(memory)
    look.recency_from = "created"
    return look


def _budget_sections(blocks: Mapping[int, Any]) -> pd.DataFrame:
    """Tokens by section (pinned, recent, recalled) for every budget."""
    return pd.DataFrame([{"budget": b, "section": name, "tokens": blk.tokens_by_section.get(name, 0)}
                         for b, blk in blocks.items() for name in _SECTIONS])


def _budget_items(blocks: Mapping[int, Any]) -> pd.DataFrame:
    """Every line the most generous budget ships, with one column per budget: was it kept."""
    if not blocks:
        return pd.DataFrame()
    widest = blocks[max(blocks)]
    items = []
    for name in _SECTIONS:
        for r in getattr(widest, name):
            row = {"section": name, "text": r.text, "id": r.id}
            for b, blk in blocks.items():
                row[str(b)] = r.id in blk.ids
            items.append(row)
    return pd.DataFrame(items)


def _budget_notes(blocks: Mapping[int, Any]) -> pd.DataFrame:
    """Per budget: tokens used, whether pinned facts alone went over, what was cut, the block's note."""
    notes = {b: {"tokens_used": blk.tokens_used, "over_budget": blk.over_budget, "cut_recent": blk.cut_recent,
                 "cut_recalled": blk.cut_recalled, "note": blk.note} for b, blk in blocks.items()}
    return pd.DataFrame.from_dict(notes, orient="index").rename_axis("budget").reset_index()
