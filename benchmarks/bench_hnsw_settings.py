"""HNSW graph settings side by side (the at-scale goal's last ratio): connectivity and
expansion against recall@10 (vs the exact top 10), search latency, build time and memory.

    .venv/bin/python -m benchmarks.bench_hnsw_settings --scale 100000 --connectivity 16,32 --expansion 64,128,256,384

Reads the seeded corpus ``python -m benchmarks.bench_memory --scale N`` wrote into ``--scale-dir`` (its
``vecs.npy`` and ``texts.json``: the first N rows are the corpus, the next 300 the queries),
builds one usearch graph per dtype, connectivity and expansion_add in this process (``--threads``, default every
core), and searches every query one at a time on one thread at each expansion_search. The
exact top 10 comes from a numpy scan of the same float32 vectors. vxmem adds its own work
on top (an over-fetch of 2k candidates re-scored exactly): bench_memory.py measures that.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

import numpy as np

from benchmarks.harness import Report, Timer, flags, parse_list, peak_rss_mb, percentiles, rss_mb


def load(data: str, scale: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The corpus and query vectors of a ``--scale`` directory, and each query's exact 10th best cosine."""
    vecs = np.load(os.path.join(data, "vecs.npy"), mmap_mode="r")
    with open(os.path.join(data, "texts.json")) as f:
        nq = len(json.load(f)["queries"])
    corpus = np.ascontiguousarray(vecs[:scale], dtype=np.float32)
    queries = np.ascontiguousarray(vecs[scale: scale + nq], dtype=np.float32)
    sims = queries @ corpus.T
    exact = np.argpartition(-sims, k, axis=1)[:, :k]
    kth = np.take_along_axis(sims, exact, axis=1).min(axis=1) - 1e-5  # ties at the 10th count as found
    return corpus, queries, kth


def search_row(index: Any, corpus: np.ndarray, queries: np.ndarray, kth: np.ndarray, k: int,
               overfetch: int) -> dict[str, float]:
    """Every query one at a time on one thread: the graph's top k, and vxmem's way (more
    candidates, each re-scored against the float32 vectors)."""
    for q in queries[:20]:  # warm
        index.search(q, k, threads=1)
    lat, found, lat_of, found_of = [], [], [], []
    for i, q in enumerate(queries):
        with Timer() as t:
            got = index.search(q, k, threads=1).keys
        lat.append(t.wall)
        sims_got = corpus[np.asarray(got, dtype=np.int64)] @ q
        found.append(min(k, int(np.sum(sims_got >= kth[i]))) / k)
        with Timer() as t:
            cand = np.asarray(index.search(q, overfetch, threads=1).keys, dtype=np.int64)
            sims_c = corpus[cand] @ q
            best = sims_c[np.argsort(-sims_c)[:k]]
        lat_of.append(t.wall)
        found_of.append(min(k, int(np.sum(best >= kth[i]))) / k)
    direct, rescored = percentiles(lat, scale=1e3), percentiles(lat_of, scale=1e3)
    return {"p50_ms": direct["p50"], "p99_ms": direct["p99"], "recall10": float(np.mean(found)),
            "overfetch": overfetch, "rescored_p50_ms": rescored["p50"], "rescored_recall10": float(np.mean(found_of))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=100_000, help="the corpus size bench_memory --scale wrote")
    ap.add_argument("--scale-dir", default=os.path.join(tempfile.gettempdir(), "vxmem-bench-scale"))
    ap.add_argument("--connectivity", default="16,32", help="comma-separated graph connectivities")
    ap.add_argument("--expansion", default="64,128,256,384", help="comma-separated expansion_search values")
    ap.add_argument("--expansion-add", default="48", help="comma-separated expansion_add values (vxmem's: 48)")
    ap.add_argument("--dtype", default="i8", help="comma-separated usearch dtypes (i8: vxmem's, f16, f32)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--overfetch", type=int, default=20,
                    help="candidates asked of the graph and re-scored exactly, as vxmem does (its 2k, at least 20)")
    args = flags(ap).parse_args(argv)

    from usearch.index import Index

    corpus, queries, kth = load(os.path.join(args.scale_dir, f"n{args.scale}"), args.scale, args.k)
    keys = np.arange(args.scale, dtype=np.uint64)
    report = Report(f"{args.scale:,} vectors of {corpus.shape[1]} d, {len(queries)} queries, build on "
                    f"{args.threads} threads, search on 1; load average {os.getloadavg()[0]:.1f}")
    print(report.title, flush=True)
    rows = []
    graphs = [(dtype, conn, add) for dtype in parse_list(args.dtype) for conn in parse_list(args.connectivity, int)
              for add in parse_list(args.expansion_add, int)]
    for dtype, conn, add in graphs:
        before = rss_mb()
        index = Index(ndim=corpus.shape[1], metric="ip", dtype=dtype, connectivity=conn, expansion_add=add)
        with Timer("process") as t:
            index.add(keys, corpus, threads=args.threads)
        build_s, build_cpu = t.wall, t.cpu
        index_mb = index.memory_usage / 2**20
        grown = rss_mb() - before
        with tempfile.NamedTemporaryFile(suffix=".usearch") as f:
            index.save(f.name)
            file_mb = os.path.getsize(f.name) / 2**20
        for es in parse_list(args.expansion, int):
            index.expansion_search = es
            row = {"dtype": dtype, "connectivity": conn, "expansion_add": add, "expansion_search": es,
                   "build_s": build_s, "build_cpu_s": build_cpu, "index_mb": index_mb, "rss_growth_mb": grown,
                   "file_mb": file_mb} | search_row(index, corpus, queries, kth, args.k, args.overfetch)
            rows.append(row)
            print(f"dtype {dtype:4} M {conn:3} add {add:4} es {es:4}: recall@10 {row['recall10']:.3f}  "
                  f"p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms  | top {args.overfetch} re-scored: "
                  f"recall@10 {row['rescored_recall10']:.3f} p50 {row['rescored_p50_ms']:.3f} ms | "
                  f"build {build_s:.1f} s (CPU {build_cpu:.1f})  "
                  f"index {index_mb:.0f} MB (RSS +{grown:.0f}, file {file_mb:.0f})", flush=True)
        del index
    print(f"peak RSS {peak_rss_mb():.0f} MB")
    report.table("graphs", rows)
    report.save(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
