"""What the workbench offers on its pages: slider ranges, labels, the playground's seed, budgets.

App configuration only; the library (:mod:`vxmem.workbench.views`) knows none of it. Defaults come
from the library's own (:data:`vxmem.workbench.views.DEFAULT_POINT`), so a slider starts where the
memory does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vxmem.core.clock import DAY
from vxmem.ranking.scoring import HYBRID_WEIGHT, RECENCY_FROM  # noqa: F401  (config.RECENCY_FROM: the choices)
from vxmem.store import SEARCH_MODES
from vxmem.workbench import views
from vxmem.workbench.datasets import CHAT_FORMATS, FILE_FORMATS
from vxmem.workbench.views import DEFAULT_POINT, MAX_LIMIT

ICON = Path(__file__).resolve().parent / "icon.png"  # the favicon: a local file, never fetched

# ---------------------------------------------------------------------------- parameters and metrics

# The sliders: (label, min, max, default, step).
PARAMS: dict[str, tuple[str, float, float, float, float]] = {
    "half_life_days": ("half-life (days)", 0.5, 180.0, DEFAULT_POINT["half_life_days"], 0.5),
    "recency_weight": ("recency weight", 0.0, 2.0, DEFAULT_POINT["recency_weight"], 0.05),
    "feedback_weight": ("feedback weight", 0.0, 2.0, DEFAULT_POINT["feedback_weight"], 0.05),
    "feedback_half_life_days": ("feedback half-life (days)", 1.0, 180.0, DEFAULT_POINT["feedback_half_life_days"],
                                1.0),
    "limit": ("limit", 1, MAX_LIMIT, DEFAULT_POINT["limit"], 1),
    "token_budget": ("token budget (0: none)", 0, 2000, DEFAULT_POINT["token_budget"], 25),
}
RANKING_PARAMS = tuple(PARAMS)  # the ranking point every page shares (a sweep re-ranks pools for it)
HYBRID = ("hybrid weight (dense share)", 0.0, 1.0, HYBRID_WEIGHT, 0.05)

# Embedders: label -> the name vxmem.workbench.views.embedder_for knows. The first is the default: Vectrix()'s
# own pipeline (bge-small, hybrid, the preset's second stage; embeddings and cross-encoder scores
# kept in the replay cache file, so only a dataset's first replay pays for them).
EMBEDDERS: dict[str, str] = {"default (bge-small + second stage)": "default", "hashing (fast)": "hashing"}
PRESETS = ("default", "fast", "accurate")  # Vectrix(preset=...), the library's PRESETS, the default first
MODES = SEARCH_MODES
# What a memory's age counts from (Vectrix(recency_from=...), choices RECENCY_FROM): each one's label.
RECENCY_LABELS = {"created": "when it was stored", "accessed": "when a recall last returned it"}
# Every setting's default: the library's, with the embedder above.
DEFAULT_SETTINGS: dict[str, Any] = {**views.DEFAULT_SETTINGS, "embedder": next(iter(EMBEDDERS.values()))}
RANGES: dict[str, tuple[float, float]] = {**{k: (v[1], v[2]) for k, v in PARAMS.items()},
                                          "hybrid_weight": (HYBRID[1], HYBRID[2])}
MIN_SWEPT_BUDGET = 25  # a swept or varied token budget starts here: a budget of 0 means none
SWEEP_STEPS = (2, 12, 8)  # the steps slider of a sweep axis: min, max, default
MOVEMENT_POINTS = 16  # values of the varied parameter on the Tune page's rank-movement chart

METRIC_LABELS = {"hit": "hit@k", "recall": "recall@k", "mrr": "MRR", "ndcg": "nDCG@k",
                 "stale_leak": "stale-leak@k", "foreign_leak": "foreign-leak@k",
                 "session_recall": "session recall@k", "budget_fill": "budget fill"}
HEADLINE_METRICS = ("hit", "mrr", "ndcg", "stale_leak")  # the metric tiles and bars
PICK_METRICS = ("ndcg", "mrr", "hit", "recall", "stale_leak")  # what a best point can be picked by
DEFAULT_LIMIT = int(DEFAULT_POINT["limit"])

# ---------------------------------------------------------------------------- datasets

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
DEFAULT_DATASET = "contradicting_facts"  # its first probe finds the relevant memory at rank 1
UPLOAD = "Upload a file..."
ON_DISK = "A file on this machine..."  # a full LoCoMo or LongMemEval file, read where it lies
IMPORTED = "Imported chat (Import page)"
_DATASET_FORMATS = [f for f in FILE_FORMATS.values() if f.name not in CHAT_FORMATS]
FORMAT_CHOICES: dict[str, str | None] = {"guess from the file": None, **{f.label: f.name for f in _DATASET_FORMATS}}
UPLOAD_TYPES = list(dict.fromkeys(f.suffix.lstrip(".") for f in _DATASET_FORMATS))
_LABELS = [f.label for f in _DATASET_FORMATS]
UPLOAD_LABEL = f"{', '.join(_LABELS[:-1])} or {_LABELS[-1]}"  # "vxmem JSONL, LoCoMo JSON or LongMemEval JSON"
CHAT_CHOICES: dict[str, str | None] = {"guess from the file": None,
                                       **{FILE_FORMATS[f].label: f for f in CHAT_FORMATS},
                                       "vxmem JSONL dataset (edit its probes)": views.DATASET_FORMAT}
CHAT_TYPES = ["jsonl", "json", "csv"]
# Where a Playground session is kept between reloads (the URL names it: ?pg=<key>).
SESSIONS_DIR = Path(os.environ.get("VXMEM_WORKBENCH_DIR") or Path.home() / ".cache" / "vxmem" / "workbench")

# ---------------------------------------------------------------------------- Playground

PLAYGROUND_T0 = 1_704_099_600.0  # 2024-01-01T09:00:00Z
PLAYGROUND_SEED: list[dict[str, Any]] = [
    {"time": PLAYGROUND_T0, "type": "fact", "label": "m1", "session": "demo", "pinned": True,
     "text": "My name is Sam and I am vegetarian."},
    {"time": PLAYGROUND_T0 + 1 * DAY, "type": "turn", "label": "m2", "session": "demo",
     "text": "I prefer dark mode in every editor."},
    {"time": PLAYGROUND_T0 + 30 * DAY, "type": "turn", "label": "m3", "session": "demo",
     "text": "My sister Ana lives in Lisbon and visits every summer."},
    {"time": PLAYGROUND_T0 + 60 * DAY, "type": "feedback", "label": "m4", "target": "m2", "outcome": "corrected",
     "correction": "Actually I switched to light mode, dark mode hurt my eyes."},
    {"time": PLAYGROUND_T0 + 88 * DAY, "type": "turn", "label": "m5", "session": "demo",
     "text": "The build failed again because of the flaky network test."},
    {"time": PLAYGROUND_T0 + 89 * DAY, "type": "turn", "label": "m6", "session": "demo", "text": "lol ok"},
    {"time": PLAYGROUND_T0 + 90 * DAY, "type": "turn", "label": "m7", "session": "demo", "role": "assistant",
     "text": "Which editor theme should I set up for you?"},
]
PLAYGROUND_NOW = PLAYGROUND_T0 + 90 * DAY + 3600.0
PLAYGROUND_QUERY = "does the user like dark mode or light mode?"
CLOCK_STEPS = {"+1 hour": 3600.0, "+1 day": DAY, "+1 week": 7 * DAY, "+1 month": 30 * DAY}
PLAYGROUND_RELEVANT = ["m4"]  # the seed query's answer: the correction to light mode
# A plain chat: remember() on every turn and nothing else. The move is told in passing, in other words, and a
# later turn names the old city in another sense: what recall does without a correction call or a judge.
PLAIN_SEED: list[dict[str, Any]] = [
    {"time": PLAYGROUND_T0, "type": "turn", "label": "m1", "session": "demo",
     "text": "I live in Lisbon, near the river."},
    {"time": PLAYGROUND_T0 + 3 * DAY, "type": "turn", "label": "m2", "session": "demo",
     "text": "Any idea for a quick dinner tonight?"},
    {"time": PLAYGROUND_T0 + 20 * DAY, "type": "turn", "label": "m3", "session": "demo",
     "text": "Work has been busy all month."},
    {"time": PLAYGROUND_T0 + 45 * DAY, "type": "turn", "label": "m4", "session": "demo",
     "text": "The movers finally dropped our boxes at the new flat in Porto."},
    {"time": PLAYGROUND_T0 + 58 * DAY, "type": "turn", "label": "m5", "session": "demo",
     "text": "I watched a documentary about the old trams of Lisbon."},
    {"time": PLAYGROUND_T0 + 59 * DAY, "type": "turn", "label": "m6", "session": "demo", "text": "lol ok"},
]
# name -> (events, clock, query, the query's answer)
PLAYGROUND_DEMOS: dict[str, tuple[list[dict[str, Any]], float, str, list[str]]] = {
    "a correction (dark mode, then light mode)": (PLAYGROUND_SEED, PLAYGROUND_NOW, PLAYGROUND_QUERY,
                                                  PLAYGROUND_RELEVANT),
    "a plain chat (a move told in passing)": (PLAIN_SEED, PLAYGROUND_T0 + 60 * DAY, "which city does the user live in?",
                                              ["m4"]),
}

# ---------------------------------------------------------------------------- A/B and Tune

AB_METRICS = {"rr": "reciprocal rank", "ndcg": "nDCG@k", "hit": "hit@k", "stale_leak": "stale-leak@k"}
POLICIES = ("blend", "cosine", "multiplicative", "langchain", "generative_agents", "memorybank")
# The parameters the other policies have beyond the blend's: (label, min, max, step, number format).
POLICY_PARAMS: dict[str, tuple[str, float, float, float, str]] = {
    "decay_rate": ("decay rate (per hour)", 0.0, 0.2, 0.0005, "%.4f"),
    "recency_decay": ("recency decay (per hour)", 0.9, 0.9999, 0.0001, "%.4f"),
    "strength_days": ("memory strength (days)", 0.5, 365.0, 0.5, "%.1f"),
}
MIN_TIMELINE_PX = 220  # the Replay timeline's least height, however few lanes it has
MOVEMENT_HIGHLIGHT = 10  # probes drawn in colour on the rank-movement chart by default (the most moving)
CATEGORY_COLOURS = "tableau20"  # 20 distinct colours: the movement chart colours at most 20 probes

# ---------------------------------------------------------------------------- Budget

BUDGETS = [25, 50, 75, 100, 150, 200, 300, 400, 600, 800, 1200, 1600]
DEFAULT_BUDGET = 200
DEFAULT_RECENT_TURNS = 6
