"""What the workbench pages share: the dataset picker and the cached replays.

Heavy objects (replays) sit behind ``st.cache_resource`` and are keyed by where the data
came from, so moving a slider never replays; loaded conversations sit behind
``st.cache_data``. Pages compute their frames through :mod:`vxmem.dashboard`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import List, Optional, Tuple

import altair as alt
import streamlit as st

from vxmem import dashboard as D
from vxmem.datasets import Conversation, DatasetError, load
from vxmem.replay import Replay

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / "datasets"
DEFAULT_DATASET = "preference_drift"
UPLOAD = "Upload a file..."
FORMATS = {"guess from the file": None, "vxmem JSONL": "jsonl", "LoCoMo JSON": "locomo",
           "LongMemEval JSON": "longmemeval"}


@st.cache_data(show_spinner=False)
def shipped() -> "D.pd.DataFrame":
    return D.shipped_datasets(DATASETS)


@st.cache_data(show_spinner=False, max_entries=16)
def load_shipped(path: str, fmt: Optional[str]) -> List[Conversation]:
    return load(path, format=fmt)


@st.cache_data(show_spinner=False, max_entries=8)
def load_uploaded(name: str, data: bytes, fmt: Optional[str]) -> List[Conversation]:
    return D.load_bytes(name, data, fmt)


@st.cache_resource(show_spinner=False, max_entries=16)
def replays_for(key: str, _conversations: Tuple[Conversation, ...]) -> List[Replay]:
    """The replays of a dataset, once per dataset ``key`` (its path, or the upload's hash)."""
    return D.replay_all(_conversations)


def dataset_sidebar(show: bool = True) -> None:
    """The sidebar's dataset picker; the result lands in ``st.session_state["dataset"]``."""
    if not show:
        return
    names = shipped()["name"].tolist()
    with st.sidebar:
        st.subheader("Dataset")
        options = names + [UPLOAD]
        # Kept outside the widget: Streamlit drops a widget's state on a page that does not draw it.
        kept = st.session_state.get("dataset_kept", DEFAULT_DATASET)
        choice = st.selectbox("Shipped scenario, fixture or upload", options,
                              index=options.index(kept) if kept in options else 0, key="dataset_choice")
        st.session_state["dataset_kept"] = choice
        result = {"key": None, "label": choice, "conversations": None, "error": None}
        if choice == UPLOAD:
            up = st.file_uploader("vxmem JSONL, LoCoMo JSON or LongMemEval JSON", type=["jsonl", "json"],
                                  key="dataset_upload")
            fmt = FORMATS[st.selectbox("Format", list(FORMATS), key="dataset_format")]
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


def dataset() -> Tuple[str, List[Conversation], List[Replay]]:
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


def probe_picker(replays: List[Replay], key: str, label: str = "Probe") -> Tuple[int, int]:
    """A select box over every probe of ``replays``; returns (replay index, probe index)."""
    table = D.probe_table(replays)
    options = list(range(len(table)))
    multi = len(replays) > 1

    def fmt(i):
        row = table.iloc[i]
        where = f"{row['conversation']} / " if multi else ""
        return f"{where}{row['label']}: {row['query']}"

    i = st.selectbox(label, options, format_func=fmt, key=key)
    row = table.iloc[i]
    return int(row["replay"]), int(row["probe"])


def param_sliders(key_prefix: str, names=tuple(D.PARAMS), columns: int = 1) -> dict:
    """One slider per parameter, at the memory's defaults."""
    out = {}
    cols = st.columns(columns) if columns > 1 else [st.container()]
    for j, name in enumerate(names):
        label, lo, hi, default, step = D.PARAMS[name]
        with cols[j % len(cols)]:
            out[name] = st.slider(label, lo, hi, default, step, key=f"{key_prefix}_{name}",
                                  help=f"`{name}`")
    return out


def chart(c: alt.Chart) -> None:
    st.altair_chart(c, width="stretch")
