"""The Replay page's report: every figure at the shared settings with the dataset's hash, the
versions and the machine, downloaded in one click as a self-contained HTML page or a JSON bundle,
and a report loaded back beside the current run (its settings one click away)."""

import hashlib
import json
from pathlib import Path

import streamlit as st

from app_pages import config, shared
from vxmem.workbench import views
from vxmem.workbench.analysis.report import ReportError, load_report, report_html


def digest(result: dict) -> str:
    """The sha256 of the picked dataset: its file's bytes when it is a file, else the upload's
    (kept in its key), else the conversations' text; once per dataset, not on every run."""
    return _digest(str(result["key"]), tuple(result["conversations"]))


@st.cache_data(show_spinner=False, max_entries=16)
def _digest(key: str, _conversations: tuple) -> str:
    if key.startswith("shipped:"):
        return hashlib.sha256(Path(key.removeprefix("shipped:")).read_bytes()).hexdigest()
    if key.startswith("upload:"):
        return key.split(":")[1]
    if key.startswith("disk:"):
        return hashlib.sha256(Path(key.removeprefix("disk:").rsplit(":", 3)[0]).read_bytes()).hexdigest()
    text = "\n".join(c.to_jsonl() for c in _conversations)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@st.cache_data(show_spinner=False, max_entries=16)
def bundle_of(key: str, point: str, settings: str, label: str, sha: str, _reps):
    return views.run_report(_reps, json.loads(point), label, sha, json.loads(settings))


def report_section(key: str, reps: list) -> None:
    """Download buttons for the report of ``reps`` at the shared settings, and a report loaded back."""
    result = shared.picked()
    st.subheader("Report")
    st.caption("Every figure of this run at the shared settings (metrics overall and per category with bootstrap "
               "95% intervals, recall and write timings, every probe), with the settings, the dataset's sha256, "
               "the package versions and the machine: one HTML page that needs nothing else, or a JSON bundle. "
               "Either loads back below.")
    bundle = bundle_of(key, views.settings_json(shared.point()), json.dumps(shared.settings(), sort_keys=True,
                                                                             default=str),
                       str(result["label"]), digest(result), reps)
    c1, c2 = st.columns(2)
    name = f"vxmem_report_{Path(str(result['label'])).stem}"
    c1.download_button("Download the report (HTML)", report_html(bundle), file_name=f"{name}.html",
                       mime="text/html", key="report_html", width="stretch")
    c2.download_button("Download the report (JSON)", json.dumps(bundle, indent=1, sort_keys=True),
                       file_name=f"{name}.json", mime="application/json", key="report_json", width="stretch")
    up = st.file_uploader("Load a report (HTML or JSON)", type=["html", "json"], key="report_upload")
    if up is None:
        return
    try:
        loaded = load_report(up.getvalue())
    except ReportError as exc:
        st.error(views.plain(exc, 300))
        return
    st.markdown(f"**{loaded['title']}**, made {loaded['created']} (dataset sha256 "
                f"`{loaded['dataset']['sha256'][:16]}...`"
                + (", the same as this one's" if loaded["dataset"]["sha256"] == bundle["dataset"]["sha256"]
                   else ", not this one's") + ").")
    st.dataframe(views.report_versus(loaded, bundle), hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.3f")
                                for c in ("report", "report_lo", "report_hi", "now", "now_lo", "now_hi")})
    values, problems = views.check_settings({k: v for k, v in loaded["settings"].items() if k in views.SETTINGS_KEYS},
                                            config.RANGES, list(config.EMBEDDERS.values()))
    for problem in problems:
        st.warning(f"Not loaded: {views.plain(problem, 300)}")
    st.button("Use the report's settings", on_click=shared.apply_settings, args=(values,), key="report_apply")
