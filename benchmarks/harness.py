"""What every benchmark shares: timing, percentiles, the common flags, child processes, the report.

A benchmark times calls with :func:`timed` (or several side by side with :func:`interleaved`),
summarises samples with :func:`percentiles`, takes its flags from :func:`flags` and collects
its tables in a :class:`Report`, which prints them and writes them as JSON and as the
Markdown tables ``docs/BENCHMARKS.md`` pastes. Scripts run as modules from the repository's
root: ``.venv/bin/python -m benchmarks.bench_quality --locomo PATH``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
VERSIONS_OF = ("vxmem", "numpy", "onnxruntime", "usearch")


# ---------------------------------------------------------------------------- timing

class Timer:
    """Wall-clock seconds (``perf_counter``) and CPU seconds of a block.

    ``cpu="thread"`` counts this thread's CPU (the call's own work), ``"process"`` every
    thread's; on a machine others share, wall time also counts the waits for a core.
    """

    def __init__(self, cpu: str = "thread") -> None:
        if cpu not in ("thread", "process"):
            raise ValueError(f"cpu must be 'thread' or 'process', got {cpu!r}")
        self.clock = time.thread_time if cpu == "thread" else time.process_time
        self.wall = self.cpu = 0.0
        self.t0 = self.c0 = 0.0  # perf_counter and CPU clock at the start of the block

    def __enter__(self) -> Timer:
        self.c0, self.t0 = self.clock(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = self.clock() - self.c0


@dataclass
class Timings:
    """Seconds of each timed call: wall clock and CPU, in call order."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, timer: Timer) -> None:
        self.wall.append(timer.wall)
        self.cpu.append(timer.cpu)

    def ms(self, per: int = 1) -> dict[str, float]:
        """:func:`percentiles` of the wall-clock samples, in milliseconds (per item of ``per``)."""
        return percentiles(self.wall, scale=1e3 / per)

    def cpu_ms(self, per: int = 1) -> dict[str, float]:
        return percentiles(self.cpu, scale=1e3 / per)


def timed(fn: Callable[[int], Any], rounds: int, *, warmup: int = 0, cpu: str = "thread") -> Timings:
    """Call ``fn(i)`` for i in ``range(rounds)`` and time each call (after ``warmup`` untimed calls)."""
    for i in range(warmup):
        fn(i)
    out = Timings()
    for i in range(rounds):
        with Timer(cpu) as t:
            fn(i)
        out.add(t)
    return out


def interleaved(fns: Mapping[str, Callable[[int], Any]], rounds: int, cpu: str = "thread") -> dict[str, Timings]:
    """:func:`timed` for several calls at once, taking turns call by call, so a machine others
    share slows each of them alike and their ratios stay fair."""
    out = {name: Timings() for name in fns}
    for i in range(rounds):
        for name, fn in fns.items():
            with Timer(cpu) as t:
                fn(i)
            out[name].add(t)
    return out


def best_of(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    """The fastest of ``rounds`` calls of ``fn()`` in seconds, and the last call's result."""
    best, result = math.inf, None
    for _ in range(rounds):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def percentiles(samples: Iterable[float], scale: float = 1.0) -> dict[str, float]:
    """n, mean, p50, p95, p99, p99.9 and max of ``samples`` (each times ``scale``: 1e3 for s -> ms).

    Linear interpolation between the closest ranks (numpy's default). No samples: NaN for each.
    """
    a = np.asarray(list(samples), dtype=np.float64) * scale
    if a.size == 0:
        nan = float("nan")
        return {"n": 0, "mean": nan, "p50": nan, "p95": nan, "p99": nan, "p999": nan, "max": nan}
    p50, p95, p99, p999 = (float(x) for x in np.percentile(a, [50, 95, 99, 99.9]))
    return {"n": int(a.size), "mean": float(a.mean()), "p50": p50, "p95": p95, "p99": p99, "p999": p999,
            "max": float(a.max())}


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None (None when there are none)."""
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def paired_rows(got: Mapping[str, Timings], digits: int = 2, base: str = "file",
                other: str = "postgres") -> list[dict[str, Any]]:
    """One row per call of :func:`interleaved` timings keyed ``"call|store"``: each store's p50 and
    p99 in ms, and ``other``'s ratio to ``base`` where both were timed."""
    rows: dict[str, dict[str, Any]] = {}
    for key, t in got.items():
        call, store = key.split("|")
        ms = t.ms()
        row = rows.setdefault(call, {"call": call})
        row[f"{store} p50"], row[f"{store} p99"] = round(ms["p50"], digits), round(ms["p99"], digits)
    for row in rows.values():
        if f"{base} p50" in row and f"{other} p50" in row:
            row["p50 ratio"] = f"{row[f'{other} p50'] / row[f'{base} p50']:.2f}x"
            row["p99 ratio"] = f"{row[f'{other} p99'] / row[f'{base} p99']:.2f}x"
    return list(rows.values())


def _status_mb(field_name: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def rss_mb() -> float:
    """This process's resident memory now, in MB (NaN where /proc is not there)."""
    now = _status_mb("VmRSS")
    return float("nan") if now is None else now


def peak_rss_mb() -> float:
    """This process's peak resident memory, in MB (``VmHWM``, else ``ru_maxrss``)."""
    import resource

    peak = _status_mb("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if peak is None else peak


# ---------------------------------------------------------------------------- flags

def flags(ap: argparse.ArgumentParser, rounds: int | None = None, rounds_help: str = "timed rounds",
          aliases: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Add the common flags: ``--rounds N`` (when the benchmark repeats; ``rounds`` is its
    default), ``--json PATH`` and ``--markdown PATH`` (the report, written beside the printout).

    ``aliases`` are old spellings of ``--rounds`` that still work, hidden from ``--help``
    (deprecated: the docs now use ``--rounds``).
    """
    if rounds is not None:
        ap.add_argument("--rounds", type=int, default=rounds, help=f"{rounds_help} (default {rounds})")
        for alias in aliases:
            ap.add_argument(alias, dest="rounds", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--json", metavar="PATH", help="also write the report (tables and run metadata) as JSON here")
    ap.add_argument("--markdown", metavar="PATH", help="also write the report's tables as Markdown here")
    return ap


def parse_list(text: str, kind: Callable[[str], Any] = str) -> list[Any]:
    """``"a,b,,c"`` -> ``[kind("a"), kind("b"), kind("c")]``."""
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


def parse_trees(text: str | None) -> list[tuple[str, str]]:
    """``--trees name=path,...`` -> ``[(name, absolute path)]`` (default: this tree, named "this")."""
    items = [x.split("=", 1) for x in parse_list(text)] if text else [["this", "."]]
    return [(name, os.path.abspath(tree)) for name, tree in items]


# ---------------------------------------------------------------------------- child processes

def child_env(tree: str | None = None) -> dict[str, str]:
    """The environment of a child benchmark process: this checkout's ``benchmarks`` package,
    and vxmem from ``tree`` (default: this checkout), so old and new code run side by side."""
    if tree is None or os.path.abspath(tree) == str(ROOT):
        return dict(os.environ) | {"PYTHONPATH": str(ROOT)}
    # A directory holding only a link to this package, ahead of the tree: the tree's vxmem,
    # this checkout's benchmarks (even if the tree has a benchmarks package of its own).
    tag = hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
    link_dir = Path(tempfile.gettempdir()) / f"vxmem-bench-pkg-{os.getuid()}-{tag}"
    link = link_dir / "benchmarks"
    if not link.exists():
        link_dir.mkdir(exist_ok=True)
        with contextlib.suppress(FileExistsError):
            link.symlink_to(ROOT / "benchmarks", target_is_directory=True)
    return dict(os.environ) | {"PYTHONPATH": os.pathsep.join([str(link_dir), os.path.abspath(tree)])}


def module_command(module: str, *args: str) -> list[str]:
    """The command line of ``python -m module args``; ``-P``: no working directory on the path."""
    return [sys.executable, "-P", "-m", module, *args]


def run_child(module: str, flag: str, spec: Mapping[str, Any], tree: str | None = None,
              timeout: float | None = None) -> dict[str, Any]:
    """Run ``python -m module flag JSON(spec)`` and return the JSON of its last line of output."""
    proc = subprocess.run(module_command(module, flag, json.dumps(spec)), env=child_env(tree), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{module} {flag} failed with exit code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def vxmem_from(tree: str) -> None:
    """Refuse to measure a vxmem imported from anywhere but ``tree``."""
    import vxmem

    if not os.path.abspath(vxmem.__file__).startswith(os.path.abspath(tree)):
        raise SystemExit(f"vxmem came from {vxmem.__file__}, not {tree}")


# ---------------------------------------------------------------------------- the report

def versions(names: Sequence[str] = VERSIONS_OF) -> dict[str, str | None]:
    """Installed versions (from package metadata: nothing is imported); None when not installed."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def run_metadata(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """What a figure needs beside it: the command, the machine, the versions, the date, the load."""
    args = list(sys.argv[1:] if argv is None else argv)
    main = sys.modules.get("__main__")
    module = getattr(getattr(main, "__spec__", None), "name", None) or os.path.basename(sys.argv[0])
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover - no load average on this platform
        load = None
    return {"command": shlex.join(["python", "-m", module, *args]),
            "machine": {"cores": os.cpu_count(), "arch": platform.machine(), "system": platform.system(),
                        "python": platform.python_version()},
            "versions": versions(), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "load_average": load}


def cell(value: Any) -> str:
    """A Markdown table cell: None as ``-``, floats to 3 decimals below 10 and 1 above."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Rows of dicts as a Markdown table; the columns are the first row's keys unless given."""
    cols = list(columns if columns is not None else (rows[0].keys() if rows else ()))
    if not cols:
        return ""
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


@dataclass
class Report:
    """Named tables (rows of dicts) and the run's metadata; printed, or written as JSON and Markdown."""

    title: str
    meta: dict[str, Any] = field(default_factory=run_metadata)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    raw: Any = None

    def table(self, name: str, rows: Iterable[Mapping[str, Any]], note: str = "") -> list[dict[str, Any]]:
        """Add (or replace) the table ``name``; ``note`` is printed under it."""
        self.tables[name] = [dict(r) for r in rows]
        if note:
            self.notes[name] = note
        return self.tables[name]

    def markdown(self) -> str:
        parts = [f"# {self.title}", "", f"`{self.meta.get('command', '')}`", ""]
        for name, rows in self.tables.items():
            parts += [f"## {name}", "", markdown_table(rows), ""]
            if name in self.notes:
                parts += [self.notes[name], ""]
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "meta": self.meta, "tables": self.tables, "notes": self.notes, "raw": self.raw}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        return cls(title=data["title"], meta=dict(data.get("meta") or {}), tables=dict(data.get("tables") or {}),
                   notes=dict(data.get("notes") or {}), raw=data.get("raw"))

    def write(self, json_path: str | None = None, markdown_path: str | None = None) -> None:
        """Write the report where the ``--json`` / ``--markdown`` flags ask (either may be None)."""
        if json_path:
            Path(json_path).write_text(json.dumps(self.to_json(), indent=1, default=str))
        if markdown_path:
            Path(markdown_path).write_text(self.markdown())

    def save(self, args: argparse.Namespace) -> None:
        """:meth:`write` to the paths of the common flags in ``args``."""
        self.write(getattr(args, "json", None), getattr(args, "markdown", None))

    def print(self, name: str | None = None) -> None:
        """Print one table (or all) as Markdown, with its note."""
        for key in [name] if name else list(self.tables):
            print(markdown_table(self.tables[key]))
            if key in self.notes:
                print()
                print(self.notes[key])
            print()
