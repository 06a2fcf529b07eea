"""A/B: two parameter sets (or two policies, or two search modes) on the same probes, side by side."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config, kept, shared
from vxmem.workbench import views

st.title("A/B")
st.caption("A is the shared settings; B is set here. Every probe is ranked under both from the cached pools "
           "(another search mode replays the dataset once for B), with the change from A to B, wins, losses "
           "and ties, and the probes that changed most. The interval on the mean change is a paired bootstrap.")
result = shared.picked()


@st.cache_data(show_spinner=False, max_entries=128)
def compare(key_a: str, key_b: str, a: str, b: str, policy_a: str, policy_b: str, metric: str, _reps, _reps_b):
    return views.ab_frames(_reps, json.loads(a), json.loads(b), policy_a, policy_b, _reps_b, metric)


a = shared.settings()


def own_sliders(side: str, policy: str, cols) -> dict:
    """Sliders for the parameters ``policy`` has beyond the blend's (LangChain's decay rate, ...), at its defaults."""
    out = {}
    for j, (name, default) in enumerate(views.policy_params(policy).items()):
        if name in config.PARAMS:
            continue
        label, lo, hi, step, fmt = config.POLICY_PARAMS[name]
        out[name] = kept.widget(cols[j % 2].slider, f"{side}: {label}", key=f"ab_{side.lower()}_{name}",
                                default=float(default), min_value=lo, max_value=hi, step=step, format=fmt,
                                help=f"`{name}` of the {policy} policy: {views.policy_description(policy)}")
    return out


def ignored_note(side: str, policy: str, ignored: dict) -> None:
    """Say which of the side's sliders do nothing under its policy (as the Tune page says of an inert one)."""
    for name, why in ignored.items():
        st.caption(f":material/block: {side}'s **{config.PARAMS[name][0]}** has no effect here: {why}.")


left, right = st.columns(2, gap="large")
with left:
    st.markdown("**A: the shared settings**")
    # B's controls (and A's policy) keep their values across a visit to another page.
    policy_a = kept.widget(st.selectbox, "A's policy", key="ab_policy_a", default=config.POLICIES[0],
                           options=config.POLICIES)
    st.caption(", ".join(f"{config.PARAMS[k][0]} {a[k]:g}" for k in config.RANKING_PARAMS) + f"; mode {a['mode']}")
    own_a = own_sliders("A", policy_a, st.columns(2))
    ignored_note("A", policy_a, views.ignored_by(policy_a, a, config.RANKING_PARAMS))
with right:
    st.markdown("**B**")
    policy_b = kept.widget(st.selectbox, "B's policy", key="ab_policy_b", default=config.POLICIES[0],
                           options=config.POLICIES)
    mode_b = kept.widget(st.selectbox, "B's search mode", key="ab_mode_b", default=a["mode"], options=config.MODES)
    b: dict = {}
    cols = st.columns(2)
    b_starts = {}
    for name in config.RANKING_PARAMS:
        label, lo, hi, default, step = config.PARAMS[name]
        b_starts[name] = a[name]
        if name == "recency_weight":
            b_starts[name] = 0.0 if a[name] else default  # a first B worth comparing: recency off (or on)
    # A slider B's policy never reads is drawn greyed out (its value kept for when the policy changes back).
    b_ignored = views.ignored_by(policy_b, {**a, **{k: kept.value(f"ab_{k}", v) for k, v in b_starts.items()}},
                                 config.RANKING_PARAMS)
    for j, name in enumerate(config.RANKING_PARAMS):
        label, lo, hi, default, step = config.PARAMS[name]
        b[name] = kept.widget(cols[j % 2].slider, f"B: {label}", key=f"ab_{name}", default=b_starts[name],
                              min_value=lo, max_value=hi, step=step,
                              disabled=name in b_ignored and name not in views.policy_params(policy_b))
    b.update(own_sliders("B", policy_b, cols))
    ignored_note("B", policy_b, b_ignored)
metric = kept.widget(st.selectbox, "Compare on", key="ab_metric", default=next(iter(config.AB_METRICS)),
                     options=list(config.AB_METRICS), format_func=config.AB_METRICS.get)

a_point = {**views.point_of(a), **own_a}
b_settings = {**a, **b, "mode": mode_b}


def replayed_as(s: dict) -> dict:
    """How the settings ``s`` replay, but for the pool size (see views.replay_settings)."""
    return {k: v for k, v in views.replay_settings(s).items() if k != "pool_limit"}


# When B replays as A does (the same search mode...), one replay serves both sides, its pools recorded
# wide enough for B's limit too; otherwise B is replayed on its own.
one_replay = replayed_as(b_settings) == replayed_as(a)
key, convs, reps = shared.dataset(widest=b_settings["limit"] if one_replay else None)
reps_b = None
key_b = key
if not one_replay:
    reps_b = shared.replays_for(result["key"], tuple(convs), b_settings)
    key_b = shared.cache_key(result["key"], b_settings)
frame, summary = compare(key, key_b, json.dumps(a_point, sort_keys=True),
                         json.dumps({**views.point_of(b_settings), **b}, sort_keys=True), policy_a, policy_b, metric,
                         reps, reps_b)
sides = views.side_intervals(frame, metric).set_index("side")
cols = st.columns(6)
cols[0].metric("B wins", summary.wins)
cols[1].metric("B loses", summary.losses)
cols[2].metric("ties", summary.ties)
for col, side in zip(cols[3:5], ("a", "b")):
    r = sides.loc[side]
    col.metric(f"mean {side.upper()}", f"{r['mean']:.3f}", help=f"mean {config.AB_METRICS[metric]} under "
               f"{side.upper()}: {views.interval_text(r['mean'], r['lo'], r['hi'], int(r['probes']))}")
    col.caption(f"95% CI {r['lo']:.3f}-{r['hi']:.3f}, {int(r['probes'])} probes")
cols[5].metric("B - A", f"{summary.mean_delta:+.3f}",
               help=f"paired bootstrap 95% interval {summary.delta_lo:+.3f} to {summary.delta_hi:+.3f}")
cols[5].caption(f"95% CI {summary.delta_lo:+.3f} to {summary.delta_hi:+.3f}, {summary.scored} probes")
st.caption(f"{summary.scored} of {summary.probes} probes can be scored on {config.AB_METRICS[metric]}; mean change "
           f"{summary.mean_delta:+.3f}, 95% interval {summary.delta_lo:+.3f} to {summary.delta_hi:+.3f}"
           + (" (lower is better: B wins where it leaks less)." if metric == "stale_leak" else "."))
shared.sample_caveat(summary.scored)

dots = views.ab_points(frame, metric, lower_is_better=metric == "stale_leak")
if not dots.empty:
    # One dot per distinct (A, B) pair, its area the probes there: thirty ties at (1, 1) are one big dot
    # with its count, not thirty dots on top of each other.
    axis = alt.Axis(values=[0, 0.2, 0.4, 0.6, 0.8, 1.0], format=".1f")
    scale = alt.Scale(domain=[-0.05, 1.05], nice=False)
    enc = {"x": alt.X("a:Q", title=f"A: {config.AB_METRICS[metric]}", scale=scale, axis=axis),
           "y": alt.Y("b:Q", title=f"B: {config.AB_METRICS[metric]}", scale=scale, axis=axis)}
    scatter = alt.Chart(dots).mark_circle(opacity=0.6, stroke="white", strokeWidth=1).encode(
        # Legends below the chart: beside it, the size legend ran past the chart's foot and was cut off.
        **enc, color=alt.Color("outcome:N", title="probe", scale=alt.Scale(domain=["B worse", "tie", "B better"],
                                                                          range=["#e45756", "#9d9d9d", "#54a24b"]),
                               legend=alt.Legend(orient="bottom")),
        size=alt.Size("probes:Q", title="probes", scale=alt.Scale(range=[60, 1400]),
                      legend=alt.Legend(orient="bottom")),
        tooltip=shared.tips("outcome", "probes", "examples", alt.Tooltip("a:Q", format=".3f"),
                            alt.Tooltip("b:Q", format=".3f")))
    counts = alt.Chart(dots[dots["probes"] > 1]).mark_text(fontSize=11, fontWeight="bold", color="#222").encode(
        **enc, text=alt.Text("probes:Q"))
    diagonal = alt.Chart(pd.DataFrame({"v": [0.0, 1.0]})).mark_line(color="#bbbbbb", strokeDash=[4, 4]).encode(
        x=alt.X("v:Q"), y=alt.Y("v:Q"))
    shared.chart((diagonal + scatter + counts).properties(height=380))
    st.caption("Each dot is every probe with that pair of scores; its number and area say how many.")

st.subheader("The probes that changed most")
changed = summary.most_changed
if changed.empty:
    st.info("No probe changes between A and B.")
else:
    st.dataframe(changed[["conversation", "label", "query", "rank_a", "rank_b", "change", "ranked_a", "ranked_b"]],
                 hide_index=True, width="stretch", column_config={
                     "conversation": st.column_config.TextColumn(width=110),
                     "label": st.column_config.TextColumn(width=50),
                     "query": st.column_config.TextColumn(width=200),
                     "rank_a": st.column_config.NumberColumn(width=55),
                     "rank_b": st.column_config.NumberColumn(width=55),
                     "change": st.column_config.NumberColumn(f"{metric} change", format="%+.3f", width=85),
                     "ranked_a": st.column_config.ListColumn("A ranked", width=145),
                     "ranked_b": st.column_config.ListColumn("B ranked", width=145)})
with st.expander("Every probe, A beside B"):
    st.dataframe(frame.drop(columns=["ranked_a", "ranked_b"]), hide_index=True, width="stretch",
                 column_config={"query": st.column_config.TextColumn(width="medium")})
