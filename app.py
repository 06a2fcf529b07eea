"""vxmem workbench: watch recall change as half-life and weights move.

    streamlit run app.py        (or: make app)

Six pages, each a thin script in app_pages/: every number and chart comes from a
DataFrame that vxmem returned (vxmem.views reshapes them; no ranking happens here). What the
pages offer (slider ranges, labels, the playground's seed) is in app_pages/config.py.
"""

from __future__ import annotations

import streamlit as st

from app_pages import shared

st.set_page_config(page_title="vxmem workbench", page_icon=":material/memory:", layout="wide")

pages = [
    st.Page("app_pages/playground.py", title="Playground", icon=":material/edit_note:", default=True),
    st.Page("app_pages/replay.py", title="Replay", icon=":material/timeline:", url_path="replay"),
    st.Page("app_pages/tune.py", title="Tune", icon=":material/tune:", url_path="tune"),
    st.Page("app_pages/sweep.py", title="Sweep", icon=":material/grid_on:", url_path="sweep"),
    st.Page("app_pages/budget.py", title="Budget", icon=":material/stacked_bar_chart:", url_path="budget"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
]
page = st.navigation(pages)
# The dataset picker lives here, in the entrypoint, so the choice survives switching pages.
shared.dataset_sidebar(show=page.title != "Playground")
page.run()
