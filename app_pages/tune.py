"""Tune: sliders for the ranking parameters; metrics and rankings re-rank the cached pools live."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, shared
from vxmem import views
from vxmem.metrics import LOWER_IS_BETTER

st.title("Tune")
st.caption("Move a slider: the sweep engine re-ranks the candidate pools the replay cached "
           "(no re-embedding, no re-search), with the same functions `recall()` uses.")
key, convs, reps = shared.dataset()


@st.cache_data(show_spinner=False, max_entries=512)
def metrics(key: str, point: str, _reps):
    return views.point_metrics(_reps, json.loads(point))


@st.cache_data(show_spinner=False, max_entries=512)
def ranking(key: str, ri: int, probe: int, point: str, _reps):
    return views.ranking_at(_reps[ri], probe, json.loads(point))


@st.cache_data(show_spinner=False, max_entries=256)
def movement(key: str, point: str, vary: str, values: tuple, _reps):
    return views.rank_movement(_reps, json.loads(point), vary, list(values))


left, right = st.columns([1, 2], gap="large")
with left:
    params = shared.param_sliders("tune")
point = json.dumps(params, sort_keys=True)
now = metrics(key, point, reps)
base = metrics(key, json.dumps(views.DEFAULT_POINT, sort_keys=True), reps)

with right:
    cols = st.columns(4)
    for col, m in zip(cols, config.HEADLINE_METRICS):
        delta = now[m] - base[m]
        col.metric(config.METRIC_LABELS[m], f"{now[m]:.3f}", f"{delta:+.3f} vs default" if abs(delta) > 1e-12 else None,
                   delta_color="inverse" if m in LOWER_IS_BETTER else "normal")
    st.caption(f"Means over {int(now['probes'])} probes; k = limit = {params['limit']}.")
    ri, probe = shared.probe_picker(reps, key="tune_probe")
    st.markdown(f"**Ranking at these settings** for *{reps[ri].probes[probe]['query']}*")
    table = ranking(key, ri, probe, point, reps)
    marks = {True: "yes", False: ""}
    st.table(table[["rank", "label", "text", "kind", "relevant", "stale"]].replace(
        {"relevant": marks, "stale": marks}), hide_index=True)

st.subheader("How each probe's relevant memory moves in rank")
vary = st.selectbox("As this parameter moves (the others stay at the sliders)", list(config.PARAMS),
                    index=0, key="tune_vary", format_func=lambda k: config.PARAMS[k][0])
label, lo, hi, _, _ = config.PARAMS[vary]
lo = config.MIN_SWEPT_BUDGET if vary == "token_budget" else lo
values = tuple(views.param_values(vary, lo, hi, config.MOVEMENT_POINTS))
moves = movement(key, point, vary, values, reps)
changing = moves.groupby("probe_label")["rank"].transform(lambda r: r.fillna(-1).nunique() > 1)
shown = moves[changing] if changing.any() else moves
limit = int(hi) if vary == "limit" else params["limit"]  # a rank can only go down to the limit
shown = shown.assign(plotted=shown["rank"].fillna(limit + 1))
log = vary.endswith("half_life_days")
x = alt.X("value:Q", title=label, scale=alt.Scale(type="log" if log else "linear", domain=[values[0], values[-1]],
                                                   nice=False))
lines = alt.Chart(shown).mark_line(point=True).encode(
    x=x, y=alt.Y("plotted:Q", title=f"rank of first relevant memory ({limit + 1} = not recalled)",
                 scale=alt.Scale(reverse=True, domain=[1, limit + 1])),
    color=alt.Color("probe_label:N", title="probe"),
    tooltip=["probe_label", "value", "rank", "found"])
at = params[vary] or (config.MIN_SWEPT_BUDGET if vary == "token_budget" else 0)
rule = alt.Chart(pd.DataFrame({"value": [at]})).mark_rule(
    strokeDash=[4, 4]).encode(x="value:Q")
shared.chart(lines + rule)
st.caption(f"{shown['probe_label'].nunique()} of {moves['probe_label'].nunique()} probes with a relevant memory "
           "change rank over this range; the dashed line is the slider's value.")
