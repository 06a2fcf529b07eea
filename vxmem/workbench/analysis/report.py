"""A run's report in one file: every figure with the settings, the dataset's hash, the versions and
the machine that made it, as a JSON bundle and as a self-contained HTML page that loads back.

- :func:`report_bundle`: the bundle of replays of one dataset (a plain dict, JSON-ready): the
  metrics overall and per probe category with bootstrap 95% intervals, the recall and write
  timings with the interval of their medians, every probe's figures, the settings the replays
  recorded, and what would be needed to make it again (dataset sha256, package versions, machine).
- :func:`report_html`: the bundle as one HTML file with nothing to fetch (tables and an inline SVG
  chart); the bundle itself rides along inside it, so :func:`load_report` reads either file.
- :func:`load_report`: a bundle back from the JSON or the HTML, checked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import importlib.metadata
import json
import math
import os
import platform
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..sweep.holdout import bootstrap_ci
from . import metrics as M

__all__ = ["REPORT_FORMAT", "REPORT_METRICS", "report_bundle", "report_html", "load_report", "ReportError",
           "dataset_sha256"]

REPORT_FORMAT = "vxmem-report/1"
REPORT_METRICS = ("hit", "recall", "rr", "ndcg", "stale_leak")  # the figures a report gives with intervals
N_BOOT = 1000
_PACKAGES = ("vxmem", "numpy", "usearch", "onnxruntime", "pandas")  # vxmem tokenizes itself
_EMBEDDED = re.compile(r'<script type="application/json" id="vxmem-report">(.*?)</script>', re.DOTALL)


class ReportError(ValueError):
    """A file that is not a vxmem report (or one of a format this version cannot read)."""


def _interval(values: Sequence[Any], stat: Any = np.mean, seed: int = 0) -> dict[str, float | None]:
    """``stat`` of the finite ``values`` with its percentile bootstrap 95% interval (None: no value)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if not v.size:
        return {"value": None, "lo": None, "hi": None, "n": 0}
    value, lo, hi = bootstrap_ci(v, n_boot=N_BOOT, seed=seed, stat=stat)
    return {"value": value, "lo": lo, "hi": hi, "n": int(v.size)}


def _metrics(probes: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    return {("mrr" if m == "rr" else m): _interval([p.get(m) for p in probes]) for m in REPORT_METRICS}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _machine() -> dict[str, Any]:
    return {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
            "processor": platform.processor() or None, "cpus": os.cpu_count()}


def _plain(value: Any) -> Any:
    """``value`` as JSON writes it: numpy scalars as numbers, NaN as None, containers walked."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_bundle(replays: Sequence[Any], dataset: str, dataset_sha256: str, *,
                  probes: Sequence[dict[str, Any]] | None = None, settings: dict[str, Any] | None = None,
                  title: str | None = None, now: dt.datetime | None = None) -> dict[str, Any]:
    """The report of ``replays`` (:class:`~vxmem.workbench.replay.record.Replay` s of one dataset),
    named ``dataset`` whose file hashes to ``dataset_sha256``: their live recalls' figures, or
    ``probes`` (one dict per probe with ``label``, ``query``, ``session``, ``category``,
    ``conversation``, ``recall_ms`` and the metrics) ranked at other ``settings``, which the
    report then records over the replays' own. ``now``: when it was made (default the clock)."""
    replays = list(replays)
    if not replays:
        raise ValueError("a report needs at least one replay")
    if probes is None:
        probes = [{**{k: p.get(k) for k in ("label", "query", "session", "category", "recall_ms", *REPORT_METRICS)},
                   "conversation": r.name} for r in replays for p in r.probes]
    probes = [dict(p) for p in probes]
    categories = sorted({str(p["category"]) for p in probes if p["category"] is not None})
    writes = [e.get("write_ms") for r in replays for e in r.events if e.get("write_ms") is not None]
    made = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return _plain({
        "format": REPORT_FORMAT, "title": title or f"vxmem report: {dataset}", "created": made.isoformat(),
        "dataset": {"name": dataset, "sha256": dataset_sha256, "conversations": [r.name for r in replays],
                    "probes": len(probes)},
        "settings": {**replays[0].settings, **{k: v for k, v in replays[0].meta.items()
                                               if k not in ("conversation", "description", "conversation_meta")},
                     **(settings or {})},
        "versions": _versions(), "machine": _machine(),
        "metrics": {"overall": _metrics(probes),
                    "by_category": {c: _metrics([p for p in probes if str(p["category"]) == c]) for c in categories}},
        "timings": {"recall_ms_p50": _interval([p["recall_ms"] for p in probes], np.median),
                    "recall_ms_p99": _quantile([p["recall_ms"] for p in probes], 0.99),
                    "write_ms_p50": _interval(writes, np.median)},
        "small_sample": len(probes) < M.SMALL_SAMPLE,
        "probes": probes,
    })


def _quantile(values: Sequence[Any], q: float) -> float | None:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.quantile(v, q)) if v else None


def dataset_sha256(data: bytes) -> str:
    """The sha256 of a dataset file's bytes, as a report records it."""
    return hashlib.sha256(data).hexdigest()


def load_report(data: bytes | str) -> dict[str, Any]:
    """A report bundle from the text of its JSON or HTML file (``ReportError`` when it is neither)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    found = _EMBEDDED.search(text)
    raw = html.unescape(found.group(1)) if found else text
    try:
        bundle = json.loads(raw)
    except json.JSONDecodeError:
        raise ReportError("not a vxmem report: neither its JSON nor its HTML page") from None
    if not isinstance(bundle, dict) or bundle.get("format") != REPORT_FORMAT:
        got = bundle.get("format") if isinstance(bundle, dict) else type(bundle).__name__
        raise ReportError(f"not a vxmem report of format {REPORT_FORMAT} (found {got!r})")
    for key in ("dataset", "settings", "versions", "machine", "metrics", "timings", "probes"):
        if key not in bundle:
            raise ReportError(f"a vxmem report without its {key!r}: the file is damaged or was edited")
    return bundle


def report_html(bundle: dict[str, Any]) -> str:
    """``bundle`` as one self-contained HTML page (see :mod:`vxmem.workbench.analysis.report_page`)."""
    from .report_page import page

    return page(bundle, json.dumps(bundle, sort_keys=True))
