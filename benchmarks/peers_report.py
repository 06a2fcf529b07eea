"""bench_peers' tables: one row per figure (the median over the rounds), ratios peer / vxmem, the goals."""

from __future__ import annotations

import math
import os
from typing import Any

from benchmarks.corpora import SESSIONS
from benchmarks.harness import markdown_table, median


def median_of(rounds: list[dict], path: tuple) -> float | None:
    """The median over the rounds of ``round[path[0]][path[1]]...`` (numbers only)."""
    vals = []
    for r in rounds:
        v: Any = r
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        vals.append(float(v) if isinstance(v, (int, float)) else None)
    return median(vals)


def fmt(v: float | None, unit: str = "", digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if abs(v) >= 100 and digits:
        digits = 0
    elif abs(v) >= 10 and digits > 1:
        digits = 1
    return f"{v:,.{digits}f}{unit}"


def ratio(peer: float | None, vx: float | None) -> str:
    if peer is None or vx is None or vx <= 0:
        return ""
    r = peer / vx
    return f" ({r:,.0f}x)" if r >= 100 else f" ({r:.1f}x)" if r >= 10 else f" ({r:.2f}x)"


def metrics_of(r: dict) -> dict:
    """One row per figure, each the median over the rounds."""
    serve, write = r["serve"], r["write"]
    m: dict = {}
    m["remember p50 ms"] = median_of(write, ("remember", "p50_ms"))
    m["remember p99 ms"] = median_of(write, ("remember", "p99_ms"))
    for op, label in (("session_recall", "session recall"), ("cross_recall", "cross-session recall"),
                      ("session_search", "session search"), ("cross_search", "cross-session search")):
        m[f"{label} p50 ms"] = median_of(serve, (op, "p50_ms"))
        m[f"{label} p99 ms"] = median_of(serve, (op, "p99_ms"))
        m[f"{label} recall@10"] = median_of(serve, (op, "recall10"))
    m["first cross-session recall ms"] = median_of(serve, ("first_cross_recall_ms",))
    m["build s"] = median_of([r["build"]] if r["build"] else [], ("build_s",))
    m["index build s"] = median_of([r["build"]] if r["build"] else [], ("index_s",))
    m["open s"] = median_of(serve, ("open_s",))
    m["index load s"] = median_of(serve, ("index_load_s",))
    m["peak RSS MB (serve)"] = median_of(serve, ("peak_rss_mb",))
    m["harness RSS MB"] = median_of(serve, ("harness_rss_mb",))
    m["RSS after imports MB"] = median_of(serve, ("imported_rss_mb",))
    m["peak RSS MB (build)"] = median_of([r["build"]] if r["build"] else [], ("build_peak_rss_mb",))
    m["disk MB"] = r["disk"] / 2**20 if r.get("disk") is not None else None
    return m


def report(n: int, res: dict, systems: list[str], args: Any) -> dict[str, Any]:
    """One size's table: rows (a figure each, a column per system), its heading and note, and its text."""
    head = (f"### {n:,} memories, {SESSIONS} sessions, {args.queries} queries of each kind "
            f"({args.embedder} embedder, {os.cpu_count()} cores, {args.rounds} round(s), "
            f"{res['_elapsed_s'] / 60:.1f} min)")
    mets = {s: metrics_of(res[s]) for s in systems}
    vx = mets.get("vxmem")
    rows = []
    for key in mets[systems[0]]:
        row = {"figure": key}
        for s in systems:
            v = mets[s][key]
            cell = fmt(v, "", 2)
            if "recall@10" not in key and vx is not None and s != "vxmem" and v is not None \
                    and "harness" not in key and "imports" not in key:
                cell += ratio(v, vx[key])
            row[s] = cell
        rows.append(row)
    notes = [f"{s}: {res[s]['failed']}" for s in systems if res[s].get("failed")]
    note = ("not measured (errors): " + "; ".join(notes)) if notes else ""
    text = "\n".join([f"\n{head}\n", markdown_table(rows)] + ([f"\n{note}"] if note else []))
    return {"rows": rows, "note": note, "text": text}


def goals(n: int, res: dict, systems: list[str]) -> str:
    if "vxmem" not in systems or res["vxmem"].get("failed"):
        return ""
    mets = {s: metrics_of(res[s]) for s in systems}
    vx = mets["vxmem"]
    peers = [s for s in systems if s not in ("vxmem", "vxmem-hybrid", "vxmem-f16", "floor", "usearch")
             and not res[s].get("failed")]
    at_goal = n >= 100_000  # the goal is set at 100k; smaller sizes print the ratios only

    def verdict(ok: bool) -> str:
        return ("met" if ok else "NOT met") if at_goal else "(goal set at 100k)"

    out = [f"\ngoals at {n:,} (ratios peer / vxmem; the usearch one is vxmem / usearch):"]
    c = vx["cross-session recall p50 ms"]
    worst = min(((mets[s]["cross-session recall p50 ms"] or math.inf) / c, s) for s in peers) if peers else None
    if worst:
        out.append(f"- cross-session recall: vxmem {fmt(c, ' ms')}, "
                   f"recall@10 {fmt(vx['cross-session recall recall@10'])}; "
                   f"slowest-to-beat peer {worst[1]} at {worst[0]:.2f}x (goal >= 5x, recall@10 >= 0.99): "
                   + verdict(worst[0] >= 5 and (vx["cross-session recall recall@10"] or 0) >= 0.99))
    if "usearch" in mets and mets["usearch"]["cross-session search p50 ms"]:
        u = mets["usearch"]["cross-session search p50 ms"]
        out.append(f"- usearch floor {fmt(u, ' ms')} "
                   f"(recall@10 {fmt(mets['usearch']['cross-session search recall@10'])}): "
                   f"vxmem recall {c / u:.2f}x, vxmem search {vx['cross-session search p50 ms'] / u:.2f}x of it "
                   "(goal <= 1.5x): " + verdict(c / u <= 1.5))
    for key in ("session recall p50 ms", "remember p50 ms"):
        rs = [(mets[s][key] / vx[key], s) for s in peers if mets[s][key] and vx[key]]
        if rs:
            out.append(f"- {key.replace(' p50 ms', '')}: vxmem {fmt(vx[key], ' ms')}; peers "
                       + ", ".join(f"{s} {r:.1f}x" for r, s in sorted(rs)))
    if "floor" in mets and not res["floor"].get("failed"):
        f = mets["floor"]
        for key in ("peak RSS MB (serve)", "disk MB"):
            if f[key] and vx[key]:
                out.append(f"- {key}: vxmem {fmt(vx[key])} vs floor {fmt(f[key])} = {vx[key] / f[key]:.2f}x the floor")
        half = mets.get("vxmem-f16")
        if half and not res["vxmem-f16"].get("failed") and half["peak RSS MB (serve)"] and f["peak RSS MB (serve)"]:
            out.append(f"- peak RSS MB (serve) with vector_dtype='float16': {fmt(half['peak RSS MB (serve)'])} = "
                       f"{half['peak RSS MB (serve)'] / f['peak RSS MB (serve)']:.2f}x the floor")
    return "\n".join(out)


