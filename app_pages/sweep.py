"""Sweep: two parameters over ranges, a heatmap of one metric, best and default points marked."""

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, shared
from vxmem import views
from vxmem.metrics import LOWER_IS_BETTER

st.title("Sweep")
st.caption("Every point of the grid re-ranks every probe's cached pool; the other parameters stay at "
           "the memory's defaults.")
key, convs, reps = shared.dataset()


@st.cache_data(show_spinner=False, max_entries=128)
def grid(key: str, x: str, xv: tuple, y: str, yv: tuple, _reps):
    return views.sweep_grid(_reps, x, list(xv), y, list(yv), views.DEFAULT_POINT)


def title(name: str) -> str:
    return config.PARAMS[name][0]


names = list(config.PARAMS)
c1, c2, c3 = st.columns(3)
x = c1.selectbox("x axis", names, index=0, key="sweep_x", format_func=title)
y = c2.selectbox("y axis", [n for n in names if n != x], index=0, key="sweep_y", format_func=title)
metric = c3.selectbox("metric", config.PICK_METRICS, key="sweep_metric",
                      format_func=lambda m: config.METRIC_LABELS[m])


def axis_values(col, name):
    label, lo, hi, default, step = config.PARAMS[name]
    lo_v = config.MIN_SWEPT_BUDGET if name == "token_budget" else lo
    lo_steps, hi_steps, default_steps = config.SWEEP_STEPS
    with col:
        rng = st.slider(f"{label} range", lo_v, hi, (lo_v if not name.endswith("half_life_days") else 1.0, hi),
                        step, key=f"sweep_range_{name}")
        n = st.slider(f"{label} steps", lo_steps, hi_steps, default_steps, key=f"sweep_steps_{name}")
    vals = views.param_values(name, rng[0], rng[1], n)
    if default and rng[0] <= default <= rng[1] and default not in vals:
        vals = sorted(vals + [default])  # so the default point is on the grid
    return vals


c1, c2 = st.columns(2)
xv = axis_values(c1, x)
yv = axis_values(c2, y)
with st.spinner(f"Sweeping {len(xv) * len(yv)} points..."):
    frame = grid(key, x, tuple(xv), y, tuple(yv), reps)
best = views.best_row(frame, metric)
default = frame[(frame[x] == (views.DEFAULT_POINT[x] or 0)) & (frame[y] == (views.DEFAULT_POINT[y] or 0))]

heat = alt.Chart(frame).mark_rect().encode(
    x=alt.X(f"{x}:O", title=title(x), axis=alt.Axis(format=".3~g")),
    y=alt.Y(f"{y}:O", title=title(y), sort="descending", axis=alt.Axis(format=".3~g")),
    color=alt.Color(f"{metric}:Q", title=config.METRIC_LABELS[metric],
                    scale=alt.Scale(scheme="viridis", reverse=metric in LOWER_IS_BETTER)),
    tooltip=[x, y, alt.Tooltip(f"{metric}:Q", format=".3f"), "probes"])
text = alt.Chart(frame).mark_text(fontSize=10).encode(
    x=f"{x}:O", y=alt.Y(f"{y}:O", sort="descending"), text=alt.Text(f"{metric}:Q", format=".2f"),
    color=alt.value("white"))
marks = pd.concat([best.to_frame().T.assign(point="best"), default.assign(point="default")])
marker = alt.Chart(marks).mark_point(size=500, strokeWidth=3, filled=False).encode(
    x=f"{x}:O", y=alt.Y(f"{y}:O", sort="descending"),
    shape=alt.Shape("point:N", scale=alt.Scale(domain=["best", "default"], range=["diamond", "circle"]),
                    title="marked"),
    color=alt.Color("point:N", scale=alt.Scale(domain=["best", "default"], range=["#ff4b4b", "#ffffff"]),
                    title="marked"))
shared.chart((heat + text + marker).resolve_scale(color="independent").properties(height=420))

cols = st.columns(3)
cols[0].metric(f"best {config.METRIC_LABELS[metric]}", f"{best[metric]:.3f}")
cols[1].metric(f"default {config.METRIC_LABELS[metric]}", f"{default[metric].iloc[0]:.3f}" if len(default) else "n/a")
cols[2].markdown(f"**best point**: {title(x)} = {best[x]:g}, {title(y)} = {best[y]:g}")
st.download_button("Download the sweep as CSV", views.to_csv(frame), file_name=f"sweep_{x}_{y}.csv", mime="text/csv",
                   key="sweep_download")
with st.expander("Top points"):
    st.dataframe(frame.sort_values(metric, ascending=metric in LOWER_IS_BETTER).head(10), hide_index=True,
                 width="stretch")
