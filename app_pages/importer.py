"""Import: your own chat log (OpenAI / ChatML JSONL, a ChatGPT export, CSV), probes written for it,
saved as a vxmem JSONL dataset, and why each memory was or was not recalled for a probe."""

import hashlib

import streamlit as st

from app_pages import config, shared
from vxmem.workbench import views
from vxmem.workbench.datasets import DatasetError
from vxmem.workbench.datasets.probes import add_probe

state = st.session_state

st.title("Import")
st.caption("Load a chat log, write probes for it (a question and the turns a good recall returns, picked "
           "from the list), and save the result as a vxmem JSONL dataset: the Replay, Tune and other pages then "
           "use it as \"Imported chat\". The CLI does the import too: `vxmem import FILE --format openai -o "
           "dataset.jsonl`.")


def imported_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def set_imported(conv) -> None:
    state.imported = {"conversation": conv, "key": imported_key(conv.to_jsonl())}


c1, c2 = st.columns([3, 1])
up = c1.file_uploader("A chat log: OpenAI / ChatML messages (.jsonl), a ChatGPT export (conversations.json) or a "
                      "CSV of session, role, text, timestamp", type=config.CHAT_TYPES, key="import_upload")
fmt = config.CHAT_CHOICES[c2.selectbox("Format", list(config.CHAT_CHOICES), key="import_format")]
if up is not None:
    data = up.getvalue()
    source = f"{hashlib.sha256(data).hexdigest()}:{fmt}"
    if state.get("import_source") != source:  # a new file: start its probes afresh
        try:
            set_imported(views.chatlog_from_bytes(up.name, data, fmt))
            state.import_source = source
            state.import_error = None
        except DatasetError as exc:
            state.import_error = f"Cannot import {up.name}: {exc}"
            state.pop("imported", None)
            state.import_source = source
if state.get("import_error"):
    st.error(state.import_error)
    st.stop()
if "imported" not in state:
    st.info("Upload a chat log to start.")
    st.stop()

conv = state.imported["conversation"]
stats = conv.meta.get("stats", {})
st.markdown(f"**{conv.name}**: {conv.description}")
skipped = stats.get("skipped") or {}
if skipped:
    st.caption("Left out (instructions and tooling, not what was said): "
               + ", ".join(f"{v} {k}" for k, v in skipped.items()))
turns = views.turn_table(conv)
st.dataframe(turns, hide_index=True, width="stretch", height=min(400, 38 + 35 * len(turns)))

st.subheader("Write a probe")
sessions = sorted({s for s in turns["session"] if s is not None})
q1, q2 = st.columns([3, 1])
query = q1.text_input("Question", key="import_query", placeholder="e.g. which saddle did I order?")
session = q2.selectbox("Asked in session", ["(every session)", *sessions], key="import_session")
texts = dict(zip(turns["label"], turns["text"]))
relevant = st.multiselect("The turns a good recall returns", turns["label"].tolist(), key="import_relevant",
                          format_func=lambda lab: f"{lab}: {texts[lab][:90]}")


def write_probe() -> None:
    try:
        new = add_probe(state.imported["conversation"], state.import_query, state.import_relevant,
                        None if state.import_session == "(every session)" else state.import_session)
    except (ValueError, TypeError) as exc:
        state.import_message = ("error", f"Not added: {exc}")
        return
    set_imported(new)
    state.import_message = ("success", f"Added probe {new.probes[-1].label}.")
    state.import_query = ""
    state.import_relevant = []


st.button("Add the probe", on_click=write_probe, type="primary", key="import_add",
          disabled=not (query.strip() and relevant))
if state.get("import_message"):
    kind, text = state.import_message
    (st.error if kind == "error" else st.success)(text)

probes = views.probe_list(conv)
if probes.empty:
    st.stop()
st.dataframe(probes, hide_index=True, width="stretch")
st.download_button("Save as a vxmem JSONL dataset", conv.to_jsonl(), file_name=f"{conv.name}.jsonl",
                   mime="application/json", key="import_download")

st.subheader("Why (not) recalled")
labels = probes["label"].tolist()
pick = st.selectbox("Probe", range(len(labels)), index=len(labels) - 1, key="import_probe",
                    format_func=lambda i: f"{labels[i]}: {probes.iloc[i]['query']}")
reps = shared.replays_for(f"imported:{state.imported['key']}", (conv,))
point = shared.point()
why = views.explain(reps[0], int(pick), point, conv)
results = views.returned(why)
st.markdown(f"What `recall()` returns at the shared settings (mode {shared.settings()['mode']}, limit "
            f"{point['limit']}):")
shared.ranking_table(results, key="import_results")
shared.relevance_warning(why["relevance"].max() if why["relevance"].notna().any() else None,
                         reps[0].meta.get("low_relevance"), reps[0].mode, reps[0].rerank)
st.markdown("**The turns this probe should return, and why**")
st.table(views.why_table(why, only_relevant=True)[["reason", "rank", "label", "text", "detail"]], hide_index=True)
st.markdown("**Every turn, and why it was or was not returned**")
shared.why_table(why, key="import_why")
st.caption("The Replay, Tune, Sweep and A/B pages use this dataset when \"Imported chat\" is picked in their "
           "sidebar.")
