"""Sweep: two parameters over ranges, a heatmap of one metric, best and default points marked
(the best, optionally, only among the points that keep a bound on another metric), the trade-off
between nDCG, stale-leak and context tokens, and the best point tuned on some probes and reported
on the others."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, kept, named, shared
from vxmem.workbench import views
from vxmem.workbench.analysis.metrics import LOWER_IS_BETTER
from vxmem.workbench.views import cost_charts

st.title("Sweep")
st.caption("Every point of the grid re-ranks every probe's cached pool; the other parameters stay at "
           "the shared settings.")
shared.picked()  # the controls below need no replay; the replay (its pools as wide as the limits swept) follows


@st.cache_data(show_spinner=False, max_entries=128)
def grid(key: str, x: str, xv: tuple, y: str, yv: tuple, fixed: str, _reps):
    return views.sweep_grid(_reps, x, list(xv), y, list(yv), json.loads(fixed))


@st.cache_data(show_spinner=False, max_entries=64)
def holdout(key: str, x: str, xv: tuple, y: str, yv: tuple, fixed: str, metric: str, bounds: tuple, _reps):
    return views.sweep_holdout(_reps, x, list(xv), y, list(yv), json.loads(fixed), metric,
                               subject_to=[views.Constraint(*b) for b in bounds])


def title(name: str) -> str:
    return config.PARAMS[name][0]


# The controls keep their values across a visit to another page.
names = list(config.PARAMS)
c1, c2, c3 = st.columns(3)
x = kept.widget(c1.selectbox, "x axis", key="sweep_x", default=names[0], options=names, format_func=title)
others = [n for n in names if n != x]
y = kept.widget(c2.selectbox, "y axis", key="sweep_y", default=others[0], options=others, format_func=title)
metric = kept.widget(c3.selectbox, "metric", key="sweep_metric", default=config.PICK_METRICS[0],
                     options=config.PICK_METRICS, format_func=lambda m: config.METRIC_LABELS[m])
fixed = shared.point()


def bound_label(m: str) -> str:
    if m == "none":
        return "nothing else"
    return f"{config.METRIC_LABELS[m]} {'≤' if m in LOWER_IS_BETTER else '≥'}"


b1, b2, _ = st.columns(3)
bounded = kept.widget(b1.selectbox, "best subject to", key="sweep_bound",
                      default="none", options=["none", *(m for m in config.PICK_METRICS if m != metric)],
                      format_func=bound_label,
                      help="Pick the best point only among the points that keep a bound on another metric: "
                           "the best nDCG with stale-leak at most 0.1, say.")
bound = kept.widget(b2.number_input, "bound", key="sweep_bound_value", default=0.1, min_value=0.0,
                    max_value=1.0, step=0.05, format="%.2f", disabled=bounded == "none")
subject_to = [] if bounded == "none" else [
    views.Constraint(bounded, "<=" if bounded in LOWER_IS_BETTER else ">=", float(bound))]


def axis_values(col, name):
    label, lo, hi, default, step = config.PARAMS[name]
    lo_v = config.MIN_SWEPT_BUDGET if name == "token_budget" else lo
    lo_steps, hi_steps, default_steps = config.SWEEP_STEPS
    with col:
        rng = kept.widget(st.slider, f"{label} range", key=f"sweep_range_{name}", min_value=lo_v, max_value=hi,
                          default=(lo_v if not name.endswith("half_life_days") else 1.0, hi), step=step)
        n = kept.widget(st.slider, f"{label} steps", key=f"sweep_steps_{name}", default=default_steps,
                        min_value=lo_steps, max_value=hi_steps)
    vals = views.param_values(name, rng[0], rng[1], n)
    current = fixed[name] or (0 if name == "token_budget" else None)
    if current and rng[0] <= current <= rng[1] and current not in vals:
        vals = sorted(vals + [current])  # so the current point is on the grid
    return vals


c1, c2 = st.columns(2)
xv = axis_values(c1, x)
yv = axis_values(c2, y)
# A swept limit needs pools recorded for the largest limit on the grid.
swept_limits = [int(v) for name, vals in ((x, xv), (y, yv)) if name == "limit" for v in vals]
key, convs, reps = shared.dataset(widest=max(swept_limits, default=None))
fixed_json = json.dumps(fixed, sort_keys=True)
try:
    frame = grid(key, x, tuple(xv), y, tuple(yv), fixed_json, reps)
except ValueError as exc:  # e.g. a limit a hybrid replay's pools cannot serve
    st.info(f"Cannot sweep these axes here: {exc}")
    st.stop()
try:
    pick = views.pick_best(frame, metric, (x, y), fixed, config.DEFAULT_SETTINGS, subject_to=subject_to)
except ValueError as exc:  # no point keeps the bound: say how close the grid came, pick without it
    st.warning(f"{str(exc)[:1].upper()}{str(exc)[1:]}: the best point below ignores the bound. Loosen it or "
               "widen the ranges.")
    subject_to = []
    pick = views.pick_best(frame, metric, (x, y), fixed, config.DEFAULT_SETTINGS)
best = pick.row
current = frame[(frame[x] == (fixed[x] or 0)) & (frame[y] == (fixed[y] or 0))]

lower = metric in LOWER_IS_BETTER
flat = views.is_flat(frame[metric])  # one value everywhere (no stale memory to leak, say): no map to read
lo_m, hi_m = float(frame[metric].min()), float(frame[metric].max())
mid = (lo_m + hi_m) / 2
frame = frame.assign(light=(frame[metric] <= mid) if lower else (frame[metric] >= mid))  # viridis: yellow is light
axis = alt.Axis(format=".4~r", labelAngle=0)  # 1150, 0.5, 2.828: no "1.15e+3"
heat = alt.Chart(frame).mark_rect().encode(
    x=alt.X(f"{x}:O", title=title(x), axis=axis),
    y=alt.Y(f"{y}:O", title=title(y), sort="descending", axis=alt.Axis(format=".4~r")),
    color=alt.Color(f"{metric}:Q", title=config.METRIC_LABELS[metric],
                    scale=alt.Scale(scheme="viridis", reverse=lower)),
    tooltip=shared.tips(x, y, alt.Tooltip(f"{metric}:Q", format=".3f"), alt.Tooltip("tokens:Q", format=".1f"),
                        "probes"))
text = alt.Chart(frame).mark_text(fontSize=11).encode(
    x=alt.X(f"{x}:O"), y=alt.Y(f"{y}:O", sort="descending"), text=alt.Text(f"{metric}:Q", format=".2f"),
    color=alt.ColorValue(value="white", condition={"test": "datum.light", "value": "black"}))
# Numbers, not the object dtype a transposed row has, so each mark lands on its cell's value.
marks = pd.concat([best.to_frame().T.assign(point="best"), current.assign(point="current")])[[x, y, "point"]]
marks = marks.astype({x: float, y: float})
# An outline around the cell, so the marker never hides the number in it; one legend for it. Where the best
# point is the current one, the best's thick red outline stays visible round the current's dashed black one
# (drawn after it), instead of the one hiding the other; the legend names only what is drawn.
shown_marks = [p for p in ("best", "current") if p in set(marks["point"])]
kinds = {"best": ("#ff2b2b", [1, 0], 6), "current": ("#111111", [4, 2], 3)}


def marked(channel, i: int):
    return channel("point:N", title="marked", scale=alt.Scale(domain=shown_marks,
                                                              range=[kinds[p][i] for p in shown_marks]))


outline = alt.Chart(marks).mark_rect(fill=None).encode(
    x=alt.X(f"{x}:O"), y=alt.Y(f"{y}:O", sort="descending"), stroke=marked(alt.Stroke, 0),
    strokeDash=marked(alt.StrokeDash, 1), strokeWidth=marked(alt.StrokeWidth, 2),
    order=alt.Order("order:Q"))
outline = outline.transform_calculate(order="datum.point == 'best' ? 0 : 1")
if current.empty:
    st.caption("The current settings are not on this grid (outside the ranges above): no cell is outlined as "
               "current.")
if flat:
    st.info(f"{config.METRIC_LABELS[metric]} is {lo_m:.3f} at every point of this grid: the map would be one "
            "colour. Pick another metric, or a dataset where it moves.")
else:
    layers = heat + text + outline
    on_grid = named.on_grid(frame, x, y)
    if len(on_grid):  # the named settings where they sit on this grid, their names above the cell's number
        layers += alt.Chart(on_grid).mark_text(dy=-13, fontSize=10, fontWeight="bold", color="#e45756").encode(
            x=alt.X(f"{x}:O"), y=alt.Y(f"{y}:O", sort="descending"), text=alt.Text("name:N"),
            tooltip=shared.tips("name", x, y))
    shared.chart(layers.properties(height=420))
    if len(on_grid):
        st.caption("Named settings (saved on the Tune page) are written above their cells in red.")


def ci_of(row: pd.Series) -> str:
    return f"95% CI {row[f'{metric}_lo']:.3f}-{row[f'{metric}_hi']:.3f}, {int(row[f'{metric}_probes'])} probes"


cols = st.columns(4)
cols[0].metric(f"best {config.METRIC_LABELS[metric]}", f"{best[metric]:.3f}", help=ci_of(best))
cols[0].caption(ci_of(best))
cols[1].metric(f"current {config.METRIC_LABELS[metric]}", f"{current[metric].iloc[0]:.3f}" if len(current) else "n/a")
if len(current):
    cols[1].caption(ci_of(current.iloc[0]))
chosen = ", ".join(f"{title(k)} = {v:g}" for k, v in pick.values.items())
cols[2].markdown(f"**best point**: {chosen}" if chosen else "**best point**: the current settings")


def use_best() -> None:
    shared.apply_settings(pick.values)


cols[3].button("Use the best point", on_click=use_best, key="sweep_use_best", type="primary",
               help="Makes it the shared settings of every page (and the URL).")
for note in pick.notes:
    st.caption(f":material/info: {note}.")
shared.sample_caveat(int(best[f"{metric}_probes"]))
st.download_button("Download the sweep as CSV", views.to_csv(frame.drop(columns=["light"])),
                   file_name=f"sweep_{x}_{y}.csv", mime="text/csv", key="sweep_download")

st.subheader("Trade-offs: nDCG against stale-leak against context tokens")
pareto = views.pareto_points(frame)
pareto = pareto.assign(front=cost_charts.front_words(pareto["pareto"]))  # the legend in words, not true/false
front = pareto[pareto["pareto"]]
no_leak = views.is_flat(pareto["stale_leak"])  # one colour for every point says nothing: no colour scale then
scatter = alt.Chart(pareto).mark_circle(opacity=0.6).encode(
    x=alt.X("tokens:Q", title="context tokens shipped per probe (mean)", scale=alt.Scale(zero=False)),
    y=alt.Y("ndcg:Q", title="nDCG@k", scale=alt.Scale(zero=False)),
    # Both legends below the chart: stacked beside it, the second ran past the chart's foot and was cut off.
    color=alt.ColorValue("#4c78a8") if no_leak else alt.Color("stale_leak:Q", title="stale-leak@k",
                                                               scale=alt.Scale(scheme="orangered"),
                                                               legend=alt.Legend(orient="bottom")),
    size=alt.Size("front:N", scale=alt.Scale(domain=["behind it", "on the front"], range=[40, 160]),
                  title="Pareto front", legend=alt.Legend(orient="bottom")),
    tooltip=shared.tips(x, y, alt.Tooltip("ndcg:Q", format=".3f"), alt.Tooltip("stale_leak:Q", format=".3f"),
                        alt.Tooltip("tokens:Q", format=".1f")))
if views.is_flat(pareto["ndcg"]) and views.is_flat(pareto["tokens"]):
    st.info("Every point of this grid has the same nDCG and the same tokens: no trade-off to draw.")
else:
    shared.chart(scatter.properties(height=320))
if no_leak:
    st.caption(f"stale-leak@k is {pareto['stale_leak'].iloc[0]:.3f} at every point, so the dots are not coloured "
               "by it.")
st.caption(f"{len(front)} of {len(pareto)} points are on the Pareto front: no other point has at least their "
           "nDCG, at most their stale-leak and at most their tokens, and is better on one. There is no single best "
           "point without saying which you care about.")
with st.expander("The points on the front"):
    st.dataframe(front.sort_values("ndcg", ascending=False)[[x, y, "ndcg", "ndcg_lo", "ndcg_hi", "stale_leak",
                                                             "tokens", "mrr", "hit", "ndcg_probes"]],
                 hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.3f")
                                for c in ("ndcg", "ndcg_lo", "ndcg_hi", "stale_leak", "mrr", "hit")})

st.subheader("Honest tuning: best on tune probes, reported on held-out ones")
n_probes = sum(r.n_probes for r in reps)
if n_probes < 2:
    st.info("A tune/holdout split needs at least two probes.")
else:
    try:
        tuned = holdout(key, x, tuple(xv), y, tuple(yv), fixed_json, metric,
                        tuple((c.metric, c.op, c.value) for c in subject_to), reps)
    except ValueError as exc:
        st.info(f"No tune/holdout report: {exc}")
    else:
        b = ", ".join(f"{title(k)} = {v:g}" for k, v in tuned.best.items() if k in (x, y))
        kept_bounds = "".join(f", keeping {bound_label(c.metric)} {c.value:g} there" for c in subject_to)
        st.markdown(f"Chosen on the tune probes alone{kept_bounds}: **{b}**.")
        rep_frame = tuned.report.assign(metric=tuned.report["metric"].map(config.METRIC_LABELS))
        st.dataframe(rep_frame, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("mean", "lo", "hi")})
        st.caption("The holdout row is the honest estimate; the tune row is optimistic by construction. Intervals: "
                   "bootstrap 95%.")
        shared.sample_caveat(int(tuned.report["probes"].min()))
with st.expander("Top points"):
    top = frame.sort_values(metric, ascending=lower).head(10)
    st.dataframe(top[[x, y, metric, f"{metric}_lo", f"{metric}_hi", f"{metric}_probes", "tokens"]], hide_index=True,
                 width="stretch", column_config={c: st.column_config.NumberColumn(format="%.3f")
                                                 for c in (metric, f"{metric}_lo", f"{metric}_hi")})
