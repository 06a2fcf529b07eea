"""A BM25 baseline: bm25s (Okapi BM25 on sparse matrices) with English stop words and the
Snowball stemmer (PyStemmer), over every turn said so far; no recency, no corrections, no model.

The index is rebuilt before a recall when turns were added since the last one (bm25s indexes
a fixed corpus); a probe's session is a mask over the scores. Only turns that share a term
with the question come back, best first, ties to the newer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import Query, Turn

INSTALL = "the bm25 system needs bm25s and PyStemmer: pip install 'vxmem[compare]' (or pip install bm25s PyStemmer)"


def check_available() -> None:
    """``ValueError`` with the install line when bm25s or PyStemmer is missing."""
    try:
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    except ImportError:
        raise ValueError(INSTALL) from None


class Bm25System:
    """BM25 over the turns, rebuilt lazily; forget and expire honoured, corrections added as turns."""

    def __init__(self) -> None:
        import Stemmer

        self.stemmer = Stemmer.Stemmer("english")
        self.turns: list[Turn] = []
        self.gone: set[str] = set()
        self.index: Any = None
        self.indexed: list[Turn] = []

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)

    def forget(self, labels: Sequence[str], time: float) -> None:
        self.gone.update(labels)

    def _tokens(self, texts: list[str]) -> Any:
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False)

    def _live(self, now: float) -> list[Turn]:
        return [t for t in self.turns if t.label not in self.gone
                and (t.ttl_days is None or t.time + t.ttl_days * 86400.0 > now)]

    def recall(self, query: Query) -> list[str]:
        import bm25s

        live = self._live(query.time)
        if not live:
            return []
        if live != self.indexed:
            self.index = bm25s.BM25()
            self.index.index(self._tokens([t.text for t in live]), show_progress=False)
            self.indexed = live
        q = bm25s.tokenize([query.text], stopwords="en", stemmer=self.stemmer, show_progress=False,
                           return_ids=False)[0]
        if not q:
            return []
        scores = np.asarray(self.index.get_scores(q), dtype=np.float64)
        if query.session is not None:
            scores = np.where([t.session == query.session for t in live], scores, 0.0)
        times = np.array([t.time for t in live])
        order = np.lexsort((-times, -scores))  # best score first, ties to the newer turn
        return [live[j].label for j in order[: query.k] if scores[j] > 0]
