"""HNSW graph settings side by side (the at-scale goal's last ratio): connectivity and
expansion against recall@10 (vs the exact top 10), search latency, build time and memory.

    python benchmarks/bench_hnsw_settings.py --scale 100000 --connectivity 16,32 --expansion 64,128,256,384

Reads the seeded corpus ``bench_memory.py --scale N`` wrote into ``--scale-dir`` (its
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
import resource
import sys
import tempfile
import time

import numpy as np


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=100_000, help="the corpus size bench_memory.py --scale wrote")
    ap.add_argument("--scale-dir", default=os.path.join(tempfile.gettempdir(), "vxmem-bench-scale"))
    ap.add_argument("--connectivity", default="16,32", help="comma-separated graph connectivities")
    ap.add_argument("--expansion", default="64,128,256,384", help="comma-separated expansion_search values")
    ap.add_argument("--expansion-add", default="48", help="comma-separated expansion_add values (vxmem's: 48)")
    ap.add_argument("--dtype", default="i8", help="comma-separated usearch dtypes (i8: vxmem's, f16, f32)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--overfetch", type=int, default=20,
                    help="candidates asked of the graph and re-scored exactly, as vxmem does (its 2k, at least 20)")
    ap.add_argument("--json", help="also write the raw figures here")
    args = ap.parse_args(argv)

    from usearch.index import Index

    data = os.path.join(args.scale_dir, f"n{args.scale}")
    vecs = np.load(os.path.join(data, "vecs.npy"), mmap_mode="r")
    with open(os.path.join(data, "texts.json")) as f:
        nq = len(json.load(f)["queries"])
    corpus = np.ascontiguousarray(vecs[: args.scale], dtype=np.float32)
    queries = np.ascontiguousarray(vecs[args.scale: args.scale + nq], dtype=np.float32)
    k = args.k
    sims = queries @ corpus.T
    exact = np.argpartition(-sims, k, axis=1)[:, :k]
    kth = np.take_along_axis(sims, exact, axis=1).min(axis=1) - 1e-5  # ties at the 10th count as found
    del sims
    keys = np.arange(args.scale, dtype=np.uint64)
    rows = []
    print(f"{args.scale:,} vectors of {corpus.shape[1]} d, {nq} queries, build on {args.threads} threads, "
          f"search on 1; load average {os.getloadavg()[0]:.1f}", flush=True)
    graphs = [(dtype, conn, add) for dtype in args.dtype.split(",") for conn in map(int, args.connectivity.split(","))
              for add in map(int, args.expansion_add.split(","))]
    for dtype, conn, add in graphs:
        before = rss_mb()
        index = Index(ndim=corpus.shape[1], metric="ip", dtype=dtype, connectivity=conn, expansion_add=add)
        t0, c0 = time.perf_counter(), time.process_time()
        index.add(keys, corpus, threads=args.threads)
        build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0
        index_mb = index.memory_usage / 2**20
        grown = rss_mb() - before
        with tempfile.NamedTemporaryFile(suffix=".usearch") as f:
            index.save(f.name)
            file_mb = os.path.getsize(f.name) / 2**20
        for es in map(int, args.expansion.split(",")):
            index.expansion_search = es
            for q in queries[:20]:  # warm
                index.search(q, k, threads=1)
            lat, found, lat_of, found_of = [], [], [], []
            for i, q in enumerate(queries):
                t0 = time.perf_counter()
                got = index.search(q, k, threads=1).keys
                lat.append(time.perf_counter() - t0)
                sims_got = corpus[np.asarray(got, dtype=np.int64)] @ q
                found.append(min(k, int(np.sum(sims_got >= kth[i]))) / k)
                # vxmem's way: more candidates, each re-scored against the float32 vectors
                t0 = time.perf_counter()
                cand = np.asarray(index.search(q, args.overfetch, threads=1).keys, dtype=np.int64)
                sims_c = corpus[cand] @ q
                best = sims_c[np.argsort(-sims_c)[:k]]
                lat_of.append(time.perf_counter() - t0)
                found_of.append(min(k, int(np.sum(best >= kth[i]))) / k)
            row = {"dtype": dtype, "connectivity": conn, "expansion_add": add, "expansion_search": es,
                   "build_s": build_s, "build_cpu_s": build_cpu, "index_mb": index_mb, "rss_growth_mb": grown,
                   "file_mb": file_mb,
                   "p50_ms": float(np.median(lat)) * 1e3, "p99_ms": float(np.percentile(lat, 99)) * 1e3,
                   "recall10": float(np.mean(found)), "overfetch": args.overfetch,
                   "rescored_p50_ms": float(np.median(lat_of)) * 1e3,
                   "rescored_recall10": float(np.mean(found_of))}
            rows.append(row)
            print(f"dtype {dtype:4} M {conn:3} add {add:4} es {es:4}: recall@10 {row['recall10']:.3f}  "
                  f"p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms  | top {args.overfetch} re-scored: "
                  f"recall@10 {row['rescored_recall10']:.3f} p50 {row['rescored_p50_ms']:.3f} ms | "
                  f"build {build_s:.1f} s (CPU {build_cpu:.1f})  "
                  f"index {index_mb:.0f} MB (RSS +{grown:.0f}, file {file_mb:.0f})", flush=True)
        del index
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
