"""The Playground's frames: a live memory built from the events a user typed, recalled and explained.

What the pages offer (slider ranges, the playground's seed) is the app's, in ``app_pages/config.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ...core.clock import to_epoch
from ...core.keys import K_SUPERSEDED_BY, K_SUPERSEDES
from ...memory.confidence import MATCH_THRESHOLD, match_probability
from ...memory.conversation import ConversationMemory
from ...memory.stages import DEFAULT_PRESET
from ...models.embed import Embedder
from ...ranking import scoring
from ...ranking.scoring import BLEND_DEFAULTS
from ..analysis.why import why_recalled_live
from ..datasets.jsonl import loads_jsonl
from ..datasets.model import Conversation, Event
from ..replay.run import replay
from .replays import WHY_COLUMNS, memory_timeline
from .settings import DEFAULT_SETTINGS

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
    if s["recency_from"] != "created":
        out["recency_from"] = s["recency_from"]
    if int(s["token_budget"] or 0):
        out["token_budget"] = int(s["token_budget"])
    if s["embedder"] == "default" and s["preset"] != DEFAULT_PRESET:  # the default embedder runs the preset
        out["preset"] = s["preset"]
    return out


def playground_recall(events: Sequence[Mapping[str, Any]], query: str, session: str | None, now: float,
                      settings: Mapping[str, Any], judge: str | None = None,
                      embedder: Embedder | None = None, relevant: Sequence[str] = ()) -> dict[str, Any]:
    """Build the playground memory from ``events`` and ask it ``query`` at ``now``.

    ``settings`` are the workbench's (the blend, ``limit``, ``token_budget``, ``mode``,
    ``hybrid_weight``). Returns ``ranking`` (``recall()``'s results with their
    ``_vx_scoring`` parts, raw ``relevance`` beside ``relevance_norm``), ``parts``
    (relevance / recency / feedback contributions, long format), ``why`` (every memory and
    why it was or was not returned, :func:`vxmem.workbench.analysis.why.why_recalled_live`),
    ``memories`` (every memory with its label and fate), ``history`` (every supersession
    chain), ``low_relevance`` (the memory's threshold for a weak best match, or None) and
    ``match_probability`` (:meth:`~vxmem.memory.conversation.ConversationMemory.match_probability`
    of the results, or None). ``relevant``: the labels of the memories the query should return; the
    ranking's and the explanation's ``relevant`` column tick them.
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
        captured["why"] = why_recalled_live(memory, event.query, event.session, now=t, **kw)
        captured["history"] = _supersession_chains(memory)
        captured["low_relevance"] = low_relevance_of(memory, rs["mode"])
        captured["match_probability"] = memory.match_probability(res)
        return None

    rep = replay(conv, rs, embedder, on_probe=at_probe if query.strip() else None)
    labels = {m["id"]: ", ".join(m["labels"]) for m in rep.memories}
    ranking = captured.get("ranking", pd.DataFrame())
    marked = set(relevant)
    if not ranking.empty:
        ranking.insert(1, "label", ranking["id"].map(labels))
        ranking["relevant"] = ranking["label"].isin(marked)
    why = captured.get("why", pd.DataFrame(columns=WHY_COLUMNS))
    if not why.empty:  # the playground names memories by label: so do the details
        why = why.assign(label=why["id"].map(labels), versus_label=why["versus"].map(labels))
        why["relevant"] = why["label"].isin(marked)  # a live recall has no probe: the marks are the page's
        for mid, lab in labels.items():
            why["detail"] = why["detail"].str.replace(mid, lab, regex=False)
    return {"ranking": ranking, "parts": score_parts(ranking, {**BLEND_DEFAULTS, **rs}), "why": why,
            "memories": memory_timeline(rep) if rep.memories else pd.DataFrame(),
            "history": _labelled_chains(captured.get("history", pd.DataFrame()), labels),
            "low_relevance": captured.get("low_relevance"), "mode": rep.mode, "rerank": rep.rerank,
            "match_probability": captured.get("match_probability")}


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


def replay_match_probability(rep: Any, probe: int, limit: int | None = None) -> float | None:
    """The match probability of probe ``probe`` of a replay, from its recorded pool (the pool
    ``recall(limit=limit)`` blended); None where the replay's pipeline has no calibration."""
    if not rep.probes or len(rep.pool(probe)) == 0:
        return 0.0 if rep.probes else None
    query = rep.probes[probe].get("query")
    return match_probability(rep.pool(probe, limit), embedder=rep.meta.get("embedder"), query=query)


def relevance_note(best_raw: float | None, threshold: float | None, mode: str,
                   rerank: str | None = None, probability: float | None = None,
                   answered_at: int | None = None) -> tuple[str, str]:
    """What to say about the best candidate: ``(level, text)``, level ``"warning"`` when the
    calibrated ``probability`` that anything relevant was found is below
    :data:`~vxmem.memory.confidence.MATCH_THRESHOLD` or the raw relevance is below the
    pipeline's noise floor ``threshold`` (either signal is enough), else ``"caption"``.
    ``rerank`` names the reranker whose score the relevance is, if any (of a cascade,
    ``"second > final"``, the final one's). ``answered_at``: the rank of the first returned
    memory the query marks relevant (None: none marked, or none returned). The probability
    reads the scores alone, so it can be low while the answer is returned (its raw relevance
    barely above a distractor's, first by recency); a returned answer overrules it."""
    scale = f"{rerank.rsplit(' > ', 1)[-1]} logit" if rerank else \
        {"dense": "cosine", "lexical": "BM25", "hybrid": "fused dense + BM25"}.get(mode, mode)
    if best_raw is None or (isinstance(best_raw, float) and math.isnan(best_raw)):
        return "caption", "No candidate: nothing to rank."
    raw = f"the best candidate's raw relevance is {best_raw:.3f} ({scale})"
    said = None if probability is None else \
        f"match probability {probability:.0%} (calibrated on the scores alone: how often a recall scored like " \
        "this holds what the query needs)"
    weak = [f"{said}, below {MATCH_THRESHOLD:.0%}"] \
        if said and probability is not None and probability < MATCH_THRESHOLD else []
    if threshold is not None and best_raw < threshold:  # below the pipeline's own noise floor, whatever the fit says
        weak.append(f"{raw}, below {threshold:.3f}, where this memory's matches are noise")
        if said and len(weak) == 1:
            weak.append(said)
    elif weak:
        weak.append(raw)
    if weak and answered_at is not None:
        return "caption", (f"{'; '.join(weak)[0].upper()}{'; '.join(weak)[1:]}; but a memory marked relevant is "
                           f"returned at rank {answered_at}: the scores alone barely tell it from the other "
                           "candidates, the marks say it answers.")
    if weak:
        return "warning", ("Weak match: " + "; ".join(weak) + ". relevance_norm rescales the pool to 0-1, so the "
                           "top shows 1.0 however little matches: nothing here may answer the query.")
    known = "" if threshold is None else f"; below {threshold:.3f} this pipeline calls a match weak"
    head = f"{said[0].upper()}{said[1:]}; r" if said else "R"
    return "caption", (f"{head}aw relevance of the best candidate: {best_raw:.3f} ({scale}){known}. relevance_norm "
                       "rescales each pool to 0-1, so the best candidate always shows 1.0.")


def first_relevant_rank(ranking: pd.DataFrame) -> int | None:
    """The rank of the first returned memory marked ``relevant`` in ``ranking``, None when none is."""
    if ranking.empty or "relevant" not in ranking:
        return None
    hits = ranking.loc[ranking["relevant"].fillna(False).astype(bool), "rank"]
    return int(hits.min()) if len(hits) else None


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
    ``feedback`` from :func:`vxmem.ranking.scoring.score_pool`); each part's term is
    :func:`vxmem.ranking.scoring.blend` of that part alone, so the weights and the feedback clamp
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


def to_csv(frame: pd.DataFrame) -> bytes:
    """A frame as UTF-8 CSV bytes (for download buttons)."""
    return frame.to_csv(index=False).encode("utf-8")


def dumps_events(events: Sequence[Mapping[str, Any]]) -> str:
    """Playground events as JSON (stable key order), a cache key and a download."""
    return json.dumps(list(events), sort_keys=True)
