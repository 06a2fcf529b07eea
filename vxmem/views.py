"""The DataFrames the Streamlit workbench (``app.py``) and the notebooks share.

Presentation helpers only: every function here calls the library (replay, sweep, metrics,
the memory itself) and reshapes what it returns into a tidy DataFrame a chart or a table
can draw. No ranking happens here; ``scoring``, ``policies`` and ``sweep`` do all of it,
and the score parts shown are the ones ``recall()`` reported. Nothing imports Streamlit,
so the notebooks and tests use the same frames the pages show; what the pages offer
(slider ranges, the playground's seed, budget lists) is the app's, in ``app_pages/config.py``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import analysis, scoring
from . import metrics as M
from .chatlogs import loads_chatlog
from .clock import to_epoch
from .datasets import CHAT_FORMATS, FORMATS, Conversation, DatasetError, Event, load, loads_jsonl
from .embed import Embedder, HashingEmbedder
from .keys import K_SUPERSEDED_BY, K_SUPERSEDES
from .memory import ConversationMemory
from .policies import BLEND_DEFAULTS, POLICIES
from .replay import Progress, Replay, replay, replay_many
from .store.checks import SEARCH_MODES, check_mode
from .sweep import sweep

# Every dataset replay of the workbench caches pools big enough for any limit up to MAX_LIMIT.
MAX_LIMIT = 20
REPLAY_SETTINGS: dict[str, Any] = {"pool_limit": MAX_LIMIT}

# The memory's own defaults as a grid point (token_budget 0: no budget).
DEFAULT_POINT: dict[str, Any] = {**BLEND_DEFAULTS, "limit": 10, "token_budget": 0}

# The workbench's one parameter state: the ranking point, plus what decides which memories
# enter a pool (the search mode, the hybrid weight, the embedder). Defaults are the library's.
# dense: a hybrid pool is no prefix of a bigger one, so the workbench replays it per limit (see replay_settings)
DEFAULT_MODE = check_mode(None)
EMBEDDER_NAMES = ("default", "hashing")  # "default": whatever Vectrix() embeds with
DEFAULT_SETTINGS: dict[str, Any] = {**DEFAULT_POINT, "mode": DEFAULT_MODE, "hybrid_weight": scoring.HYBRID_WEIGHT,
                                    "embedder": "default"}
SETTINGS_KEYS = tuple(DEFAULT_SETTINGS)
_INT_SETTINGS = ("limit", "token_budget")

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
    """Load an uploaded file (vxmem JSONL, LoCoMo JSON, LongMemEval JSON or a chat log).

    Every problem, whatever its kind, comes back as one :class:`DatasetError` with a
    message a person can act on; nothing is half-loaded. A chat log has no probes yet, so
    it is refused here with a pointer to :func:`chatlog_from_bytes` (the Import page).
    """
    low = filename.lower()
    suffix = next((x for x in (".jsonl", ".csv") if low.endswith(x)), ".json")
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
        chat = any(c.meta.get("source") in CHAT_FORMATS for c in convs)
        hint = ": write probes for a chat log on the Import page" if chat else ""
        raise DatasetError(f"{filename}: has no probe (question) to score recall on{hint}")
    return convs


def chatlog_from_bytes(filename: str, data: bytes, format: str | None = None) -> Conversation:
    """An uploaded chat log (OpenAI / ChatML JSONL, a ChatGPT export, CSV) as one conversation
    of turns; its problems are one :class:`DatasetError` naming the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{filename}: not UTF-8 text (byte {exc.start}); is it a chat log?") from None
    stem = os.path.splitext(os.path.basename(filename))[0] or "chatlog"
    try:
        return loads_chatlog(text, format, name=stem, path=filename)
    except (ValueError, TypeError, KeyError) as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(f"{filename}: cannot read it as {format or 'a chat log'}: {exc}") from None


def turn_table(conversation: Conversation) -> pd.DataFrame:
    """Every memory-making event of ``conversation``: label, session, role, time, text."""
    rows = [{"label": e.label, "session": e.session, "role": e.role, "time": pd.Timestamp(e.time, unit="s", tz="UTC"),
             "text": e.text or e.correction} for e in conversation.events if e.creates_memory and e.label]
    return pd.DataFrame(rows, columns=["label", "session", "role", "time", "text"])


def probe_list(conversation: Conversation) -> pd.DataFrame:
    """The probes of ``conversation``: label, time, session, query, relevant labels."""
    rows = [{"label": e.label, "time": pd.Timestamp(e.time, unit="s", tz="UTC"), "session": e.session,
             "query": e.query, "relevant": ", ".join(e.relevant)} for e in conversation.probes]
    return pd.DataFrame(rows, columns=["label", "time", "session", "query", "relevant"])


@functools.cache
def _hashing() -> HashingEmbedder:
    return HashingEmbedder()


def embedder_for(name: str) -> Embedder | None:
    """The embedder a workbench name stands for: ``"default"`` is None (``Vectrix()``'s own),
    ``"hashing"`` the fast offline :class:`~vxmem.embed.HashingEmbedder`."""
    if name == "default":
        return None
    if name == "hashing":
        return _hashing()
    raise ValueError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDER_NAMES)}")


def replay_settings(settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a workbench replay records with for ``settings``: the mode, and pools for every
    limit up to :data:`MAX_LIMIT` (a hybrid pool is no prefix of a bigger one, so in hybrid
    mode the pools are recorded for the limit itself, one replay for every limit up to 10)."""
    s = {**DEFAULT_SETTINGS, **dict(settings or {})}
    out: dict[str, Any] = {**REPLAY_SETTINGS, "mode": s["mode"]}
    if s["mode"] == "hybrid":
        out["pool_limit"] = max(10, int(s["limit"]))
    return out


def replay_all(conversations: Sequence[Conversation], settings: Mapping[str, Any] | None = None,
               embedder: Embedder | None = None, progress: Progress = False) -> list[Replay]:
    """Replay every conversation with the workbench's settings (pools for limit <= MAX_LIMIT)."""
    s = dict(REPLAY_SETTINGS)
    s.update(settings or {})
    return replay_many(list(conversations), s, embedder, n_jobs=1, progress=progress)


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


def point_of(settings: Mapping[str, Any], hybrid: bool | None = None) -> dict[str, Any]:
    """The sweepable part of the workbench ``settings`` as slider values: the blend, ``limit``,
    ``token_budget`` and, for hybrid pools (``hybrid``; default: the settings' mode),
    ``hybrid_weight``."""
    s = {**DEFAULT_SETTINGS, **dict(settings)}
    out = {k: s[k] for k in DEFAULT_POINT}
    if (s["mode"] == "hybrid") if hybrid is None else hybrid:
        out["hybrid_weight"] = float(s["hybrid_weight"])
    return out


def check_settings(raw: Mapping[str, Any], ranges: Mapping[str, tuple[float, float]],
                   embedders: Sequence[str] = EMBEDDER_NAMES,
                   base: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Settings read from a URL or an imported file, checked: ``(settings, problems)``.

    Strings become numbers; a value outside ``ranges`` (name -> (lo, hi)), an unknown mode
    or embedder, or an unknown name is left at ``base`` (default :data:`DEFAULT_SETTINGS`)
    and named in ``problems``, so a bad link opens the page rather than an error.
    """
    out = {**DEFAULT_SETTINGS, **dict(base or {})}
    problems: list[str] = []
    for k, v in raw.items():
        if k not in SETTINGS_KEYS:
            problems.append(f"unknown setting {k!r}")
            continue
        if k == "mode":
            if v not in SEARCH_MODES:
                problems.append(f"mode {v!r}: expected one of {', '.join(SEARCH_MODES)}")
            else:
                out[k] = v
            continue
        if k == "embedder":
            if v not in embedders:
                problems.append(f"embedder {v!r}: expected one of {', '.join(embedders)}")
            else:
                out[k] = v
            continue
        try:
            num = float(v)
        except (TypeError, ValueError):
            problems.append(f"{k} {v!r}: not a number")
            continue
        lo, hi = ranges.get(k, (-math.inf, math.inf))
        if not lo <= num <= hi or (k in _INT_SETTINGS and not num.is_integer()):
            problems.append(f"{k} {v!r}: expected {'a whole number' if k in _INT_SETTINGS else 'a number'} "
                            f"in [{lo:g}, {hi:g}]")
            continue
        out[k] = int(num) if k in _INT_SETTINGS else num
    return out, problems


def settings_to_query(settings: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, str]:
    """The settings that differ from ``defaults``, as URL query parameters."""
    return {k: (f"{v:g}" if isinstance(v, float) else str(v)) for k, v in settings.items()
            if k in SETTINGS_KEYS and v != defaults.get(k)}


def settings_json(settings: Mapping[str, Any]) -> str:
    """The settings as a JSON document (what the dashboard exports and imports back)."""
    return json.dumps({k: settings[k] for k in SETTINGS_KEYS if k in settings}, indent=2)


def settings_from_json(text: str | bytes, ranges: Mapping[str, tuple[float, float]],
                       embedders: Sequence[str] = EMBEDDER_NAMES) -> tuple[dict[str, Any], list[str]]:
    """Settings exported by :func:`settings_json`, read back and checked (see :func:`check_settings`)."""
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a settings file: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError("not a settings file: expected a JSON object of setting -> value")
    return check_settings(raw, ranges, embedders)


def settings_snippet(settings: Mapping[str, Any]) -> str:
    """The settings as Python: the ``Vectrix(...)`` that ranks this way and its ``recall(...)``."""
    s = {**DEFAULT_SETTINGS, **dict(settings)}
    memory = ", ".join(f"{k}={float(s[k])!r}" for k in BLEND_DEFAULTS)
    if s["mode"] == "hybrid":
        memory += f", hybrid_weight={float(s['hybrid_weight'])!r}"
    lines = ["from vxmem import Vectrix"]
    if s["embedder"] == "hashing":
        lines[0] += "\nfrom vxmem.embed import HashingEmbedder"
        memory = "embedder=HashingEmbedder(), " + memory
    budget = int(s["token_budget"]) or None
    lines += ["", f'db = Vectrix("chat.vxdb", {memory})',
              f'results = db.recall(query, session=session, limit={int(s["limit"])}, token_budget={budget!r}, '
              f'mode={s["mode"]!r})']
    return "\n".join(lines) + "\n"


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


def ranking_at(replay: Replay, probe: int, params: Mapping[str, Any],
               conversation: Conversation | None = None) -> pd.DataFrame:
    """What ``recall()`` ships for ``probe`` at ``params``, from the cached pool: rank,
    label, text, kind, session, tokens, relevant, stale and the score parts (raw
    ``relevance`` beside ``relevance_norm``, ``recency``, ``feedback``, ``score``)."""
    return returned(explain(replay, probe, params, conversation))


def _why_point(replay: Replay, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as :func:`vxmem.analysis.why_recalled` takes them for ``replay``."""
    point = grid_point({k: v for k, v in params.items() if k in DEFAULT_POINT})
    if replay.mode == "hybrid" and "hybrid_weight" in params:
        point["hybrid_weight"] = float(params["hybrid_weight"])
    return point


def explain(replay: Replay, probe: int, params: Mapping[str, Any],
            conversation: Conversation | None = None) -> pd.DataFrame:
    """Why each memory that existed at ``probe`` was or was not returned at ``params``
    (:func:`vxmem.analysis.why_recalled`, one row per memory, reason first)."""
    return analysis.why_recalled(replay, probe, _why_point(replay, params), conversation=conversation)


_RETURNED_COLUMNS = ["rank", "label", "text", "kind", "session", "tokens", "relevant", "stale", "score", "relevance",
                     "relevance_norm", "recency", "feedback"]
_WHY_SHOWN = ["reason", "rank", "label", "text", "detail", "relevant", "stale", "score", "relevance",
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
    return out[_WHY_SHOWN].reset_index(drop=True)


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
    :func:`vxmem.analysis.split_probes`). One row per metric and subset: ``mean``,
    ``lo``, ``hi``, the ``probes`` scored; no holdout rows with fewer than two probes."""
    per = probe_metrics_at(replays, params)
    subsets: list[tuple[str, np.ndarray]] = [("all", np.ones(len(per), dtype=bool))]
    if len(per) >= 2:
        split = analysis.split_probes(list(replays), holdout=holdout, seed=seed)
        subsets += [("tune", split.tune), ("holdout", split.holdout)]
    rows = []
    for m in REPORT_METRICS:
        col = per["rr" if m == "mrr" else m].to_numpy(dtype=np.float64)
        for name, mask in subsets:
            mean, lo, hi = analysis.bootstrap_ci(col[mask], n_boot=n_boot, seed=seed, ci=ci)
            rows.append({"metric": m, "subset": name, "mean": mean, "lo": lo, "hi": hi,
                         "probes": int(np.count_nonzero(~np.isnan(col[mask])))})
    return pd.DataFrame(rows, columns=["metric", "subset", "mean", "lo", "hi", "probes"])


def inert_at(replays: Sequence[Replay], settings: Mapping[str, Any]) -> dict[str, str]:
    """Parameters that cannot move any ranking at ``settings`` over ``replays``, with why."""
    s = {**DEFAULT_SETTINGS, **dict(settings)}
    point = {k: s[k] for k in (*BLEND_DEFAULTS, "hybrid_weight", "mode")}
    return analysis.inert_parameters(point, replays=list(replays))


def stale_above_at(replays: Sequence[Replay], params: Mapping[str, Any]) -> tuple[float, int]:
    """How often a memory a probe calls stale ranks above one it calls relevant, at ``params``:
    ``(rate, ranked pairs)`` over every probe (NaN with no pair ranked)."""
    point = grid_point({k: v for k, v in params.items() if k in (*DEFAULT_POINT, "hybrid_weight")})
    frames = [analysis.stale_replacement_pairs(r, pairs="probe", **point) for r in replays]
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
    out = sweep(list(replays), grid).per_point
    if "token_budget" in (x, y):
        out["token_budget"] = out["token_budget"].fillna(0)
    return out


def pareto_points(frame: pd.DataFrame) -> pd.DataFrame:
    """A sweep's points with ``pareto``: no other point has at least their nDCG, at most
    their stale-leak and at most their context tokens, and is better on one."""
    return frame.assign(pareto=analysis.pareto_front(frame, maximize=("ndcg",), minimize=("stale_leak", "tokens")))


def sweep_holdout(replays: Sequence[Replay], x: str, x_values: Sequence, y: str, y_values: Sequence,
                  fixed: Mapping[str, Any] | None, metric: str, *, seed: int = 0,
                  n_boot: int = 500) -> analysis.TuningResult:
    """The grid point best on a tune share of the probes, reported on the held-out rest
    (:func:`vxmem.analysis.tune_holdout`)."""
    grid = {k: [v] for k, v in grid_point(fixed or {}).items() if k not in (x, y)}
    for name, vals in ((x, x_values), (y, y_values)):
        grid[name] = [None if (name == "token_budget" and not v) else v for v in vals]
    split = analysis.split_probes(list(replays), seed=seed)
    return analysis.tune_holdout(list(replays), grid, split, metric="rr" if metric == "mrr" else metric,
                                 n_boot=n_boot, seed=seed)


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


# ---------------------------------------------------------------------------- A/B


def ab_frames(replays: Sequence[Replay], params_a: Mapping[str, Any], params_b: Mapping[str, Any],
              policy_a: str = "blend", policy_b: str = "blend", replays_b: Sequence[Replay] | None = None,
              metric: str = "rr") -> tuple[pd.DataFrame, analysis.ABSummary]:
    """Every probe under A and under B (:func:`vxmem.analysis.ab_compare`) and its summary on
    ``metric``. ``params_*`` are slider points; each policy takes only its own parameters
    (the others keep the policy's defaults), ``limit`` and ``token_budget`` apply to both."""
    def point(params: Mapping[str, Any], policy: str, reps: Sequence[Replay]) -> dict[str, Any]:
        g = grid_point({k: v for k, v in params.items() if k in DEFAULT_POINT})
        own = set(POLICIES[policy].params) | {"limit", "token_budget"}
        out = {k: v for k, v in g.items() if k in own}
        if "hybrid_weight" in params and all(r.mode == "hybrid" for r in reps):
            out["hybrid_weight"] = float(params["hybrid_weight"])
        return out

    reps_b = list(replays if replays_b is None else replays_b)
    frame = analysis.ab_compare(list(replays), point(params_a, policy_a, replays), point(params_b, policy_b, reps_b),
                                policy_a, policy_b, replays_b=None if replays_b is None else reps_b)
    return frame, analysis.ab_summary(frame, metric, top=10)


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


# ---------------------------------------------------------------------------- Playground


def next_label(events: Sequence[Mapping[str, Any]]) -> str:
    """A fresh ``m<n>`` label for the next memory of a playground session."""
    used = {e.get("label") for e in events}
    n = len(events) + 1
    while f"m{n}" in used:
        n += 1
    return f"m{n}"


def playground_conversation(events: Sequence[Mapping[str, Any]], query: str, session: str | None,
                            now: float, limit: int = 10, relevant: Sequence[str] = ()) -> Conversation:
    """The playground's events plus one probe (the query at ``now``) as a conversation."""
    evs = [Event.from_dict(dict(e)) for e in events]
    if query.strip():
        evs.append(Event.from_dict({"time": float(now), "type": "probe", "label": "query", "query": query,
                                    "session": session, "limit": int(limit), "relevant": list(relevant)}))
    return Conversation(name="playground", events=evs, description="typed into the workbench playground")


def _playground_replay_settings(settings: Mapping[str, Any], judge: str | None) -> dict[str, Any]:
    s = {**DEFAULT_SETTINGS, **dict(settings)}
    out: dict[str, Any] = {k: float(s[k]) for k in BLEND_DEFAULTS}
    out.update(limit=int(s["limit"]), mode=s["mode"], judge=judge)
    if s["mode"] == "hybrid":
        out["hybrid_weight"] = float(s["hybrid_weight"])
    if int(s["token_budget"] or 0):
        out["token_budget"] = int(s["token_budget"])
    return out


def playground_recall(events: Sequence[Mapping[str, Any]], query: str, session: str | None, now: float,
                      settings: Mapping[str, Any], judge: str | None = None,
                      embedder: Embedder | None = None) -> dict[str, Any]:
    """Build the playground memory from ``events`` and ask it ``query`` at ``now``.

    ``settings`` are the workbench's (the blend, ``limit``, ``token_budget``, ``mode``,
    ``hybrid_weight``). Returns ``ranking`` (``recall()``'s results with their
    ``_vx_scoring`` parts, raw ``relevance`` beside ``relevance_norm``), ``parts``
    (relevance / recency / feedback contributions, long format), ``why`` (every memory and
    why it was or was not returned, :func:`vxmem.analysis.why_recalled_live`),
    ``memories`` (every memory with its label and fate), ``history`` (every supersession
    chain) and ``low_relevance`` (the memory's threshold for a weak best match, or None).
    """
    rs = _playground_replay_settings(settings, judge)
    limit = rs["limit"]
    conv = playground_conversation(events, query, session, now, limit)
    captured: dict[str, Any] = {}

    def at_probe(memory, event, t):
        kw = {"limit": limit, "token_budget": rs.get("token_budget"), "mode": rs["mode"],
              "hybrid_weight": rs.get("hybrid_weight")}
        res = memory.recall(event.query, session=event.session, now=t, **kw)
        captured["ranking"] = res.to_frame()
        captured["why"] = analysis.why_recalled_live(memory, event.query, event.session, now=t, **kw)
        captured["history"] = _supersession_chains(memory)
        captured["low_relevance"] = low_relevance_of(memory, rs["mode"])
        return None

    rep = replay(conv, rs, embedder, on_probe=at_probe if query.strip() else None)
    labels = {m["id"]: ", ".join(m["labels"]) for m in rep.memories}
    ranking = captured.get("ranking", pd.DataFrame())
    if not ranking.empty:
        ranking.insert(1, "label", ranking["id"].map(labels))
    why = captured.get("why", pd.DataFrame(columns=_WHY_SHOWN))
    if not why.empty:  # the playground names memories by label: so do the details
        why = why.assign(label=why["id"].map(labels), versus_label=why["versus"].map(labels))
        for mid, lab in labels.items():
            why["detail"] = why["detail"].str.replace(mid, lab, regex=False)
    return {"ranking": ranking, "parts": score_parts(ranking, {**BLEND_DEFAULTS, **rs}), "why": why,
            "memories": memory_timeline(rep) if rep.memories else pd.DataFrame(),
            "history": _labelled_chains(captured.get("history", pd.DataFrame()), labels),
            "low_relevance": captured.get("low_relevance"), "mode": rep.mode, "rerank": rep.rerank}


def playground_jsonl(events: Sequence[Mapping[str, Any]], now: float, query: str, session: str | None,
                     settings: Mapping[str, Any], judge: str | None = None, relevant: Sequence[str] = ()) -> str:
    """The playground as a vxmem JSONL conversation the Replay page (and ``vxmem replay``)
    loads: its events, the query as a probe at the clock's time (``relevant`` the labels it
    should return), the judge and the settings in the header."""
    conv = playground_conversation(events, query, session, now, int(settings.get("limit", 10)), relevant)
    rs = _playground_replay_settings(settings, judge)
    head = {k: v for k, v in rs.items() if k != "judge"}
    conv.meta = {"settings": head, **({"judge": judge} if judge else {})}
    conv.description = "typed into the vxmem workbench playground (load it on the Replay page)"
    return conv.to_jsonl()


def playground_state(text: str) -> dict[str, Any]:
    """A playground saved by :func:`playground_jsonl`, read back: ``events`` (dicts), the
    clock ``now``, ``query``, ``session``, ``relevant``, ``judge`` and ``settings``."""
    conv = loads_jsonl(text)
    probes = conv.probes
    events = [e.to_dict() for e in conv.events if e.type != "probe"]
    for e in events:
        e["time"] = to_epoch(e["time"])
    last = probes[-1] if probes else None
    settings = dict(conv.meta.get("settings") or {})
    return {"events": events, "now": last.time if last else (conv.events[-1].time if conv.events else 0.0),
            "query": last.query if last else "", "session": last.session if last else None,
            "relevant": sorted(last.relevant) if last else [], "judge": conv.meta.get("judge"),
            "settings": settings}


def low_relevance_of(memory: Any, mode: str | None) -> float | None:
    """The raw relevance below which ``memory`` calls its best match weak
    (``ConversationMemory.low_relevance``), or None where the memory cannot say."""
    fn = getattr(memory, "low_relevance", None)
    if fn is None:
        return None
    value = fn(mode=mode, rerank=None)
    return None if value is None else float(value)


def relevance_note(best_raw: float | None, threshold: float | None, mode: str,
                   rerank: str | None = None) -> tuple[str, str]:
    """What to say about the best candidate's raw relevance: ``(level, text)``, level
    ``"warning"`` when it is below ``threshold``, else ``"caption"``. ``rerank`` names the
    reranker whose score the relevance is, if any."""
    scale = f"{rerank} logit" if rerank else \
        {"dense": "cosine", "lexical": "BM25", "hybrid": "fused dense + BM25"}.get(mode, mode)
    if best_raw is None or (isinstance(best_raw, float) and math.isnan(best_raw)):
        return "caption", "No candidate: nothing to rank."
    if threshold is not None and best_raw < threshold:
        return "warning", (f"Weak match: the best candidate's raw relevance is {best_raw:.3f} ({scale}), below "
                           f"{threshold:.3f}, where this memory's matches are noise. relevance_norm rescales the "
                           "pool to 0-1, so the top shows 1.0 however little matches: nothing here may answer "
                           "the query.")
    known = "" if threshold is None else f"; this memory calls a best match under {threshold:.3f} weak"
    return "caption", (f"Raw relevance of the best candidate: {best_raw:.3f} ({scale}){known}. relevance_norm "
                       "rescales each pool to 0-1, so the best candidate always shows 1.0.")


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
    mode = {"mode": DEFAULT_MODE, **dict(settings or {})}["mode"]  # the workbench's mode, as budget_replay's

    def at_probe(memory, event, t):
        if event is target:
            for b in budgets:
                blocks[int(b)] = memory.context(event.query, session=event.session, token_budget=int(b),
                                                recent_turns=recent_turns, limit=limit, now=t, mode=mode)
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
    limit = int(s["limit"])

    def at_probe(memory, event, t):
        blocks = {int(b): memory.context(event.query, session=event.session, token_budget=int(b),
                                         recent_turns=recent_turns, limit=limit, now=t, mode=s["mode"])
                  for b in budgets}
        return {"sections": _budget_sections(blocks), "items": _budget_items(blocks),
                "texts": {b: blk.text for b, blk in blocks.items()}, "notes": _budget_notes(blocks),
                "query": event.query, "session": event.session}

    return list(replay(conversation, rs, embedder, on_probe=at_probe, progress=progress).extras)


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
