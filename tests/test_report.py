"""One-click reports: every figure with its settings, dataset hash, versions and machine, as HTML and JSON."""

import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vxmem.cli import main
from vxmem.workbench import views
from vxmem.workbench.analysis.report import REPORT_FORMAT, ReportError, load_report, report_bundle, report_html
from vxmem.workbench.replay.run import replay
from vxmem.workbench.synth import generate

ROOT = Path(__file__).resolve().parent.parent
DRIFT = ROOT / "datasets" / "preference_drift.jsonl"
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def drift_replay(hashing_embedder):
    return replay(generate("preference_drift"), {}, embedder=hashing_embedder)


def test_a_bundle_carries_every_figure_with_what_made_it(drift_replay):
    b = report_bundle([drift_replay], "drift.jsonl", "ab" * 32, now=NOW)
    assert b["format"] == REPORT_FORMAT and b["created"] == "2026-01-02T03:04:05+00:00"
    assert b["dataset"] == {"name": "drift.jsonl", "sha256": "ab" * 32, "conversations": [drift_replay.name],
                            "probes": drift_replay.n_probes}
    ndcg = [p["ndcg"] for p in drift_replay.probes if p["ndcg"] == p["ndcg"]]
    overall = b["metrics"]["overall"]["ndcg"]
    assert overall["value"] == pytest.approx(np.mean(ndcg)) and overall["lo"] <= overall["value"] <= overall["hi"]
    assert overall["n"] == len(ndcg)
    assert b["metrics"]["overall"]["mrr"]["value"] == pytest.approx(np.nanmean([p["rr"] for p in drift_replay.probes]))
    cats = {p["category"] for p in drift_replay.probes}
    assert set(b["metrics"]["by_category"]) == cats
    ms = [p["recall_ms"] for p in drift_replay.probes]
    assert b["timings"]["recall_ms_p50"]["value"] == pytest.approx(np.median(ms))
    assert b["settings"]["half_life_days"] == 7.0 and b["settings"]["policy"] == "blend"
    assert b["versions"]["vxmem"] and b["versions"]["python"] and b["machine"]["cpus"]
    assert b["small_sample"] is True and len(b["probes"]) == drift_replay.n_probes
    json.dumps(b, allow_nan=False)  # plain JSON: no NaN, no numpy scalars


def test_the_html_page_needs_nothing_else_and_loads_back(drift_replay):
    b = report_bundle([drift_replay], "drift <&> .jsonl", "cd" * 32, now=NOW)
    page = report_html(b)
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)  # nothing fetched
    assert "<svg" in page and "nDCG@k" in page and "cd" * 32 in page
    assert "drift &lt;&amp;&gt; .jsonl" in page and "drift <&> .jsonl" not in page.split("<script")[0]
    assert load_report(page) == b and load_report(page.encode()) == b
    assert load_report(json.dumps(b)) == b


def test_a_file_that_is_not_a_report_is_refused(drift_replay):
    b = report_bundle([drift_replay], "d", "0" * 64, now=NOW)
    for text, why in (("<html>hello</html>", "not a vxmem report"), ("[1, 2]", "not a vxmem report"),
                      (json.dumps({**b, "format": "vxmem-report/99"}), "vxmem-report/99"),
                      (json.dumps({k: v for k, v in b.items() if k != "metrics"}), "without its 'metrics'")):
        with pytest.raises(ReportError, match=re.escape(why)):
            load_report(text)
    with pytest.raises(ValueError, match="at least one replay"):
        report_bundle([], "d", "0" * 64)


def test_the_dashboard_report_ranks_at_the_shared_point_and_compares_with_a_loaded_one(drift_replay):
    at_default = views.run_report([drift_replay], views.DEFAULT_POINT, "d", "0" * 64, {"half_life_days": 7.0})
    at_zero = views.run_report([drift_replay], {**views.DEFAULT_POINT, "recency_weight": 0.0}, "d", "0" * 64,
                               {"recency_weight": 0.0})
    assert at_zero["settings"]["recency_weight"] == 0.0
    assert at_default["metrics"]["overall"]["ndcg"]["value"] == pytest.approx(
        report_bundle([drift_replay], "d", "0" * 64)["metrics"]["overall"]["ndcg"]["value"])  # the live recall's
    leak = [b["metrics"]["overall"]["stale_leak"]["value"] for b in (at_zero, at_default)]
    assert leak[0] != leak[1]  # ranked at the point given, not at the replay's own
    side = views.report_versus(at_zero, at_default).set_index("metric")
    assert side.loc["ndcg", "report"] == at_zero["metrics"]["overall"]["ndcg"]["value"]
    assert side.loc["ndcg", "now"] == at_default["metrics"]["overall"]["ndcg"]["value"]
    assert set(side["intervals_overlap"]) <= {True, False}


def test_the_cli_replay_writes_a_report_as_html_or_json(tmp_path, capsys):
    html_path, json_path = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["replay", str(DRIFT), "--embedder", "hashing", "--report", str(html_path)]) == 0
    assert main(["replay", str(DRIFT), "--embedder", "hashing", "--report", str(json_path)]) == 0
    capsys.readouterr()
    from_html, from_json = load_report(html_path.read_text()), load_report(json_path.read_text())
    digest = hashlib.sha256(DRIFT.read_bytes()).hexdigest()
    assert from_html["dataset"]["sha256"] == from_json["dataset"]["sha256"] == digest
    assert from_html["metrics"]["overall"]["ndcg"]["value"] == pytest.approx(
        from_json["metrics"]["overall"]["ndcg"]["value"])
    assert main(["replay", str(DRIFT), "--embedder", "hashing", "--report", str(tmp_path / "r.txt")]) == 2
    assert "a report is written as .html or .json" in capsys.readouterr().err
    assert not (tmp_path / "r.txt").exists()


def test_the_category_table_at_the_replay_settings_is_the_one_vxmem_replay_prints(hashing_embedder):
    from vxmem.workbench.analysis.metrics import by_category_and_conversation
    from vxmem.workbench.datasets import load
    from vxmem.workbench.sweep.holdout import bootstrap_ci

    reps = [replay(c, {}, embedder=hashing_embedder) for c in load(ROOT / "datasets" / "fixtures" /
                                                                     "locomo_sample.json")]
    recorded = [r.to_frames()["probes"].assign(conversation=r.name) for r in reps]
    printed = by_category_and_conversation(pd.concat(recorded, ignore_index=True), "recall", bootstrap_ci)
    shown = views.category_table(reps, views.point_of(views.DEFAULT_SETTINGS))
    assert shown.equals(printed), (shown, printed)
    assert list(shown.columns) == ["category", "conv-fx1", "conv-fx2", "all", "probes"]


def test_named_settings_on_one_dataset_say_which_cannot_be_ranked_there(drift_replay):
    here = views.point_of(views.DEFAULT_SETTINGS)
    frame = views.named_here([drift_replay], {"now": here, "flat": {**here, "recency_weight": 0.0},
                                              "wide": {**here, "limit": 50}})
    assert list(dict.fromkeys(frame["config"])) == ["now", "flat", "wide"]  # in the order given
    tiles = views.point_report([drift_replay], here)
    now = frame[frame["config"] == "now"].set_index("metric")
    for m in ("hit", "mrr", "ndcg", "stale_leak"):
        row = tiles[(tiles["metric"] == m) & (tiles["subset"] == "all")].iloc[0]
        assert now.at[m, "mean"] == pytest.approx(row["mean"]) and now.at[m, "lo"] == pytest.approx(row["lo"])
    wide = frame[frame["config"] == "wide"]
    assert wide["mean"].isna().all() and wide["note"].str.contains("limit 50").all()
    assert frame.loc[frame["config"] == "flat", "note"].eq("").all()
