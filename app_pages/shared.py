"""What the workbench pages share: the dataset picker and the cached replays.

Heavy objects (replays) sit behind ``st.cache_resource`` and are keyed by where the data
came from, so moving a slider never replays; loaded conversations sit behind
``st.cache_data``. Pages compute their frames through :mod:`vxmem.views`; what they offer
(slider ranges, labels, defaults) is in :mod:`app_pages.config`.
"""

from __future__ import annotations

import hashlib

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import config
from vxmem import views
from vxmem.datasets import Conversation, DatasetError, load
from vxmem.replay import Replay


@st.cache_data(show_spinner=False)
def shipped() -> pd.DataFrame:
    return views.shipped_datasets(config.DATASETS)


@st.cache_data(show_spinner=False, max_entries=16)
def load_shipped(path: str, fmt: str | None) -> list[Conversation]:
    return load(path, format=fmt)


@st.cache_data(show_spinner=False, max_entries=8)
def load_uploaded(name: str, data: bytes, fmt: str | None) -> list[Conversation]:
    return views.load_bytes(name, data, fmt)


@st.cache_resource(show_spinner=False, max_entries=16)
def replays_for(key: str, _conversations: tuple[Conversation, ...]) -> list[Replay]:
    """The replays of a dataset, once per dataset ``key`` (its path, or the upload's hash)."""
    return views.replay_all(_conversations)


def dataset_sidebar(show: bool = True) -> None:
    """The sidebar's dataset picker; the result lands in ``st.session_state["dataset"]``."""
    if not show:
        return
    names = shipped()["name"].tolist()
    with st.sidebar:
        st.subheader("Dataset")
        options = names + [config.UPLOAD]
        # Kept outside the widget: Streamlit drops a widget's state on a page that does not draw it.
        kept = st.session_state.get("dataset_kept", config.DEFAULT_DATASET)
        choice = st.selectbox("Shipped scenario, fixture or upload", options,
                              index=options.index(kept) if kept in options else 0, key="dataset_choice")
        st.session_state["dataset_kept"] = choice
        result = {"key": None, "label": choice, "conversations": None, "error": None}
        if choice == config.UPLOAD:
            up = st.file_uploader(config.UPLOAD_LABEL, type=config.UPLOAD_TYPES, key="dataset_upload")
            fmt = config.FORMAT_CHOICES[st.selectbox("Format", list(config.FORMAT_CHOICES), key="dataset_format")]
            if up is None:
                result["error"] = "Upload a file in the sidebar, or pick a shipped dataset."
            else:
                data = up.getvalue()
                try:
                    result["conversations"] = load_uploaded(up.name, data, fmt)
                    result["key"] = f"upload:{hashlib.sha256(data).hexdigest()}:{fmt}"
                    result["label"] = up.name
                except DatasetError as exc:
                    result["error"] = f"Cannot load {up.name}: {exc}"
        else:
            row = shipped().set_index("name").loc[choice]
            try:
                result["conversations"] = load_shipped(row["path"], row["format"])
                result["key"] = f"shipped:{row['path']}"
            except DatasetError as exc:  # a shipped file edited by hand
                result["error"] = f"Cannot load {choice}: {exc}"
        if result["conversations"]:
            n = len(result["conversations"])
            probes = sum(len(c.probes) for c in result["conversations"])
            st.caption(f"{n} conversation{'s' * (n != 1)}, {probes} probes")
    st.session_state["dataset"] = result


def dataset() -> tuple[str, list[Conversation], list[Replay]]:
    """The picked dataset: (cache key, conversations, replays); a bad one stops the page."""
    result = st.session_state.get("dataset")
    if result is None:
        st.error("No dataset picked.")
        st.stop()
    if result["error"]:
        st.error(result["error"])
        st.stop()
    convs = result["conversations"]
    with st.spinner(f"Replaying {result['label']} through a fresh memory..."):
        reps = replays_for(result["key"], tuple(convs))
    return result["key"], convs, reps


def probe_picker(replays: list[Replay], key: str, label: str = "Probe") -> tuple[int, int]:
    """A select box over every probe of ``replays``; returns (replay index, probe index)."""
    table = views.probe_table(replays)
    options = list(range(len(table)))
    multi = len(replays) > 1

    def fmt(i):
        row = table.iloc[i]
        where = f"{row['conversation']} / " if multi else ""
        return f"{where}{row['label']}: {row['query']}"

    i = st.selectbox(label, options, format_func=fmt, key=key)
    row = table.iloc[i]
    return int(row["replay"]), int(row["probe"])


def param_sliders(key_prefix: str, names=tuple(config.PARAMS), columns: int = 1) -> dict:
    """One slider per parameter, at the memory's defaults."""
    out = {}
    cols = st.columns(columns) if columns > 1 else [st.container()]
    for j, name in enumerate(names):
        label, lo, hi, default, step = config.PARAMS[name]
        with cols[j % len(cols)]:
            out[name] = st.slider(label, lo, hi, default, step, key=f"{key_prefix}_{name}",
                                  help=f"`{name}`")
    return out


def chart(c: alt.Chart) -> None:
    """Draw ``c`` the full width of the page."""
    st.altair_chart(c, width="stretch")
