"""Transformer models on onnxruntime and their ``tokenizer.json``: no torch, no download, deterministic.

:class:`OnnxEmbedder` turns texts into sentence vectors (the default embedder,
:data:`~vxmem.models.packaged.BGE_SMALL`); :class:`~vxmem.models.rerank.OnnxCrossEncoder` scores
(query, text) pairs with the same plumbing (:class:`OnnxModel`).

Determinism. The bundled exports are *dynamically* quantised to int8: every activation is
quantised with a scale computed over the whole input tensor, that is over every text of a
batch and its padding, so a batched vector moves with its batch-mates (by up to 0.03).
vxmem therefore runs one text (or one pair) per run, unpadded, on one onnxruntime thread:
a text's vector depends on the text alone, in every call, order, thread count and process.
Throughput comes from running several inputs side by side (``VXMEM_THREADS``), which on the
int8 export beats both batching and intra-op threads (``benchmarks/bench_embedders.py``).

Import order. Importing onnxruntime >= 1.23 after usearch's compiled extension (usearch
2.26) crashes the interpreter. :func:`preload` imports onnxruntime early where that is
safe (``vxmem`` and ``vxmem.store`` call it before anything imports usearch), and
:func:`import_onnxruntime` refuses with a clear :class:`ImportError` where importing it
would crash.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .packaged import PackagedModel, check_sha256
from .wordpiece import Encoding, WordPieceTokenizer

__all__ = ["OnnxModel", "OnnxEmbedder", "preload", "import_onnxruntime", "default_threads",
           "SKIP_LAYER_NORM_FUSION"]

_USEARCH_EXTENSION = "usearch.compiled"

# onnxruntime fuses a residual Add and the LayerNormalization after it into one SkipLayerNormalization
# kernel. On the int8 exports vxmem bundles a run takes 14-21% less time without it, and its output is
# closer to the graph as exported (``benchmarks/bench_fusions.py``; bge-small has no such pair). A
# model lists it in ``OnnxModel.disabled_optimizers`` where its outputs are not stored: changing how a
# model that stores its outputs runs would leave every stored vector slightly off its new queries.
SKIP_LAYER_NORM_FUSION = "SkipLayerNormFusion"


def _late() -> bool:
    """True when usearch's extension is loaded and onnxruntime is not: importing it now crashes."""
    return "onnxruntime" not in sys.modules and _USEARCH_EXTENSION in sys.modules


def preload() -> None:
    """Import onnxruntime now if it is installed and that is safe (usearch not loaded yet)."""
    if "onnxruntime" in sys.modules or _late():
        return
    try:
        import onnxruntime  # noqa: F401
    except ImportError:  # not installed: the ONNX models say so when they are used
        pass


def import_onnxruntime() -> Any:
    """The onnxruntime module; a clear :class:`ImportError` where importing it would crash."""
    if _late():
        raise ImportError(
            "onnxruntime must be imported before usearch: importing it after usearch's extension crashes the "
            "interpreter (usearch 2.26 with onnxruntime >= 1.23). Import vxmem (or onnxruntime) before usearch, "
            "or use embedder='hashing', which needs no onnxruntime")
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError(f"vxmem's ONNX models need onnxruntime: pip install 'onnxruntime>=1.20,<2' ({exc})") \
            from None
    return onnxruntime


def default_threads() -> int:
    """How many inputs a model runs at once: ``VXMEM_THREADS`` if set, else the CPUs this
    process may use, at most 4. Each run uses one onnxruntime thread: for inputs this small,
    runs side by side are faster than one run spread over threads (measured in
    ``benchmarks/bench_embedders.py``: 2 intra-op threads were slower than 1 on 2
    cores, 2 runs at once almost twice as fast)."""
    env = os.environ.get("VXMEM_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"VXMEM_THREADS must be an int >= 1, got {env!r}")
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


class OnnxModel:
    """An ONNX transformer and its ``tokenizer.json``, loaded on first use.

    Give either ``model`` (a :class:`~vxmem.models.packaged.PackagedModel`: its files are located in
    the installed package and sha256-checked) or the two paths (``onnx_path``,
    ``tokenizer_path``; ``sha256`` = file name -> digest checks them too). ``threads`` is
    how many inputs run at once, each alone and on one onnxruntime thread, so the result of
    an input never depends on the others (default :func:`default_threads`); ``max_length``
    the tokens per input, truncated beyond. Loading takes about a second, so it waits for
    the first call. ``disabled_optimizers`` names onnxruntime graph rewrites its session leaves out.
    """

    disabled_optimizers: tuple[str, ...] = ()

    def __init__(self, model: PackagedModel | None = None, *, onnx_path: str | os.PathLike[str] | None = None,
                 tokenizer_path: str | os.PathLike[str] | None = None, sha256: dict[str, str] | None = None,
                 threads: int | None = None, max_length: int = 512, name: str | None = None):
        if (model is None) == (onnx_path is None or tokenizer_path is None):
            raise ValueError("give model= (a PackagedModel) or both onnx_path= and tokenizer_path=")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 8:
            raise ValueError(f"max_length must be an int >= 8, got {max_length!r}")
        self.model = model
        self._paths: tuple[Path, Path] | None = None
        if onnx_path is not None and tokenizer_path is not None:
            self._paths = (Path(os.fspath(onnx_path)), Path(os.fspath(tokenizer_path)))
        self._sha256 = dict(sha256 or {})
        self.threads = threads
        self.max_length = max_length
        self.name = name or (model.name if model is not None else self._paths[0].parent.name if self._paths else "")
        self.runs = 0  # inputs the model actually ran (cache hits and repeats excluded)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._session: Any = None
        self._tokenizer: WordPieceTokenizer | None = None
        self._inputs: set[str] = set()

    @property
    def lanes(self) -> int:
        """How many inputs the model runs at once: ``threads``, else :func:`default_threads`."""
        return self.threads or default_threads()

    def _files(self) -> tuple[Path, Path]:
        if self.model is not None:
            files = self.model.files(verify=True)
            return files["model.onnx"], files["tokenizer.json"]
        assert self._paths is not None
        onnx_path, tok_path = self._paths
        for fname, path in (("model.onnx", onnx_path), ("tokenizer.json", tok_path)):
            if fname in self._sha256:
                check_sha256(path, self._sha256[fname], f"{self.name}'s {fname}")
        return onnx_path, tok_path

    def load(self) -> None:
        """Load the tokenizer and the session now (otherwise the first call does)."""
        with self._lock:
            self._load()

    def _load(self) -> None:
        if self._session is not None:
            return
        ort = import_onnxruntime()
        onnx_path, tok_path = self._files()
        # Unpadded (one input per run: padding would only cost time), cut at max_length tokens.
        tok = WordPieceTokenizer.from_file(tok_path, max_length=self.max_length)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # parallel runs instead: see default_threads()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        session = ort.InferenceSession(os.fspath(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"],
                                       disabled_optimizers=list(self.disabled_optimizers))
        self._inputs = {i.name for i in session.get_inputs()}
        workers = self.lanes
        if workers > 1:
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"vxmem-{self.name}")
        self._tokenizer, self._session = tok, session

    def _encoded(self, inputs: Sequence[str | tuple[str, str]]) -> list[Encoding]:
        """Each input (a text, or a pair) as the model reads it; the model must be loaded."""
        assert self._tokenizer is not None
        return self._tokenizer.encode_batch(inputs)

    def _run_all(self, encodings: list[Encoding]) -> list[np.ndarray]:
        """The model's first output for each encoded input, each run alone (batch of one, no
        padding), several at once on the thread pool (onnxruntime sessions are thread-safe)."""
        with self._lock:
            self.runs += len(encodings)
        if self._pool is None or len(encodings) < 2:
            return [self._run_one(e) for e in encodings]
        return list(self._pool.map(self._run_one, encodings))

    def _run_one(self, encoding: Encoding) -> np.ndarray:
        ids = np.asarray([encoding.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.asarray([encoding.type_ids], dtype=np.int64)
        return np.asarray(self._session.run(None, feed)[0])

    def __repr__(self) -> str:
        state = "loaded" if self._session is not None else "not loaded yet"
        return f"{type(self).__name__}({self.name}, {state})"


class OnnxEmbedder(OnnxModel):
    """``list[str] -> (n, dim)`` float32 unit vectors from an ONNX sentence encoder.

    ``pooling`` is ``"cls"`` (bge) or ``"mean"`` (MiniLM, e5). ``low_relevance`` is the
    cosine below which the best match probably matches nothing (a hint for dashboards;
    None when unknown). ``rerank_by_default`` says ``recall()`` reranks by default with
    this embedder (true for the default pipeline, which was measured with it).
    """

    def __init__(self, model: PackagedModel | None = None, *, dim: int | None = None, pooling: str = "cls",
                 low_relevance: float | None = None, rerank_by_default: bool = False, **kwargs: Any):
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        super().__init__(model, **kwargs)
        self.pooling = pooling
        self._dim = dim
        self.low_relevance = low_relevance
        self.rerank_by_default = bool(rerank_by_default)

    @property
    def dim(self) -> int:
        """The vectors' dimension (runs the model once if it was not given)."""
        if self._dim is None:
            self._dim = int(self(["dimension probe"]).shape[1])
        return self._dim

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError(f"{type(self).__name__} embeds a list of str")
        with self._lock:
            self._load()
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        out = np.stack([self._pooled(h) for h in self._run_all(self._encoded(texts))])
        out = out.astype(np.float32, copy=False)
        if self._dim is None:
            self._dim = int(out.shape[1])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)

    def _pooled(self, hidden: np.ndarray) -> np.ndarray:
        hidden = hidden.astype(np.float32, copy=False)
        if hidden.ndim == 2:  # already pooled by the graph
            return hidden[0]
        return hidden[0, 0] if self.pooling == "cls" else hidden[0].mean(axis=0)
