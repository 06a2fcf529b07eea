"""Tune: sliders for the ranking parameters; metrics and rankings re-rank the cached pools live."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, kept, named, shared
from vxmem.workbench import views
from vxmem.workbench.analysis.metrics import LOWER_IS_BETTER

st.title("Tune")
st.caption("Move a slider: the sweep engine re-ranks the candidate pools the replay cached "
           "(no re-embedding, no re-search), with the same functions `recall()` uses. Intervals are "
           "bootstrap 95% intervals over the probes; the holdout probes (a share of the conversations, or "
           "of the probes when there is one conversation) show how a setting tuned here would generalise.")


def varied(name: str) -> tuple[str, tuple]:
    """The label of the parameter the rank-movement chart varies, and the values it takes."""
    label, lo, hi, _, _ = config.PARAMS[name]
    lo = config.MIN_SWEPT_BUDGET if name == "token_budget" else lo
    return label, tuple(views.param_values(name, lo, hi, config.MOVEMENT_POINTS))


# The chart at the bottom may vary the limit: then the pools are recorded for its largest value.
VARY = list(config.PARAMS)
limits = varied("limit")[1]
key, convs, reps = shared.dataset(widest=int(max(limits)) if kept.value("tune_vary", VARY[0]) == "limit" else None)


@st.cache_data(show_spinner=False, max_entries=512)
def report(key: str, point: str, _reps):
    return views.point_report(_reps, json.loads(point))


@st.cache_data(show_spinner=False, max_entries=512)
def explain(key: str, ri: int, probe: int, point: str, _rep, _conv):
    return views.explain(_rep, probe, json.loads(point), _conv)


@st.cache_data(show_spinner=False, max_entries=256)
def movement(key: str, point: str, vary: str, values: tuple, _reps):
    return views.rank_movement(_reps, json.loads(point), vary, list(values))


@st.cache_data(show_spinner=False, max_entries=256)
def stale_above(key: str, point: str, _reps):
    return views.stale_above_at(_reps, json.loads(point))


left, right = st.columns([1, 3], gap="large")
with left:
    params = shared.param_sliders()
    inert = views.inert_at(reps, shared.settings())
    for name, why in inert.items():
        if name in config.PARAMS:  # (the hybrid weight is flagged only outside hybrid mode, where it is hidden)
            st.caption(f":material/block: **{config.PARAMS[name][0]}** has no effect here: {why}.")
point_dict = shared.point()
point = json.dumps(point_dict, sort_keys=True)
now = report(key, point, reps)
# the library's defaults (a reranked replay keeps the hybrid weight its pools were reranked at)
hybrid_point = reps[0].mode == "hybrid" and reps[0].rerank is None
base = report(key, json.dumps(views.point_of(config.DEFAULT_SETTINGS, hybrid_point), sort_keys=True), reps)


def value(frame: pd.DataFrame, metric: str, subset: str = "all") -> pd.Series:
    return frame[(frame["metric"] == metric) & (frame["subset"] == subset)].iloc[0]


with right:
    cols = st.columns(4)
    for col, m in zip(cols, config.HEADLINE_METRICS):
        v, b = value(now, m), value(base, m)
        delta = v["mean"] - b["mean"]
        col.metric(config.METRIC_LABELS[m], f"{v['mean']:.3f}",
                   f"{delta:+.3f} vs default" if abs(delta) > 1e-12 else None,
                   delta_color="inverse" if m in LOWER_IS_BETTER else "normal",
                   help=f"95% interval {v['lo']:.3f} to {v['hi']:.3f} over {int(v['probes'])} probes")
        col.caption(f"95% CI {v['lo']:.3f}-{v['hi']:.3f}, {int(v['probes'])} probes")
    rate, pairs = stale_above(key, point, reps)
    n_probes = int(value(now, "hit")["probes"])
    st.caption(f"Means over {n_probes} probes; k = limit = {params['limit']}. Stale ranked above its "
               f"replacement: {'n/a' if pd.isna(rate) else f'{rate:.0%}'} of {pairs} ranked (stale, relevant) "
               "pairs.")
    shared.sample_caveat(n_probes)
    named.here_overlay(key, reps)
    split = now[now["subset"] != "all"]
    if not split.empty:
        with st.expander("Tune and holdout probes, with intervals"):
            shown = split.assign(metric=split["metric"].map(config.METRIC_LABELS))
            st.dataframe(shown, hide_index=True, width="stretch",
                         column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("mean", "lo", "hi")})
            shared.sample_caveat(int(split["probes"].min()))
    ri, probe = shared.probe_picker(reps, key="tune_probe")
    st.markdown(f"**Ranking at these settings** for {views.plain(reps[ri].probes[probe]['query'], 300)}")
    conv = convs[ri] if len(convs) == len(reps) else None
    why = explain(key, ri, probe, point, reps[ri], conv)
    table = views.returned(why)
    shown = table.assign(mark=[("relevant" if r else "") + (" stale" if s else "") for r, s in
                               zip(table["relevant"], table["stale"])])
    shown = shown[["rank", "label", "text", "mark", "score", "relevance", "relevance_norm", "recency", "feedback"]]
    st.table(shown.rename(columns={"relevance": "relevance (raw)", "relevance_norm": "rel. norm"}).style.format(
        {c: "{:.3f}" for c in ("score", "relevance (raw)", "rel. norm", "recency", "feedback")}), hide_index=True)
    best = why["relevance"].max() if why["relevance"].notna().any() else None
    shared.relevance_warning(best, reps[ri].meta.get("low_relevance"), reps[ri].mode, reps[ri].rerank,
                             views.replay_match_probability(reps[ri], probe, point_dict["limit"]), table)
    shared.score_bars(table, shared.settings())
    with st.expander("Why (not) recalled: every memory of this probe"):
        shared.why_table(why, key="tune_why")

named.named_section()

st.subheader("How each probe's relevant memory moves in rank")
vary = kept.widget(st.selectbox, "As this parameter moves (the others stay at the sliders)", key="tune_vary",
                   default=VARY[0], options=VARY, format_func=lambda k: config.PARAMS[k][0])
label, values = varied(vary)
try:
    moves = movement(key, point, vary, values, reps)
except ValueError as exc:  # e.g. a limit a hybrid replay's pools cannot serve
    st.info(f"Cannot vary {label} here: {exc}")
    st.stop()
total = moves["probe_label"].nunique()
moving = moves[moves["moves"]]
n_moving = moving["probe_label"].nunique()
if n_moving == 0:
    st.info(f"None of the {total} probes with a relevant memory changes rank as {label} moves over "
            f"{values[0]:g}-{values[-1]:g}" + (f": {inert[vary]}." if vary in inert else "."))
else:
    swing = moving.groupby("probe_label", observed=True)["rank"].agg(lambda r: r.fillna(99).max() - r.fillna(99).min())
    order = swing.sort_values(ascending=False, kind="stable").index.tolist()
    picked = st.multiselect(f"Probes drawn in colour (up to 20; the {config.MOVEMENT_HIGHLIGHT} that move most "
                            "first)", order, default=order[:config.MOVEMENT_HIGHLIGHT], max_selections=20,
                            key=f"tune_picked:{key}:{vary}")  # a new dataset or parameter: a new choice
    limit = int(max(values)) if vary == "limit" else params["limit"]  # a rank can only go down to the limit
    shown = moving.assign(plotted=moving["rank"].fillna(limit + 1), picked=moving["probe_label"].isin(picked))
    log = vary.endswith("half_life_days")
    x = alt.X("value:Q", title=label, scale=alt.Scale(type="log" if log else "linear",
                                                      domain=[values[0], values[-1]], nice=False))
    y = alt.Y("plotted:Q", title=f"rank of first relevant memory ({limit + 1} = not recalled)",
              scale=alt.Scale(reverse=True, domain=[1, limit + 1]))
    grey = alt.Chart(shown[~shown["picked"]]).mark_line(color="#d0d0d0", strokeWidth=1).encode(
        x=x, y=y, detail=alt.Detail("probe_label:N"), tooltip=shared.tips("probe_label", "value", "rank", "found"))
    lines = alt.Chart(shown[shown["picked"]]).mark_line(point=True).encode(
        x=x, y=y, color=alt.Color("probe_label:N", title="probe", sort=picked,
                                  scale=alt.Scale(scheme=config.CATEGORY_COLOURS),
                                  legend=alt.Legend(orient="right", symbolLimit=0, labelLimit=260)),
        tooltip=shared.tips("probe_label", "value", "rank", "found"))
    at = params[vary] or (config.MIN_SWEPT_BUDGET if vary == "token_budget" else 0)
    rule = alt.Chart(pd.DataFrame({"value": [at]})).mark_rule(strokeDash=[4, 4]).encode(x=alt.X("value:Q"))
    shared.chart((grey + lines + rule).properties(height=360))
    st.caption(f"{n_moving} of {total} probes with a relevant memory change rank over this range "
               f"({len(picked)} in colour, the rest grey); the dashed line is the slider's value.")
