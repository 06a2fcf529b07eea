"""Rerankers: a second stage that scores each (query, memory) pair.

A reranker is any callable ``(query: str, texts: list[str]) -> array of len(texts) scores``,
higher meaning more relevant. ``recall()`` gives it the first stage's most relevant
candidates and ranks them by its score, blended with recency and feedback as usual
(see :meth:`~vxmem.memory.conversation.ConversationMemory.recall`).

The default, :class:`OnnxCrossEncoder` over :data:`~vxmem.models.packaged.MS_MARCO_MINILM_L12`,
reads each pair as ``[CLS] query [SEP] text [SEP]`` and returns its one logit: about 0 is
"maybe", real matches score around +5, unrelated text below -8. It runs one pair per run
(deterministic, see :mod:`vxmem.models.onnx`) and keeps the scores it computed, per (query, text).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .embed import callable_or_name
from .onnx import SKIP_LAYER_NORM_FUSION, OnnxModel
from .packaged import MS_MARCO_MINILM_L12, PackagedModel

__all__ = ["Reranker", "OnnxCrossEncoder", "RERANKERS", "DEFAULT_RERANKER", "default_reranker", "get_reranker",
           "check_reranker", "rerank_scores", "reranker_name"]

Reranker = Callable[[str, list[str]], Any]


class OnnxCrossEncoder(OnnxModel):
    """A cross-encoder on onnxruntime: one relevance logit per (query, text) pair.

    ``low_relevance`` is the logit below which the best candidate probably matches nothing
    (0 for ms-marco: real questions' best candidate scored above 0 in 95% of cases, nonsense
    and off-topic queries at most -8). ``cache_size`` bounds the (query, text) -> logit
    memo (the oldest half goes when it fills).
    """

    disabled_optimizers = (SKIP_LAYER_NORM_FUSION,)  # 15-21% less time a pair; a logit is never stored

    def __init__(self, model: PackagedModel | None = None, *, low_relevance: float | None = None,
                 cache_size: int = 100_000, **kwargs: Any):
        super().__init__(model, **kwargs)
        self.low_relevance = low_relevance
        self._cache: dict[tuple[str, str], float] = {}
        self._cache_size = max(1, int(cache_size))

    def __call__(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError(f"{type(self).__name__} scores a list of str")
        with self._lock:
            self._load()
            known = {t: self._cache[(query, t)] for t in texts if (query, t) in self._cache}
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            outs = self._run_all(self._encoded([(query, t) for t in missing]))
            fresh = {t: float(np.ravel(o)[0]) for t, o in zip(missing, outs)}
            with self._lock:
                overflow = len(self._cache) + len(fresh) - self._cache_size
                if overflow > 0:  # dicts keep insertion order: drop the oldest
                    for k in list(itertools.islice(self._cache, max(overflow, len(self._cache) // 2))):
                        del self._cache[k]
                self._cache.update(((query, t), sc) for t, sc in fresh.items())
            known.update(fresh)
        return np.array([known[t] for t in texts], dtype=np.float64)

    def clear_cache(self) -> None:
        """Forget every remembered score, so the next call scores from the model again."""
        with self._lock:
            self._cache.clear()


DEFAULT_RERANKER = "ms-marco-minilm-l12"


@functools.cache
def _shared(name: str) -> OnnxCrossEncoder:
    if name == DEFAULT_RERANKER:
        return OnnxCrossEncoder(MS_MARCO_MINILM_L12, low_relevance=0.0)
    raise AssertionError(name)  # pragma: no cover - get_reranker checks names first


RERANKERS = {DEFAULT_RERANKER: MS_MARCO_MINILM_L12.name}  # vxmem's names -> the model files they run


def get_reranker(name: str) -> OnnxCrossEncoder:
    """The shared reranker called ``name`` (see :data:`RERANKERS`); its model loads on first use."""
    key = name.lower()
    if key in (DEFAULT_RERANKER, MS_MARCO_MINILM_L12.name.lower(), "default"):
        return _shared(DEFAULT_RERANKER)
    raise ValueError(f"unknown reranker {name!r}; expected one of {', '.join(RERANKERS)} or a callable "
                     "(query, texts) -> scores")


def default_reranker() -> OnnxCrossEncoder:
    """The process-wide default cross-encoder (its model loads on first use)."""
    return _shared(DEFAULT_RERANKER)


def check_reranker(reranker: Any) -> Reranker:
    """``reranker`` as a callable: None is the default, a str a name of :data:`RERANKERS`."""
    return callable_or_name(reranker, "reranker", default_reranker, get_reranker, "(query, texts) -> scores")


def reranker_name(reranker: Any) -> str:
    """What ``_vx_scoring["rerank"]`` calls a reranker: its ``name``, else its type's."""
    name = getattr(reranker, "name", None)
    return name if isinstance(name, str) and name else getattr(reranker, "__name__", type(reranker).__name__)


def rerank_scores(reranker: Reranker, query: str, texts: list[str]) -> np.ndarray:
    """The reranker's scores of ``texts`` for ``query``, checked: one finite float per text."""
    if not texts:
        return np.zeros(0, dtype=np.float64)
    out = reranker(query, list(texts))
    try:
        scores = np.asarray(out, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"reranker must return an array of numbers, not {type(out).__name__}") from None
    if scores.shape != (len(texts),):
        raise ValueError(f"reranker returned {scores.size} scores for {len(texts)} texts")
    if not all(math.isfinite(s) for s in scores.tolist()):
        raise ValueError("reranker returned non-finite scores")
    return scores
