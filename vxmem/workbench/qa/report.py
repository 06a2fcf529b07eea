"""What an answer-level evaluation reports: accuracy with its bootstrap interval per system and
category, beside retrieval recall@k for the same questions, tokens per question and latency;
and the whole run as JSON-ready data, with both pinned prompts' texts and hashes.

A category's interval is the percentile bootstrap of the mean of its questions' 0/1 grades
(:func:`vxmem.workbench.sweep.holdout.bootstrap_ci`, the interval every other page of the
workbench shows), so a category of five questions shows how little five questions say.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

import numpy as np
import pandas as pd

from ..sweep.holdout import bootstrap_ci

REPORT_FORMAT = "vxmem-qa-report/1"
ALL = "all"
SUMMARY_COLUMNS = ["system", "category", "questions", "accuracy", "accuracy_lo", "accuracy_hi", "recall",
                   "hit", "tokens_per_question", "judge_tokens_per_question", "answer_s_median", "answer_s_p90",
                   "recall_ms_median", "cached"]
N_BOOT = 1000


def _mean(values: pd.Series) -> float:
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    v = v[~np.isnan(v)]
    return float(v.mean()) if v.size else float("nan")


def _quantile(values: pd.Series, q: float) -> float:
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    v = v[~np.isnan(v)]
    return float(np.quantile(v, q)) if v.size else float("nan")


def _tokens(frame: pd.DataFrame, who: str) -> pd.Series:
    """Tokens the ``who`` call ("answer" or "judge") cost per question: read plus written; NaN
    where the endpoint did not say."""
    read = pd.to_numeric(frame[f"{who}_prompt_tokens"], errors="coerce")
    wrote = pd.to_numeric(frame[f"{who}_completion_tokens"], errors="coerce")
    return read + wrote


def _row(system: str, category: str, group: pd.DataFrame) -> dict[str, Any]:
    mean, lo, hi = bootstrap_ci(group["correct"].to_numpy(dtype=np.float64), n_boot=N_BOOT, seed=0)
    cached = group["answer_cached"].astype(bool) & group["grade_cached"].astype(bool)
    return {"system": system, "category": category, "questions": len(group), "accuracy": mean,
            "accuracy_lo": lo, "accuracy_hi": hi, "recall": _mean(group["recall"]), "hit": _mean(group["hit"]),
            "tokens_per_question": _mean(_tokens(group, "answer")),
            "judge_tokens_per_question": _mean(_tokens(group, "judge")),
            "answer_s_median": _quantile(group["answer_seconds"], 0.5),
            "answer_s_p90": _quantile(group["answer_seconds"], 0.9),
            "recall_ms_median": _quantile(group["recall_ms"], 0.5), "cached": int(cached.sum())}


def summarize(per_question: pd.DataFrame) -> pd.DataFrame:
    """One row per system and category, then the system's row over every question (category
    "all"): questions, accuracy and its bootstrap 95% interval, recall@k and hit@k of
    the same questions, tokens per question (answer; judge apart), answer seconds (median, p90),
    recall milliseconds (median) and how many questions came wholly from the cache."""
    rows = []
    if per_question.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    for system, mine in per_question.groupby("system", sort=False):
        for category, group in mine.groupby("category", sort=True):
            rows.append(_row(str(system), str(category), group))
        rows.append(_row(str(system), ALL, mine))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in ("vxmem", "openai"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def _plain(value: Any) -> Any:
    """``value`` as JSON has it: numpy numbers as Python's, NaN as None."""
    if isinstance(value, (np.floating, float)):
        return None if np.isnan(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """``frame``'s rows as JSON-ready dicts."""
    return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def build_report(per_question: pd.DataFrame, summary: pd.DataFrame, setup: Any, systems: pd.DataFrame,
                 dataset: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole evaluation as JSON-ready data: format, dataset, settings (models, endpoint, systems,
    k), both prompts (name, sha256, text), the versions, the summary, the retrieval table of each
    system and every question's row."""
    settings = {"answer_model": setup.answerer.model, "judge_model": setup.judge.model,
                "base_url": setup.answerer.base_url, "judge_base_url": setup.judge.base_url,
                "temperature": setup.answerer.temperature, "systems": list(setup.systems), "k": setup.k,
                "workers": setup.workers, "interval": f"percentile bootstrap 95%, {N_BOOT} resamples, seed 0",
                "cache": None if setup.cache.directory is None else str(setup.cache.directory)}
    return {"format": REPORT_FORMAT, "dataset": dict(dataset or {}), "settings": settings,
            "prompts": {"answer": setup.answer_prompt.describe(), "judge": setup.judge_prompt.describe()},
            "versions": _versions(), "summary": records(summary),
            "retrieval": records(systems.drop(columns=["error"], errors="ignore")),
            "cache": {"hits": setup.cache.hits, "misses": setup.cache.misses},
            "questions": records(per_question)}
