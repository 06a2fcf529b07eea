"""Budget: context() under a token budget: pinned, recent and recalled tokens, what was cut, the text."""

import altair as alt
import streamlit as st

from app_pages import config, kept, shared
from vxmem.workbench import views

st.title("Budget")
st.caption("`context()` at a probe of the dataset: pinned facts first (never cut), then the most recent turns "
           "(oldest cut first), then recalled memories in the tokens that remain. The conversation is replayed "
           "once per settings and `recent_turns`, every probe and budget assembled on the way. The "
           "`pinned_profile` dataset holds pinned facts.")
key, convs, reps = shared.dataset()

ri, probe = shared.probe_picker(reps, key="budget_probe")
c1, c2 = st.columns([3, 1])
# Both keep their values across a visit to another page.
budget = kept.widget(c1.select_slider, "token_budget", key="budget_tokens", default=config.DEFAULT_BUDGET,
                     options=config.BUDGETS)
recent = int(kept.widget(c2.number_input, "recent_turns", key="budget_recent", default=config.DEFAULT_RECENT_TURNS,
                         min_value=0, max_value=20))
s = dict(shared.settings())
conv = convs[ri]
ckey = ("budget", key, ri, recent, views.settings_json({k: s[k] for k in views.SETTINGS_KEYS}), tuple(config.BUDGETS))
every = shared.cached(ckey, f"Assembling the context at every probe of {conv.name}...",
                      lambda progress: views.budget_replay(conv, config.BUDGETS, s, recent,
                                                           views.embedder_for(s["embedder"]), progress))
out = every[probe]

st.markdown(f"**Query** {views.plain(out['query'], 300)} ({views.plain(views.session_text(out['session']))})")
note = out["notes"].set_index("budget").loc[budget]
cols = st.columns(4)
cols[0].metric("tokens used", f"{int(note['tokens_used'])} / {budget}")
for col, name in zip(cols[1:], ("pinned", "recent", "recalled")):
    sec = out["sections"]
    col.metric(f"{name} tokens", int(sec[(sec["budget"] == budget) & (sec["section"] == name)]["tokens"].iloc[0]))
if note["over_budget"]:
    st.warning(note["note"])

sections = out["sections"].assign(selected=lambda f: f["budget"] == budget)
bars = alt.Chart(sections).mark_bar().encode(
    x=alt.X("budget:O", title="token budget", axis=alt.Axis(labelAngle=0)), y=alt.Y("tokens:Q", title="tokens used"),
    color=alt.Color("section:N", sort=["pinned", "recent", "recalled"], title="section",
                    scale=alt.Scale(domain=["pinned", "recent", "recalled"], range=["#4c78a8", "#f58518", "#54a24b"])),
    order=alt.Order("section_order:Q"),
    opacity=alt.OpacityValue(value=0.35, condition={"test": "datum.selected", "value": 1.0}),
    tooltip=shared.tips("budget", "section", "tokens"))
shared.chart(bars.transform_calculate(
    section_order="indexof(['pinned', 'recent', 'recalled'], datum.section)").properties(height=300))

left, right = st.columns(2)
with left:
    st.markdown(f"**Cut at {budget} tokens** (shipped at the largest budget, left out here): "
                f"{int(note['cut_recent'])} recent turns, {int(note['cut_recalled'])} recalled memories")
    items = out["items"]
    if items.empty:
        st.info("Nothing to ship at this probe.")
    else:
        cut = items[~items[str(budget)].astype(bool)][["section", "text"]]
        if cut.empty:
            st.success("Nothing was cut.")
        else:
            st.dataframe(cut, hide_index=True, width="stretch",
                         column_config={"section": st.column_config.TextColumn(width=70),
                                        "text": st.column_config.TextColumn(width=340)})
with right:
    st.markdown("**The assembled text**")
    st.code(out["texts"][budget] or "(empty)", language=None, wrap_lines=True)
