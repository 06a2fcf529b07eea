"""The DataFrames the Streamlit workbench (``app.py``) and the notebooks share.

Presentation helpers only: every function here calls the library (replay, sweep, metrics,
the memory itself) and reshapes what it returns into a tidy DataFrame a chart or a table
can draw. No ranking happens here; ``scoring``, ``policies`` and ``sweep`` do all of it,
and the score parts shown are the ones ``recall()`` reported. Nothing imports Streamlit,
so the notebooks and tests use the same frames the pages show; what the pages offer
(slider ranges, the playground's seed, budget lists) is the app's, in ``app_pages/config.py``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import metrics as M
from . import scoring
from .datasets import FORMATS, Conversation, DatasetError, Event, load
from .keys import K_SUPERSEDED_BY, K_SUPERSEDES
from .memory import ConversationMemory
from .policies import BLEND_DEFAULTS, POLICIES
from .replay import Replay, replay, replay_many
from .sweep import rankings, sweep

# Every dataset replay of the workbench caches pools big enough for any limit up to MAX_LIMIT.
MAX_LIMIT = 20
REPLAY_SETTINGS: dict[str, Any] = {"pool_limit": MAX_LIMIT}

# The memory's own defaults as a grid point (token_budget 0: no budget).
DEFAULT_POINT: dict[str, Any] = {**BLEND_DEFAULTS, "limit": 10, "token_budget": 0}

# The metric columns of a sweep's per_point frame, in metrics order (a mean of rr is mrr).
POINT_METRICS = tuple("mrr" if m == "rr" else m for m in M.METRICS)

# What compare_policies searches for each policy's best point.
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
_TIMELINE_COLUMNS = ["created", "end", "session", "kind", "lane", "status", "label", "text", "tokens", "id"]
_SECTIONS = ("pinned", "recent", "recalled")


# ---------------------------------------------------------------------------- datasets


def shipped_datasets(root) -> pd.DataFrame:
    """The shipped scenarios (``datasets/*.jsonl``) and benchmark fixtures, one row each."""
    root = Path(root)
    rows = []
    for path in sorted(root.glob("*.jsonl")):
        rows.append({"name": path.stem, "path": str(path), "format": "jsonl"})
    for path in sorted((root / "fixtures").glob("*.json")):
        # A fixture is named for its format ("locomo_sample.json"); None lets load() guess.
        fmt = next((f for f in FORMATS if f != "jsonl" and f in path.stem), None)
        rows.append({"name": f"fixtures/{path.name}", "path": str(path), "format": fmt})
    return pd.DataFrame(rows, columns=["name", "path", "format"])


def load_bytes(filename: str, data: bytes, format: str | None = None) -> list[Conversation]:
    """Load an uploaded file (vxmem JSONL, LoCoMo JSON or LongMemEval JSON).

    Every problem, whatever its kind, comes back as one :class:`DatasetError` with a
    message a person can act on; nothing is half-loaded.
    """
    suffix = ".jsonl" if filename.lower().endswith(".jsonl") else ".json"
    fd, path = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            convs = load(path, format=format)
        except DatasetError as exc:
            raise DatasetError(str(exc).replace(path, filename)) from None
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
            raise DatasetError(f"{filename}: cannot read it as {format or 'any supported format'}: {exc}") from None
    finally:
        os.unlink(path)
    if not convs:
        raise DatasetError(f"{filename}: holds no conversation")
    if not any(c.probes for c in convs):
        raise DatasetError(f"{filename}: has no probe (question) to score recall on")
    return convs


def replay_all(conversations: Sequence[Conversation], settings: Mapping[str, Any] | None = None) -> list[Replay]:
    """Replay every conversation with the workbench's settings (pools for limit <= MAX_LIMIT)."""
    s = dict(REPLAY_SETTINGS)
    s.update(settings or {})
    return replay_many(list(conversations), s, n_jobs=1, progress=False)


def conversation_summary(conversations: Sequence[Conversation]) -> pd.DataFrame:
    """One row per conversation: events by type."""
    rows = []
    for c in conversations:
        counts = pd.Series([e.type for e in c.events]).value_counts().to_dict()
        rows.append({"conversation": c.name, "events": len(c.events), **counts, "description": c.description})
    return pd.DataFrame(rows).fillna(0)


# ---------------------------------------------------------------------------- parameters


def grid_point(params: Mapping[str, Any]) -> dict[str, Any]:
    """Slider values as a sweep grid point: ``token_budget`` 0 means no budget."""
    out = dict(params)
    if "token_budget" in out and not out["token_budget"]:
        out["token_budget"] = None
    if "limit" in out:
        out["limit"] = int(out["limit"])
    if out.get("token_budget") is not None:
        out["token_budget"] = int(out["token_budget"])
    return out


def param_values(name: str, lo: float, hi: float, n: int) -> list:
    """``n`` values from ``lo`` to ``hi`` for a sweep axis (geometric for half-lives)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if name in ("limit", "token_budget"):
        ints = sorted({int(round(v)) for v in np.linspace(lo, hi, n)})
        return [v for v in ints if v >= 1] or [1]
    if name.endswith("half_life_days") and lo > 0:
        vals = np.geomspace(lo, hi, n)
    else:
        vals = np.linspace(lo, hi, n)
    return sorted({round(float(v), 4) for v in vals})


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


def ranking_at(replay: Replay, probe: int, params: Mapping[str, Any]) -> pd.DataFrame:
    """What the sweep engine ships for ``probe`` at ``params``: rank, label, text, relevant, stale."""
    ids = rankings(replay, **grid_point(params))[probe]
    return _result_rows(replay, probe, ids)


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
    return res[["value", "conversation", "probe", "label", "probe_label", "rank", "found", "rr"]].reset_index(drop=True)


# ---------------------------------------------------------------------------- Sweep


def sweep_grid(replays: Sequence[Replay], x: str, x_values: Sequence, y: str, y_values: Sequence,
               fixed: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Mean metrics at every point of ``x`` x ``y`` (other parameters at ``fixed``)."""
    if x == y:
        raise ValueError("choose two different parameters")
    grid = {k: [v] for k, v in grid_point(fixed or {}).items() if k not in (x, y)}
    for name, vals in ((x, x_values), (y, y_values)):
        grid[name] = [None if (name == "token_budget" and not v) else v for v in vals]
    out = sweep(list(replays), grid).per_point
    if "token_budget" in (x, y):
        out["token_budget"] = out["token_budget"].fillna(0)
    return out


def best_row(frame: pd.DataFrame, metric: str) -> pd.Series:
    """The row with the best ``metric`` (lowest for the leaks), first on ties."""
    return frame.sort_values(metric, ascending=metric in M.LOWER_IS_BETTER, kind="stable").iloc[0]


# ---------------------------------------------------------------------------- Compare


def compare_policies(replays: Sequence[Replay], metric: str = "ndcg",
                     grids: Mapping[str, Mapping[str, list]] | None = None,
                     point: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per policy at its default parameters and one at its best on ``metric``.

    ``grids`` says where each policy's best is searched (default :data:`POLICY_GRIDS`);
    ``point`` may fix ``limit`` and ``token_budget`` for every policy (default: the replays').
    """
    grids = POLICY_GRIDS if grids is None else grids
    shared = {k: [v] for k, v in grid_point(point or {}).items() if k in ("limit", "token_budget")}
    rows = []
    for name, pol in POLICIES.items():
        default = sweep(list(replays), {**shared, **{k: [v] for k, v in pol.defaults.items()}},
                        policy=name).per_point.iloc[0]
        grid = grids.get(name) or {}
        best = best_row(sweep(list(replays), {**shared, **grid}, policy=name).per_point, metric) if grid else default
        for setting, row in (("default", default), ("best", best)):
            params = {k: float(row[k]) for k in pol.params if k in row}
            rows.append({"policy": name, "setting": setting,
                         "params": ", ".join(f"{k}={v:g}" for k, v in params.items()) or "(none)",
                         **{m: row[m] for m in POINT_METRICS if m in row}, "description": pol.description})
    return pd.DataFrame(rows)


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
    return mem[_TIMELINE_COLUMNS]


def probe_results(replay: Replay, probe: int) -> pd.DataFrame:
    """What the live ``recall()`` returned at ``probe``, with which were relevant or stale."""
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


# ---------------------------------------------------------------------------- Playground


def next_label(events: Sequence[Mapping[str, Any]]) -> str:
    """A fresh ``m<n>`` label for the next memory of a playground session."""
    used = {e.get("label") for e in events}
    n = len(events) + 1
    while f"m{n}" in used:
        n += 1
    return f"m{n}"


def playground_conversation(events: Sequence[Mapping[str, Any]], query: str, session: str | None,
                            now: float, limit: int = 10) -> Conversation:
    """The playground's events plus one probe (the query at ``now``) as a conversation."""
    evs = [Event.from_dict(dict(e)) for e in events]
    if query.strip():
        evs.append(Event.from_dict({"time": float(now), "type": "probe", "label": "query", "query": query,
                                    "session": session, "limit": int(limit)}))
    return Conversation(name="playground", events=evs, description="typed into the workbench playground")


def playground_recall(events: Sequence[Mapping[str, Any]], query: str, session: str | None, now: float,
                      settings: Mapping[str, Any], judge: str | None = None) -> dict[str, pd.DataFrame]:
    """Build the playground memory from ``events`` and ask it ``query`` at ``now``.

    Returns ``ranking`` (``recall()``'s results with their ``_vx_scoring`` parts),
    ``parts`` (relevance / recency / feedback contributions: the parts times their
    weights, long format), ``memories`` (every memory with its label and fate) and
    ``history`` (every supersession chain, one row per memory in it).
    """
    s = {k: v for k, v in settings.items() if k in BLEND_DEFAULTS}
    limit = int(settings.get("limit", 10))
    conv = playground_conversation(events, query, session, now, limit)
    captured: dict[str, pd.DataFrame] = {}

    def at_probe(memory, event, t):
        res = memory.recall(event.query, session=event.session, limit=limit, now=t)
        captured["ranking"] = res.to_frame()
        captured["history"] = _supersession_chains(memory)
        return None

    rep = replay(conv, {**s, "limit": limit, "judge": judge}, on_probe=at_probe if query.strip() else None)
    labels = {m["id"]: ", ".join(m["labels"]) for m in rep.memories}
    ranking = captured.get("ranking", pd.DataFrame())
    if not ranking.empty:
        ranking.insert(1, "label", ranking["id"].map(labels))
    return {"ranking": ranking, "parts": score_parts(ranking, {**BLEND_DEFAULTS, **s}),
            "memories": memory_timeline(rep) if rep.memories else pd.DataFrame(),
            "history": _labelled_chains(captured.get("history", pd.DataFrame()), labels)}


def _supersession_chains(memory: ConversationMemory) -> pd.DataFrame:
    """Every chain of corrections in ``memory``, oldest first, one row per memory in it."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for r in memory.db.scan():
        meta = r.metadata
        if r.id in seen or not (meta.get(K_SUPERSEDES) or meta.get(K_SUPERSEDED_BY)):
            continue
        chain = memory.history(r.id)
        seen.update(h.id for h in chain)
        for h in chain:
            rows.append({"chain": chain[0].id, "id": h.id, "text": h.text, "kind": h.kind, "ts": h.ts,
                         "live": h.live, "superseded_at": h.superseded_at})
    return pd.DataFrame(rows)


def _labelled_chains(history: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    """Chains named by their members' labels (``"m2 -> m4"``) rather than by memory ids."""
    if history.empty:
        return history
    history = history.copy()
    history["label"] = history["id"].map(labels)
    names = history.groupby("chain", sort=False)["label"].agg(" -> ".join)
    history["chain"] = history["chain"].map(names)
    return history[["chain", "label", "text", "kind", "ts", "live", "superseded_at"]]


def score_parts(ranking: pd.DataFrame, settings: Mapping[str, Any]) -> pd.DataFrame:
    """Each result's score split into what relevance, recency and feedback contributed.

    The parts are the ones ``recall()`` reported (``relevance_norm``, ``recency``,
    ``feedback`` from :func:`vxmem.scoring.score_pool`); each part's term is
    :func:`vxmem.scoring.blend` of that part alone, so the weights and the feedback clamp
    stay in one place and the three terms sum to ``score``.
    """
    if ranking.empty:
        return pd.DataFrame(columns=["rank", "label", "text", "part", "contribution"])
    frame = ranking.copy()
    w = (float(settings["recency_weight"]), float(settings["feedback_weight"]))
    frame["relevance"] = scoring.blend(frame["relevance_norm"], 0.0, 0.0, *w)
    frame["recency"] = scoring.blend(0.0, frame["recency"], 0.0, *w)
    frame["feedback"] = scoring.blend(0.0, 0.0, frame["feedback"], *w)
    cols = ["rank", "label", "text"] if "label" in frame else ["rank", "text"]
    return frame.melt(id_vars=cols, value_vars=["relevance", "recency", "feedback"], var_name="part",
                      value_name="contribution")


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

    def at_probe(memory, event, t):
        if event is target:
            for b in budgets:
                blocks[int(b)] = memory.context(event.query, session=event.session, token_budget=int(b),
                                                recent_turns=recent_turns, limit=limit, now=t)
        return None

    replay(conversation, {**REPLAY_SETTINGS, **dict(settings or {})}, on_probe=at_probe)
    return {"sections": _budget_sections(blocks), "items": _budget_items(blocks),
            "texts": {b: blk.text for b, blk in blocks.items()},
            "notes": _budget_notes(blocks), "query": target.query, "session": target.session}


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


def to_csv(frame: pd.DataFrame) -> bytes:
    """A frame as UTF-8 CSV bytes (for download buttons)."""
    return frame.to_csv(index=False).encode("utf-8")


def dumps_events(events: Sequence[Mapping[str, Any]]) -> str:
    """Playground events as JSON (stable key order), a cache key and a download."""
    return json.dumps(list(events), sort_keys=True)
