"""The sidebar's dataset upload, kept in the session so it outlives a visit to another page.

Streamlit drops an uploader's file on a page that does not draw it (the Playground and Import
do not draw the dataset picker), so the uploader's callback keeps the file, its name and bytes,
under :data:`UPLOAD`; the format picked beside it is a kept widget (:mod:`app_pages.kept`).
Removing the file from the uploader forgets it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

from app_pages import config, kept
from vxmem.workbench import views
from vxmem.workbench.datasets import Conversation, DatasetError

UPLOAD = "upload_kept"  # {"name": str, "data": bytes}
KEY = "dataset_upload"


@st.cache_data(show_spinner=False, max_entries=8)
def load_uploaded(name: str, data: bytes, fmt: str | None) -> list[Conversation]:
    return views.load_bytes(name, data, fmt)


def _keep() -> None:
    """The uploader's callback: a new file is kept; a removed one is forgotten."""
    up = st.session_state.get(KEY)
    if up is None:
        st.session_state.pop(UPLOAD, None)
    else:
        st.session_state[UPLOAD] = {"name": up.name, "data": up.getvalue()}


def dataset_upload(result: dict[str, Any]) -> None:
    """The uploader and its format, and the file uploaded (now or before a visit to another page)
    loaded into ``result`` (``shared.dataset_sidebar``'s): its conversations, key and label, or an error."""
    st.file_uploader(config.UPLOAD_LABEL, type=config.UPLOAD_TYPES, key=KEY, on_change=_keep)
    formats = list(config.FORMAT_CHOICES)
    fmt = config.FORMAT_CHOICES[kept.widget(st.selectbox, "Format", key="dataset_format", default=formats[0],
                                            options=formats)]
    up = st.session_state.get(UPLOAD)
    if up is None:
        result["error"] = "Upload a file in the sidebar, or pick a shipped dataset."
        return
    if st.session_state.get(KEY) is None:  # back from another page: the file kept then
        st.caption(f"Using {views.plain(up['name'])}, uploaded earlier; upload a file to replace it.")
    try:
        result["conversations"] = load_uploaded(up["name"], up["data"], fmt)
        result.update(key=f"upload:{hashlib.sha256(up['data']).hexdigest()}:{fmt}", label=up["name"])
    except DatasetError as exc:
        result["error"] = f"Cannot load {views.plain(up['name'])}: {views.plain(exc, 400)}"
