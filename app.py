"""vxmem workbench: watch recall change as half-life and weights move.

    streamlit run app.py        (or: make app, which prints the URL to open)

Nine pages, each a thin script in app_pages/: every number and chart comes from a
DataFrame that vxmem returned (vxmem.workbench.views reshapes them; no ranking happens here). One
parameter state is shared by every page and mirrored in the URL (app_pages/shared.py);
what the pages offer (slider ranges, labels, the playground's seed) is in app_pages/config.py.
"""

from __future__ import annotations

import streamlit as st

from app_pages import config, shared

st.set_page_config(page_title="vxmem workbench", page_icon=str(config.ICON), layout="wide")

pages = [
    st.Page("app_pages/playground.py", title="Playground", icon=":material/edit_note:", default=True),
    st.Page("app_pages/replay.py", title="Replay", icon=":material/timeline:", url_path="replay"),
    st.Page("app_pages/tune.py", title="Tune", icon=":material/tune:", url_path="tune"),
    st.Page("app_pages/sweep.py", title="Sweep", icon=":material/grid_on:", url_path="sweep"),
    st.Page("app_pages/ab.py", title="A/B", icon=":material/difference:", url_path="ab"),
    st.Page("app_pages/budget.py", title="Budget", icon=":material/stacked_bar_chart:", url_path="budget"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("app_pages/importer.py", title="Import", icon=":material/upload_file:", url_path="import"),
    st.Page("app_pages/qa.py", title="QA", icon=":material/quiz:", url_path="qa"),
]
page = st.navigation(pages)
# The state and the dataset picker live here, in the entrypoint, so they survive switching pages;
# the URL is written before the page runs (widget callbacks have already updated the state).
shared.check_session()
shared.init_settings()
shared.dataset_sidebar(show=page.title not in ("Playground", "Import"))
shared.settings_sidebar()
shared.show_problems()
shared.publish_settings()
try:
    page.run()
except Exception as exc:  # noqa: BLE001 - one line on the page (the traceback goes to the server log)
    shared.page_failed(page.title, exc)
