"""vxmem's embedders side by side: speed and paraphrase matching; and the reranker's speed.

    .venv/bin/python -m benchmarks.bench_embedders            # the semantic extra's row needs that extra
    .venv/bin/python -m benchmarks.bench_embedders --n 500 --threads 1,2

Speed: sentences per second embedding 2,000 distinct memory-like sentences in calls of 64,
with any cache empty; one sentence per call (median latency); and, for the semantic
embedder, the same 2,000 again from its cache. BLAS gets one thread. The default
(bge-small-en-v1.5 int8 on onnxruntime) runs every sentence alone on one onnxruntime thread,
``--threads`` of them at once (``VXMEM_THREADS``); one row also shows intra-op threads
instead, which vxmem does not use. Paraphrases: for each of 12 statements, does the embedder
rank its paraphrase first by cosine, among the 12 paraphrases ("1st of 12"), and among them
plus 12 distractors that share words with the statements but mean something else ("1st of
24")? The reranker table times the default cross-encoder on (query, memory) pairs: pairs per
second, and one rerank of 20 candidates (what a default ``recall()`` adds).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"  # one core, set before numpy loads

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.corpora import query, sentence  # noqa: E402
from benchmarks.harness import Report, flags, timed  # noqa: E402

# (statement, paraphrase with few shared words)
PAIRS = [
    ("I can't stand cold weather.", "Low temperatures make me miserable."),
    ("My car broke down on the highway.", "The automobile stopped working on the motorway."),
    ("She is a physician at the city hospital.", "Her job is being a doctor in the municipal clinic."),
    ("I'm flying to Japan next month.", "In a few weeks I'll take a plane to Tokyo."),
    ("Please reschedule the meeting.", "Can we move the appointment to another time?"),
    ("The movie was extremely boring.", "That film put me to sleep."),
    ("I started learning to play the guitar.", "I recently took up a string instrument."),
    ("My apartment is too small for a dog.", "There isn't enough room in my flat for a pet."),
    ("He quit his job yesterday.", "He resigned from his position the day before."),
    ("I prefer tea over coffee.", "Given the choice, I'd pick Earl Grey rather than espresso."),
    ("The children are asleep.", "The kids have gone to bed."),
    ("We bought a new house last year.", "Twelve months ago we purchased a home."),
]
# Share words with the statements, mean something else.
DISTRACTORS = [
    "I can't stand waiting for the weather report.",
    "The highway to my car dealer is broken.",
    "The city hospital has a new parking garage.",
    "Next month Japan hosts a flying competition.",
    "The meeting room needs new chairs, please.",
    "The movie theater was extremely crowded.",
    "I started learning how guitars are built in a factory.",
    "My dog is too small to climb into the apartment.",
    "Yesterday his job interview went well.",
    "I prefer coffee shops over tea houses for working.",
    "The children are playing in the garden.",
    "Last year the house next door was bought by a new family.",
]


def paraphrase_score(embed) -> tuple[int, int, float, float]:
    """Pairs ranked first among the 12 paraphrases, and among them plus the 12 distractors;
    mean paraphrase cosine; mean cosine to the other candidates."""
    a = np.asarray(embed([p[0] for p in PAIRS]), dtype=np.float32)
    cand = np.asarray(embed([p[1] for p in PAIRS] + DISTRACTORS), dtype=np.float32)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    cand /= np.linalg.norm(cand, axis=1, keepdims=True)
    sims = a @ cand.T
    n = len(PAIRS)
    first_plain = int(sum(int(np.argmax(sims[i, :n])) == i for i in range(n)))
    first = int(sum(int(np.argmax(sims[i])) == i for i in range(n)))
    para = float(np.mean(sims[np.arange(n), np.arange(n)]))
    other = float(np.mean(sims[~np.eye(n, 2 * n, dtype=bool)]))
    return first_plain, first, para, other


def throughput(embed, texts: list[str], batch: int = 64) -> tuple[float, float]:
    """Sentences per wall-clock second and per CPU second of this process."""
    t, c = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), batch):
        embed(texts[i:i + batch])
    return len(texts) / (time.perf_counter() - t), len(texts) / (time.process_time() - c)


def single_latency_ms(embed, texts: list[str]) -> float:
    return timed(lambda i: embed([texts[i]]), len(texts)).ms()["p50"]


def _onnx_intra_op(threads: int):
    """The default model with ``threads`` intra-op threads and one input at a time (not what
    vxmem does: shown for comparison)."""
    from vxmem.models.onnx import OnnxEmbedder
    from vxmem.models.packaged import BGE_SMALL

    emb = OnnxEmbedder(BGE_SMALL, dim=384, threads=1)
    emb.load()
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    emb._session = ort.InferenceSession(str(BGE_SMALL.files()["model.onnx"]), sess_options=opts,
                                        providers=["CPUExecutionProvider"])
    return emb


def rerank_rows(threads: list[int], texts: list[str], queries: list[str]) -> list[tuple[str, float, float, float]]:
    """(label, pairs/s, ms per rerank of 20, load s) of the default cross-encoder."""
    from vxmem.models.packaged import MS_MARCO_MINILM_L12
    from vxmem.models.rerank import OnnxCrossEncoder

    rows = []
    for th in threads:
        t = time.perf_counter()
        ce = OnnxCrossEncoder(MS_MARCO_MINILM_L12, threads=th)
        ce(queries[0], ["warm up"])
        load = time.perf_counter() - t
        t = time.perf_counter()
        n = 0
        for i, q in enumerate(queries):
            ce(q, texts[20 * i: 20 * i + 20])
            n += 20
        spent = time.perf_counter() - t
        rows.append((f"ms-marco-MiniLM-L-12-v2 int8, {th} at once", n / spent, spent / len(queries) * 1e3, load))
    return rows


def embedder_rows(threads: list[int], texts: list[str], singles: list[str]) -> list[tuple]:
    """(name, load s, (sent/s, sent/cpu-s), cached or None, 1 sent ms, *paraphrase scores) per embedder."""
    from vxmem.models.embed import HashingEmbedder
    from vxmem.models.onnx import OnnxEmbedder
    from vxmem.models.packaged import BGE_SMALL

    rows = []
    t = time.perf_counter()
    hashing = HashingEmbedder()
    load = time.perf_counter() - t
    hashing(["warm up"])
    rows.append(("HashingEmbedder ('hashing')", load, throughput(hashing, texts), None,
                 single_latency_ms(hashing, singles), *paraphrase_score(hashing)))

    for th in threads:
        t = time.perf_counter()
        bge = OnnxEmbedder(BGE_SMALL, dim=384, threads=th)
        bge(["warm up"])  # the model loads on first use: part of its load time
        load = time.perf_counter() - t
        rows.append((f"bge-small int8 (default), {th} at once", load, throughput(bge, texts), None,
                     single_latency_ms(bge, singles[:100]), *paraphrase_score(bge)))
    intra = _onnx_intra_op(max(threads))
    rows.append((f"  same, {max(threads)} intra-op threads", float("nan"), throughput(intra, texts[:500], batch=1),
                 None, single_latency_ms(intra, singles[:100]), *paraphrase_score(intra)))

    try:
        from vxmem.models.embed import SemanticEmbedder

        t = time.perf_counter()
        semantic = SemanticEmbedder(threads=max(threads))
        semantic(["warm up"])  # the model loads on first use: part of its load time
        load = time.perf_counter() - t
        cold = throughput(semantic, texts)
        warm = throughput(semantic, texts)
        rows.append((f"SemanticEmbedder (MiniLM-L6 int8), {max(threads)} at once", load, cold, warm,
                     single_latency_ms(semantic, singles), *paraphrase_score(semantic)))
    except ImportError as exc:
        print(f"(semantic column skipped: {exc})", file=sys.stderr)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="sentences for the throughput figure")
    ap.add_argument("--threads", default="1,2", help="VXMEM_THREADS values for the default model's rows")
    args = flags(ap).parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t]
    rng = np.random.default_rng(1)
    texts = [sentence(rng) for _ in range(args.n)]
    singles = [query(rng) + f" #{i}" for i in range(200)]
    rows = embedder_rows(threads, texts, singles)
    report = Report(f"embedders: {args.n} sentences (mean {np.mean([len(s.split()) for s in texts]):.1f} words), "
                    f"calls of 64; {len(PAIRS)} paraphrase pairs among {2 * len(PAIRS)} candidates")
    n = len(PAIRS)
    report.table("embedders", [
        {"embedder": name, "load s": "-" if load != load else f"{load:.2f}", "sent/s": f"{cold:,.0f}",
         "sent/cpu-s": f"{cold_cpu:,.0f}", "cached sent/s": "-" if warm is None else f"{warm[0]:,.0f}",
         "1 sent ms": f"{single:.3f}", "1st of 12": f"{plain}/{n}", "1st of 24": f"{first}/{n}",
         "cos para": f"{para:.3f}", "cos other": f"{other:.3f}"}
        for name, load, (cold, cold_cpu), warm, single, plain, first, para, other in rows], note=(
        "sent/cpu-s: sentences per CPU second of this process (what one idle core would do; the "
        f"machine's load average was {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores). 1st of 12: "
        "paraphrase ranked first among the 12 paraphrases; 1st of 24: among them and 12 distractors "
        "that share words with the statement. cos other: mean cosine to every other candidate."))
    pair_texts = [sentence(rng) for _ in range(400)]
    report.table("reranker", [
        {"reranker": name, "load s": f"{load:.2f}", "pairs/s": f"{per_s:,.1f}", "ms per rerank of 20": f"{ms20:,.0f}"}
        for name, per_s, ms20, load in rerank_rows(threads, pair_texts, [query(rng) for _ in range(20)])])
    print(report.title)
    print()
    report.print()
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
