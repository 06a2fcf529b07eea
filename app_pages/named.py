"""Named settings: the current settings saved under a name, each one's headline metrics beside the
current settings' on the dataset at hand, and any of them run side by side on every shipped dataset
(the Tune page), so a configuration is judged on more than the dataset at hand."""

from __future__ import annotations

import json
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, shared
from vxmem.workbench import views

NAMED = "named_settings"  # name -> settings, kept for the session
CURRENT = "(current settings)"


def saved() -> dict[str, dict[str, Any]]:
    return st.session_state.setdefault(NAMED, {})


def _save() -> None:
    name = str(st.session_state.get("named_name", "")).strip()
    if name and name != CURRENT:
        saved()[name] = dict(shared.settings())
        st.session_state["named_name"] = ""
        picked = st.session_state.get("named_picked", [CURRENT])
        st.session_state["named_picked"] = [*(p for p in picked if p != name), name]  # a new one is compared


def _forget(name: str) -> None:
    saved().pop(name, None)
    st.session_state["named_picked"] = [p for p in st.session_state.get("named_picked", []) if p != name]


def on_grid(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The named settings whose values of ``x`` and ``y`` are a point of the sweep ``frame``: name, x, y."""
    rows = []
    for name, s in saved().items():
        vx, vy = (s.get(x) or 0, s.get(y) or 0)  # a token budget of None is the grid's 0
        if ((frame[x] == vx) & (frame[y] == vy)).any():
            rows.append({"name": name[:14], x: float(vx), y: float(vy)})
    return pd.DataFrame(rows, columns=["name", x, y])


def _replays_everywhere() -> dict[str, list]:
    """Every shipped dataset replayed with the current embedder and search mode (cached; bars the first time)."""
    out = {}
    for row in shared.shipped().to_dict("records"):
        convs = shared.load_shipped(row["path"], row["format"])
        if any(c.probes for c in convs):
            out[row["name"]] = shared.replays_for(f"shipped:{row['path']}", tuple(convs))
    return out


@st.cache_data(show_spinner=False, max_entries=32)
def across(points: str, metric: str, embedder: str, mode: str, _replays: dict) -> pd.DataFrame:
    return views.across_datasets(_replays, json.loads(points), metric)


def chart(frame: pd.DataFrame, metric: str) -> alt.LayerChart:
    """Grouped bars, one group per dataset (the pooled row last), one bar per named setting, 95% whiskers."""
    order = [*(d for d in dict.fromkeys(frame["dataset"]) if d != views.ALL_DATASETS), views.ALL_DATASETS]
    base = alt.Chart(frame).encode(
        x=alt.X("dataset:N", sort=order, title=None, axis=alt.Axis(labelAngle=-30, labelLimit=200)),
        xOffset=alt.XOffset("config:N"), color=alt.Color("config:N", title="settings",
                                                         legend=alt.Legend(orient="bottom", labelLimit=260)))
    bars = base.mark_bar().encode(y=alt.Y("mean:Q", title=config.METRIC_LABELS[metric]),
                                  tooltip=shared.tips("dataset", "config", alt.Tooltip("mean:Q", format=".3f"),
                                                      alt.Tooltip("lo:Q", format=".3f"),
                                                      alt.Tooltip("hi:Q", format=".3f"), "probes"))
    return (bars + base.mark_rule(color="#222").encode(y=alt.Y("lo:Q"), y2=alt.Y2("hi:Q"))).properties(height=340)


@st.cache_data(show_spinner=False, max_entries=64)
def _here(key: str, points: str, _reps: list) -> pd.DataFrame:
    return views.named_here(_reps, json.loads(points), config.HEADLINE_METRICS)


def here_chart(frame: pd.DataFrame) -> alt.LayerChart:
    """One small group per headline metric, a dot per setting (the current one first) and its 95% whiskers."""
    names = list(dict.fromkeys(frame["config"]))
    shown = frame.assign(metric=frame["metric"].map(config.METRIC_LABELS))
    base = alt.Chart(shown).encode(
        x=alt.X("metric:N", sort=[config.METRIC_LABELS[m] for m in config.HEADLINE_METRICS], title=None,
                axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("config:N", sort=names),
        color=alt.Color("config:N", sort=names, title="settings", legend=alt.Legend(orient="right", labelLimit=200)))
    dots = base.mark_point(filled=True, size=70).encode(
        y=alt.Y("mean:Q", title="mean (95% CI)", scale=alt.Scale(domain=[0, 1])),
        tooltip=shared.tips("config", "metric", alt.Tooltip("mean:Q", format=".3f"),
                            alt.Tooltip("lo:Q", format=".3f"), alt.Tooltip("hi:Q", format=".3f"), "probes"))
    return (base.mark_rule(strokeWidth=2).encode(y=alt.Y("lo:Q"), y2=alt.Y2("hi:Q")) + dots).properties(height=200)


def here_overlay(key: str, reps: list) -> None:
    """The named settings' headline metrics on this dataset beside the current settings' (once one is saved)."""
    if not saved():
        return
    points = {CURRENT: shared.point(), **{n: views.point_of(s) for n, s in saved().items()}}
    frame = _here(key, json.dumps(points), reps)  # in order: the current settings first
    drawn = frame[frame["mean"].notna()]
    shared.chart(here_chart(drawn))
    st.caption("The named settings (saved below) on this dataset beside the current ones: each dot a mean over the "
               "probes, its bar the bootstrap 95% interval; they re-rank this replay's pools.")
    for name, note in frame.loc[frame["note"] != "", ["config", "note"]].drop_duplicates("config").values:
        st.caption(f":material/block: {views.plain(name)} cannot be ranked here: {views.plain(note, 200)}.")


def named_section() -> None:
    st.subheader("Named settings on every dataset")
    st.caption("Save the current settings under a name, then run any of them side by side on every shipped dataset: "
               "bars with bootstrap 95% intervals per dataset, and over all of them (their probes pooled). The "
               "replays use the current embedder and search mode; each setting re-ranks their pools.")
    c1, c2 = st.columns([3, 1])
    c1.text_input("Name the current settings", key="named_name", placeholder="e.g. long half-life")
    c2.button("Save", key="named_save", on_click=_save, width="stretch")
    names = list(saved())
    for name in names:
        cols = st.columns([4, 1])
        cols[0].caption(f"**{views.plain(name)}**: " + ", ".join(
            f"{config.PARAMS[k][0]} {v:g}" for k, v in saved()[name].items() if k in config.PARAMS and v is not None))
        cols[1].button("Forget", key=f"named_forget:{name}", on_click=_forget, args=(name,))
    picked = st.multiselect("Settings to compare", [CURRENT, *names], default=[CURRENT, *names], key="named_picked")
    metric = st.selectbox("Metric", config.PICK_METRICS, key="named_metric", format_func=config.METRIC_LABELS.get)
    if st.button("Run on every shipped dataset", key="named_run", type="primary"):
        st.session_state["named_ran"] = True  # kept: the next slider move redraws it rather than hides it
    if not picked or not st.session_state.get("named_ran"):
        return
    points = {n: views.point_of(shared.settings() if n == CURRENT else saved()[n]) for n in picked}
    s = shared.settings()
    frame = across(json.dumps(points, sort_keys=True), metric, s["embedder"], s["mode"], _replays_everywhere())
    shared.chart(chart(frame, metric))
    pooled = frame[frame["dataset"] == views.ALL_DATASETS]
    st.dataframe(pooled[["config", "mean", "lo", "hi", "macro", "probes"]], hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("mean", "lo", "hi", "macro")})
    st.caption("Over all datasets: the mean of every probe pooled (mean, lo, hi) and the mean of the datasets' means "
               "(macro), which weighs a small dataset as much as a large one.")
    st.download_button("Download as CSV", views.to_csv(frame), file_name=f"settings_by_dataset_{metric}.csv",
                       mime="text/csv", key="named_download")
    st.download_button("Named settings as JSON", json.dumps(saved(), indent=1, sort_keys=True, default=str),
                       file_name="vxmem_named_settings.json", mime="application/json", key="named_json")
