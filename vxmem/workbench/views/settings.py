"""The workbench's inputs and its one parameter state, for the dashboard and the notebooks.

- datasets: the shipped scenarios, uploads (:func:`load_bytes`, :func:`chatlog_from_bytes`),
  their turn and probe tables, and replaying them with the workbench's settings;
- parameters: the defaults (:data:`DEFAULT_SETTINGS`), slider values as sweep points, and
  the settings read back from a URL or a file, checked, or written as JSON and as Python.

Like :mod:`vxmem.workbench.views`, which hands these names on, nothing here imports Streamlit.
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

from ...core.progress import Progress
from ...memory.stages import DEFAULT_PRESET, PRESETS, check_preset
from ...models.embed import Embedder, HashingEmbedder, default_embedder, reranks_by_default
from ...ranking import scoring
from ...ranking.scoring import BLEND_DEFAULTS
from ...store.arguments import SEARCH_MODES
from ..datasets.chatlogs import loads_chatlog
from ..datasets.formats import CHAT_FORMATS, FORMATS, load
from ..datasets.model import Conversation, DatasetError, naming_the_format
from ..replay.record import Replay
from ..replay.run import replay_many
from .inputs import PAGE_FORMAT_HINT, check_upload, short

# Every dataset replay of the workbench caches pools big enough for any limit up to MAX_LIMIT.
MAX_LIMIT = 20
REPLAY_SETTINGS: dict[str, Any] = {"pool_limit": MAX_LIMIT}

# The memory's own defaults as a grid point (token_budget 0: no budget).
DEFAULT_POINT: dict[str, Any] = {**BLEND_DEFAULTS, "limit": 10, "token_budget": 0}

# The workbench's one parameter state: the ranking point, plus what decides which memories
# enter a pool (the search mode, the hybrid weight, the embedder). Defaults are the library's.
# The library's own default mode (hybrid): a hybrid pool is no prefix of a bigger one, so the workbench
# replays it per limit above 10 (see replay_settings)
DEFAULT_MODE = scoring.DEFAULT_MODE
EMBEDDER_NAMES = ("default", "hashing")  # "default": whatever Vectrix() embeds with
DEFAULT_SETTINGS: dict[str, Any] = {**DEFAULT_POINT, "mode": DEFAULT_MODE, "hybrid_weight": scoring.HYBRID_WEIGHT,
                                    "embedder": "default", "recency_from": scoring.RECENCY_FROM[0],
                                    "preset": DEFAULT_PRESET}
SETTINGS_KEYS = tuple(DEFAULT_SETTINGS)
_INT_SETTINGS = ("limit", "token_budget")


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
    check_upload(filename, data)  # too big, empty, an archive or binary: said before any parsing
    low = filename.lower()
    suffix = next((x for x in (".jsonl", ".csv") if low.endswith(x)), ".json")
    fd, path = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            convs = load(path, format=format)
        except DatasetError as exc:  # in the page's words: its Format box, not the library's argument
            raise DatasetError(naming_the_format(str(exc).replace(path, filename), PAGE_FORMAT_HINT)) from None
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
    text = check_upload(filename, data)
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
    """The probes of ``conversation``: label, time, session, query, relevant and stale labels, category."""
    rows = [{"label": e.label, "time": pd.Timestamp(e.time, unit="s", tz="UTC"), "session": e.session,
             "query": e.query, "relevant": ", ".join(e.relevant), "stale": ", ".join(e.stale),
             "category": None if e.category is None else str(e.category)} for e in conversation.probes]
    return pd.DataFrame(rows, columns=["label", "time", "session", "query", "relevant", "stale", "category"])


@functools.cache
def _hashing() -> HashingEmbedder:
    return HashingEmbedder()


def embedder_for(name: str) -> Embedder | None:
    """The embedder a workbench name stands for: ``"default"`` is None (``Vectrix()``'s own),
    ``"hashing"`` the fast offline :class:`~vxmem.models.embed.HashingEmbedder`."""
    if name == "default":
        return None
    if name == "hashing":
        return _hashing()
    raise ValueError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDER_NAMES)}")


def replay_settings(settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a workbench replay records with for ``settings``: the mode, and pools for every
    limit up to :data:`MAX_LIMIT` (a hybrid pool is no prefix of a bigger one, so in hybrid
    mode the pools are recorded for the limit itself, one replay for every limit up to 10;
    with the default embedder, which reranks, one for every hybrid weight too), and
    ``recency_from`` when ages count from access (the replay's recalls then record their
    accesses, and every ranking of its pools ages from its own)."""
    s = {**DEFAULT_SETTINGS, **dict(settings or {})}
    out: dict[str, Any] = {**REPLAY_SETTINGS, "mode": s["mode"]}
    if s["mode"] == "hybrid":
        out["pool_limit"] = max(10, int(s["limit"]))
        if s["embedder"] == "default" and reranks_by_default(default_embedder()):
            out["hybrid_weight"] = float(s["hybrid_weight"])  # reranked: it decides which candidates are
    if s["recency_from"] != "created":
        out["recency_from"] = s["recency_from"]
    if s["embedder"] == "default" and s["preset"] != DEFAULT_PRESET:  # the default embedder runs the preset
        out["preset"] = s["preset"]
    return out


def preset_settings(settings: Mapping[str, Any] | None, preset: str) -> dict[str, Any]:
    """What a workbench replay with the recall preset ``preset`` records with, whatever the
    embedder: :func:`replay_settings` with the preset named, and for a preset with a second
    stage over hybrid pools its hybrid weight (which decides the candidates it reads)."""
    s = {**DEFAULT_SETTINGS, **dict(settings or {}), "preset": check_preset(preset)}
    out = {**replay_settings(s), "preset": preset}
    if preset != "fast" and s["mode"] == "hybrid":
        out["hybrid_weight"] = float(s["hybrid_weight"])
    return out


def replay_all(conversations: Sequence[Conversation], settings: Mapping[str, Any] | None = None,
               embedder: Embedder | None = None, progress: Progress = False, cache: Any = None) -> list[Replay]:
    """Replay every conversation with the workbench's settings (pools for limit <= MAX_LIMIT).
    ``cache``: the replay's cache of vectors and reranker scores (None: the default file;
    False: none, so each recall pays for its query's embedding and its reranker as a live
    one does, and its ``recall_ms`` says what that costs)."""
    s = dict(REPLAY_SETTINGS)
    s.update(settings or {})
    return replay_many(list(conversations), s, embedder, n_jobs=1, progress=progress, cache=cache)


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
    choices: dict[str, Sequence[str]] = {"mode": SEARCH_MODES, "embedder": list(embedders),
                                         "recency_from": scoring.RECENCY_FROM, "preset": PRESETS}
    for k, v in raw.items():
        if k not in SETTINGS_KEYS:
            problems.append(f"unknown setting {short(k)}")
            continue
        if k in choices:
            if v not in choices[k]:
                problems.append(f"{k} {short(v)}: expected one of {', '.join(choices[k])}")
            else:
                out[k] = v
            continue
        try:
            if isinstance(v, bool):
                raise TypeError("a true/false value")
            num = float(v)
        except (TypeError, ValueError, OverflowError):
            problems.append(f"{k} {short(v)}: not a number")
            continue
        lo, hi = ranges.get(k, (-math.inf, math.inf))
        if not lo <= num <= hi or (k in _INT_SETTINGS and not num.is_integer()):
            problems.append(f"{k} {short(v)}: expected {'a whole number' if k in _INT_SETTINGS else 'a number'} "
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
    if isinstance(text, (bytes, bytearray)):
        try:
            text = check_upload("the settings file", text, max_bytes=1 << 20)
        except DatasetError as exc:
            raise ValueError(f"not a settings file: {exc}") from None
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"not a settings file: {str(exc)[:200]}") from None
    if not isinstance(raw, dict):
        raise ValueError("not a settings file: expected a JSON object of setting -> value")
    return check_settings(raw, ranges, embedders)


def settings_snippet(settings: Mapping[str, Any]) -> str:
    """The settings as Python: the ``Vectrix(...)`` that ranks this way and its ``recall(...)``."""
    s = {**DEFAULT_SETTINGS, **dict(settings)}
    memory = ", ".join(f"{k}={float(s[k])!r}" for k in BLEND_DEFAULTS)
    if s["mode"] == "hybrid":
        memory += f", hybrid_weight={float(s['hybrid_weight'])!r}"
    if s["recency_from"] != "created":
        memory += f", recency_from={s['recency_from']!r}"
    if s["preset"] != DEFAULT_PRESET:
        memory += f", preset={s['preset']!r}"
    lines = ["from vxmem import Vectrix"]
    if s["embedder"] == "hashing":
        lines[0] += "\nfrom vxmem.models.embed import HashingEmbedder"
        memory = "embedder=HashingEmbedder(), " + memory
    budget = int(s["token_budget"]) or None
    lines += ["", f'db = Vectrix("chat.vxdb", {memory})',
              f'results = db.recall(query, session=session, limit={int(s["limit"])}, token_budget={budget!r}, '
              f'mode={s["mode"]!r})']
    return "\n".join(lines) + "\n"


def param_values(name: str, lo: float, hi: float, n: int) -> list:
    """``n`` values from ``lo`` to ``hi`` for a sweep axis (geometric for half-lives), each
    rounded to two significant digits (9.3, not 9.2586: an axis tick a person reads; the
    ends stay exact)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if name in ("limit", "token_budget"):
        ints = sorted({int(round(v)) for v in np.linspace(lo, hi, n)})
        return [v for v in ints if v >= 1] or [1]
    if name.endswith("half_life_days") and lo > 0:
        vals = np.geomspace(lo, hi, n)
    else:
        vals = np.linspace(lo, hi, n)
    inner = [float(f"{float(v):.2g}") for v in vals[1:-1]]
    return sorted({float(lo), *inner, float(hi)} if n > 1 else {float(lo)})
