"""What ``vxmem compare`` and ``vxmem audit`` do: systems side by side on a dataset, and a judge's
supersessions checked against the dataset's labels."""

from __future__ import annotations

import os
import sys

from ..memory.stages import PRESETS
from .workbench import CliError, check_table_path, embedder_named, load_conversations, table_text, write_table

COMPARE_SHOWN = ("system", "recall", "mrr", "stale_leak", "ms_per_recall", "ms_per_write", "probes", "errors")


def run_compare(args) -> int:
    """``vxmem compare DATASET --system ...``: one row per system, printed and written."""
    from ..workbench.systems import parse_systems
    from ..workbench.systems.compare import compare, quality_cost

    check_table_path(args.output)
    check_table_path(args.per_probe, "--per-probe")
    if args.k < 1:
        raise CliError(f"--k must be >= 1, got {args.k}")
    specs = parse_systems(args.system or ["vxmem"])  # unknown names and missing libraries: now, not later
    charts = _chart_module(args.chart)
    convs = load_conversations(args.dataset, args.format)
    res = compare(convs, specs, k=args.k)
    table = res.table.rename(columns={"recall": f"recall@{args.k}", "stale_leak": f"stale_leak@{args.k}"})
    shown = [c.replace("recall", f"recall@{args.k}") if c == "recall" else
             (f"stale_leak@{args.k}" if c == "stale_leak" else c) for c in COMPARE_SHOWN]
    print(f"{len(convs)} conversation(s), {int(res.table['probes'].max())} probes per system, k={args.k}; "
          "ms: median per call")
    print(table_text(table[shown], 50))
    front = quality_cost(res.table)
    print("quality-cost front (recall@k against ms per recall): " + ", ".join(front[front["on_front"]]["system"]))
    for _, row in res.table[res.table["errors"] > 0].iterrows():
        print(f"{row['system']}: {row['errors']} error(s), first: {row['error']}", file=sys.stderr)
    points = _presets_points(convs, res.table, args) if args.presets else None
    if charts is not None:
        chart = (charts.systems_chart(front, args.k) if points is None else
                 charts.presets_chart(points, args.k, [p for p in PRESETS if p in set(points["preset"].dropna())]))
        try:
            chart.properties(width=720).save(args.chart)
        except OSError as exc:
            raise CliError(f"cannot write {args.chart!r}: {exc.strerror or exc}") from None
        print(f"wrote {args.chart}")
    if args.output:
        write_table(res.table, args.output)
        print(f"wrote {args.output}")
    if args.per_probe:
        write_table(res.per_probe, args.per_probe)
        print(f"wrote {args.per_probe}")
    return 0


CHART_EXTENSIONS = (".html", ".json")


def _chart_module(path: str | None):
    """The module that draws ``--chart PATH`` (None without one), checked before any work."""
    if path is None:
        return None
    if os.path.splitext(path)[1].lower() not in CHART_EXTENSIONS:
        raise CliError(f"--chart {path!r}: use a .html (a page that draws it) or .json (its Vega-Lite spec) file name")
    try:
        from ..workbench.views import cost_charts
    except ImportError as exc:
        raise CliError(f"--chart needs altair: pip install 'vxmem[app]' ({exc})") from None
    return cost_charts


def _presets_points(convs, systems, args):
    """``--presets``: the dataset replayed with each recall preset (no replay cache, so each recall
    is timed as a live one) and ranked by every policy, printed with the systems as one front."""
    from ..workbench.views.costs import presets_quality_cost
    from ..workbench.views.settings import preset_settings, replay_all

    emb = embedder_named(args.embedder)
    reps = {p: replay_all(convs, preset_settings({"embedder": args.embedder}, p), emb, cache=False) for p in PRESETS}
    points = presets_quality_cost(reps, systems, point={"limit": args.k})
    shown = points[["label", "recall", "ms_per_recall", "on_front"]].rename(columns={"recall": f"recall@{args.k}"})
    print(f"\nevery recall preset with every ranking policy ({args.embedder} embedder), beside the systems:")
    print(table_text(shown, 60))
    print("quality-cost front: " + ", ".join(points[points["on_front"]]["label"]))
    return points


def run_audit(args) -> int:
    """``vxmem audit DATASET [--judge ...]``: each judge's retirements, misses and wrongful ones."""
    from ..workbench.analysis.audit import audit, audit_summary, judge_named

    check_table_path(args.output)
    judges = [judge_named(j) for j in (args.judge or ["rules"])]
    names = [n for n, _ in judges]
    if len(set(names)) != len(names):
        raise CliError("--judge: a judge is named twice")
    convs = load_conversations(args.dataset, args.format)
    emb = embedder_named(args.embedder)
    rows = audit(convs, [j for _, j in judges], emb, names=names)
    summary = audit_summary(rows)
    if rows.empty:
        print("nothing to audit: no correction, contradiction or restatement in this dataset")
    else:
        shown = rows[rows["outcome"] != "retired"] if not args.all else rows
        print(table_text(shown.drop(columns=["conversation"] if len(convs) == 1 else []), args.top))
        if not args.all:
            print("(rightly retired memories left out; --all lists them too)")
    print(table_text(summary))
    if args.output:
        write_table(rows, args.output)
        print(f"wrote {args.output}")
    return 0
