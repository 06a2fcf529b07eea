"""A report bundle drawn as one HTML page with nothing to fetch: tables, an inline SVG chart of the
metrics with their intervals, and the bundle itself embedded so the page loads back
(:func:`vxmem.workbench.analysis.report.load_report`)."""

from __future__ import annotations

import html
from typing import Any

__all__ = ["page", "metrics_svg"]

_STYLE = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:left}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.warn{color:#9a3412}
code{background:#f3f3f3;padding:0 .2rem}"""
_LABELS = {"hit": "hit@k", "recall": "recall@k", "mrr": "MRR", "ndcg": "nDCG@k", "stale_leak": "stale-leak@k"}


def _e(value: Any) -> str:
    return html.escape("n/a" if value is None else str(value))


def _num(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _with_ci(fig: dict[str, Any], digits: int = 3) -> str:
    if fig.get("value") is None:
        return "n/a"
    return f"{_num(fig['value'], digits)} [{_num(fig['lo'], digits)}, {_num(fig['hi'], digits)}]"


def _table(header: list[str], rows: list[list[str]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pairs(title: str, items: dict[str, Any]) -> str:
    rows = [[_e(k), f"<code>{_e('none' if v is None else v)}</code>"] for k, v in items.items()]
    return f"<h2>{_e(title)}</h2>" + _table(["name", "value"], rows)


def metrics_svg(overall: dict[str, dict[str, Any]], width: int = 560, row: int = 28) -> str:
    """Each metric as a bar (0 to 1) with its 95% interval as a whisker, as inline SVG."""
    names = [m for m in _LABELS if m in overall and overall[m].get("value") is not None]
    left, right = 110, width - 60
    scale = right - left
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row * len(names) + 30}" '
             'role="img" aria-label="metrics with 95% intervals">']
    for i, m in enumerate(names):
        f, y = overall[m], 10 + i * row
        x0, x1, x2 = (left + scale * max(0.0, min(1.0, f[k])) for k in ("lo", "value", "hi"))
        parts += [f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" font-size="12">{_LABELS[m]}</text>',
                  f'<rect x="{left}" y="{y + 4}" width="{x1 - left:.1f}" height="16" fill="#4c78a8"/>',
                  f'<line x1="{x0:.1f}" x2="{x2:.1f}" y1="{y + 12}" y2="{y + 12}" stroke="#222" stroke-width="1.5"/>',
                  f'<text x="{right + 6}" y="{y + 15}" font-size="12">{f["value"]:.3f}</text>']
    y = 14 + len(names) * row
    parts += [f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}" stroke="#999"/>',
              f'<text x="{left}" y="{y + 12}" font-size="10">0</text>',
              f'<text x="{right}" y="{y + 12}" font-size="10" text-anchor="end">1</text>', "</svg>"]
    return "".join(parts)


def _metric_rows(by: dict[str, dict[str, dict[str, Any]]]) -> list[list[str]]:
    return [[_e(name), *(_with_ci(figs[m]) for m in _LABELS), str(max(f["n"] for f in figs.values()))]
            for name, figs in by.items()]


def page(bundle: dict[str, Any], embedded_json: str) -> str:
    """The HTML of ``bundle``; ``embedded_json`` is the bundle as JSON, carried inside the page."""
    m, t = bundle["metrics"], bundle["timings"]
    header = ["", *_LABELS.values(), "probes"]
    parts = [f"<h1>{_e(bundle['title'])}</h1>",
             f"<p>Made {_e(bundle['created'])} from <code>{_e(bundle['dataset']['name'])}</code> (sha256 "
             f"<code>{_e(bundle['dataset']['sha256'])}</code>), {bundle['dataset']['probes']} probes. Every figure: "
             "its mean and its bootstrap 95% interval.</p>"]
    if bundle.get("small_sample"):
        parts.append('<p class="warn">Fewer than 30 probes: these means are far from certain; read the '
                     "intervals, not the digits.</p>")
    parts += ["<h2>Metrics</h2>", metrics_svg(m["overall"]),
              _table(header, _metric_rows({"all probes": m["overall"], **m["by_category"]}), set(range(1, 7))),
              "<h2>Timings (this machine)</h2>",
              _table(["", "median ms [95% CI]", "p99 ms", "calls"],
                     [["recall()", _with_ci(t["recall_ms_p50"], 2), _num(t["recall_ms_p99"], 2),
                       str(t["recall_ms_p50"]["n"])],
                      ["remember()", _with_ci(t["write_ms_p50"], 2), "", str(t["write_ms_p50"]["n"])]], {1, 2, 3}),
              _pairs("Settings", bundle["settings"]), _pairs("Versions", bundle["versions"]),
              _pairs("Machine", bundle["machine"]), "<h2>Every probe</h2>",
              _table(["conversation", "probe", "category", "query", *_LABELS.values(), "ms"],
                     [[_e(p["conversation"]), _e(p["label"]), _e(p["category"]), _e(p["query"]),
                       *(_num(p.get("rr" if k == "mrr" else k)) for k in _LABELS), _num(p["recall_ms"], 2)]
                      for p in bundle["probes"]], set(range(4, 10)))]
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(bundle['title'])}</title><style>{_STYLE}</style></head><body>" + "".join(parts)
            + f'<script type="application/json" id="vxmem-report">{html.escape(embedded_json, quote=False)}</script>'
            + "</body></html>")
