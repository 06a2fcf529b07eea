"""vxmem's benchmarks: run each as a module from the repository's root (``python -m benchmarks.bench_memory``).

They share :mod:`benchmarks.harness` (timing, percentiles, flags, the report) and
:mod:`benchmarks.corpora` (the texts and data sets). Benchmarks are not tests: they print
tables whose ratios were measured side by side in one run.
"""
