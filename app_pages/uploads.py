"""The sidebar's dataset upload, kept in the session so it outlives a visit to another page, and a
dataset read from a path on the machine the dashboard runs on (a full benchmark file).

Streamlit drops an uploader's file on a page that does not draw it (the Playground and Import
do not draw the dataset picker), so the uploader's callback keeps the file, its name and bytes,
under :data:`UPLOAD`; the format picked beside it is a kept widget (:mod:`app_pages.kept`).
Removing the file from the uploader forgets it.
"""

from __future__ import annotations

import hashlib
import os
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


@st.cache_data(show_spinner=False, max_entries=4)
def load_on_disk(path: str, mtime: float, size: int, fmt: str | None) -> list[Conversation]:
    from vxmem.workbench.datasets import load

    return load(path, format=fmt)


def dataset_on_disk(result: dict[str, Any]) -> None:
    """A path on the dashboard's machine and its format, the file loaded into ``result`` (as
    :func:`dataset_upload` does): a full LoCoMo or LongMemEval file needs no upload."""
    path = kept.widget(st.text_input, "Path of the file", key="dataset_path", default="",
                       placeholder="/data/locomo10.json").strip()
    formats = list(config.FORMAT_CHOICES)
    fmt = config.FORMAT_CHOICES[kept.widget(st.selectbox, "Format", key="dataset_path_format",
                                            default=formats[0], options=formats)]
    if not path:
        result["error"] = "Type the path of a dataset file on this machine in the sidebar."
        return
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        result["error"] = f"No file at {views.plain(path)}."
        return
    info = os.stat(path)
    try:
        result["conversations"] = load_on_disk(path, info.st_mtime, info.st_size, fmt)
        result.update(key=f"disk:{path}:{info.st_mtime_ns}:{info.st_size}:{fmt}", label=os.path.basename(path))
    except (DatasetError, OSError) as exc:
        result["error"] = f"Cannot load {views.plain(path)}: {views.plain(exc, 400)}"
