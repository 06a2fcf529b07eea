"""onnxruntime's SkipLayerNormalization fusion on vxmem's models: time per run, distance from the graph as exported.

    .venv/bin/python -m benchmarks.bench_fusions [--texts 300] [--rounds 5]

For each bundled model (the bge-small embedder, the ColBERT token vectors, the cross-encoder), three
sessions of one onnxruntime thread run the same texts one at a time, unpadded, as vxmem runs them:
with every onnxruntime fusion, without the SkipLayerNormalization fusion, and the graph as exported
(no optimisation: the reference). The last column says which of the first two vxmem runs
(``OnnxModel.disabled_optimizers``). Texts are memory-like sentences of one (short) or two (long,
about a turn read after the one before it) sentences; the cross-encoder reads each with its first
sentence as the query. It prints the median ms per run over interleaved rounds, the ratio, and each
session's distance from the reference: the mean absolute difference of the first output and the
share of its values whose sign differs (a token vector's stored bits are its signs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

import numpy as np

import vxmem  # noqa: F401  (onnxruntime before usearch)
from benchmarks.corpora import sentence
from benchmarks.harness import Report, Timer, flags
from vxmem.models.late import COLBERT_SMALL, LateInteraction
from vxmem.models.onnx import SKIP_LAYER_NORM_FUSION, OnnxEmbedder, OnnxModel, import_onnxruntime
from vxmem.models.packaged import BGE_SMALL, MS_MARCO_MINILM_L12, PackagedModel
from vxmem.models.rerank import OnnxCrossEncoder
from vxmem.models.wordpiece import WordPieceTokenizer

WAYS = ("fused", "unfused")  # every fusion; without SKIP_LAYER_NORM_FUSION


def sessions(model: PackagedModel) -> tuple[dict[str, Any], Any]:
    """The fused, unfused and unoptimised sessions of ``model``, and its tokenizer."""
    ort = import_onnxruntime()
    files = model.files(verify=True)
    tok = WordPieceTokenizer.from_file(files["tokenizer.json"], max_length=512)

    def make(level, disabled=()):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = level
        opts.log_severity_level = 3
        return ort.InferenceSession(os.fspath(files["model.onnx"]), sess_options=opts,
                                    providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled))

    full = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return {"fused": make(full), "unfused": make(full, (SKIP_LAYER_NORM_FUSION,)),
            "exported": make(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)}, tok


def feeds(session, tok, texts: list[str], pairs: bool) -> list[dict[str, np.ndarray]]:
    names = {i.name for i in session.get_inputs()}
    out = []
    for e in tok.encode_batch([(t, t.split(".")[0]) if pairs else t for t in texts]):
        ids = np.asarray([e.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.asarray([e.type_ids], dtype=np.int64)
        out.append(feed)
    return out


def measure(model: PackagedModel, texts: list[str], rounds: int, pairs: bool) -> dict[str, tuple[float, float, float]]:
    """Per session: (median ms per run, mean |diff| from the exported graph, share of signs that differ)."""
    runs, tok = sessions(model)
    fs = feeds(runs["fused"], tok, texts, pairs)
    ref = [runs["exported"].run(None, f)[0] for f in fs]
    out = {}
    times: dict[str, list[float]] = {k: [] for k in WAYS}
    for r in range(rounds):
        for name in (WAYS if r % 2 == 0 else WAYS[::-1]):
            with Timer() as t:
                for f in fs:
                    runs[name].run(None, f)
            times[name].append(t.wall / len(fs) * 1e3)
    for name in WAYS:
        got = [runs[name].run(None, f)[0] for f in fs]
        diff = float(np.mean([np.abs(g - x).mean() for g, x in zip(got, ref)]))
        signs = float(np.mean(np.concatenate([((g >= 0) != (x >= 0)).ravel() for g, x in zip(got, ref)])))
        out[name] = (statistics.median(times[name]), diff, signs)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=300)
    args = flags(ap, rounds=5, rounds_help="interleaved rounds").parse_args(argv)
    rng = np.random.default_rng(3)
    short = [sentence(rng) for _ in range(args.texts)]
    long = [f"{sentence(rng)} {sentence(rng)}" for _ in range(args.texts)]
    report = Report(f"onnxruntime fusions: one thread, {args.texts} texts a row, "
                    f"median of {args.rounds} interleaved rounds")
    print(report.title)
    models: list[tuple[PackagedModel, type[OnnxModel], bool]] = [
        (BGE_SMALL, OnnxEmbedder, False), (COLBERT_SMALL, LateInteraction, False),
        (MS_MARCO_MINILM_L12, OnnxCrossEncoder, True)]
    rows = []
    for model, cls, pairs in models:
        runs = "unfused" if SKIP_LAYER_NORM_FUSION in cls.disabled_optimizers else "fused"
        for label, texts in (("short", short), ("long", long)):
            m = measure(model, texts, args.rounds, pairs)
            (tf, df, sf), (tu, du, su) = m["fused"], m["unfused"]
            rows.append({"model": model.name, "texts": label, "fused ms": f"{tf:.3f}", "unfused ms": f"{tu:.3f}",
                         "ratio": f"{tu / tf:.2f}", "|diff| fused": f"{df:.5f}", "|diff| unfused": f"{du:.5f}",
                         "signs fused": f"{sf:.4f}", "signs unfused": f"{su:.4f}", "vxmem runs": runs})
    report.table("fusions", rows, note=(
        "|diff|: mean absolute difference of the first output from the graph as exported, run without "
        "optimisation; signs: the share of its values whose sign differs (the token vectors' stored bits)."))
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
