"""Import: your own chat log (OpenAI / ChatML JSONL, a ChatGPT export, CSV) or a vxmem JSONL
dataset; probes written, edited and deleted for it (a question, the turns a good recall returns,
the stale ones it must not, a category), saved as a vxmem JSONL dataset; and why each memory was
or was not recalled for a probe."""

import hashlib

import streamlit as st

from app_pages import config, corrections_box, kept, shared
from vxmem.workbench import views
from vxmem.workbench.datasets import DatasetError

state = st.session_state
NEW = "(a new probe)"
EVERY = "(every session)"
END = "(the end of the chat)"
# The probe form's widgets: a new file or another probe to edit fills them afresh. They, and the probe
# picked to edit, keep their values across a visit to another page (a half-written probe is not lost).
FORM = ("import_query", "import_session", "import_relevant", "import_stale", "import_category", "import_after")

st.title("Import")
st.caption("Load a chat log (or a vxmem JSONL dataset), write probes for it (a question, the turns a good recall "
           "returns and the stale ones it must not, picked from the list), edit or delete them, and save the result "
           "as a vxmem JSONL dataset: the Replay, Tune and other pages then use it as \"Imported chat\". The CLI "
           "does the same: `vxmem import FILE --format openai -o dataset.jsonl`, then `vxmem probes add|delete`.")


def imported_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def set_imported(conv) -> None:
    state.imported = {"conversation": conv, "key": imported_key(conv.to_jsonl())}


def fill_form(label: str | None = None) -> None:
    """The form shows probe ``label`` (None: empty, for a new probe)."""
    conv = state.imported["conversation"]
    f = views.probe_fields(conv, label) if label else {"query": "", "session": None, "relevant": [], "stale": [],
                                                        "category": ""}
    state.import_query, state.import_category = f["query"], f["category"]
    state.import_session = f["session"] or EVERY
    state.import_relevant, state.import_stale = f["relevant"], f["stale"]
    state.import_after = END


def pick_target() -> None:
    fill_form(None if state.import_target == NEW else state.import_target)
    state.import_message = None


c1, c2 = st.columns([3, 1])
up = c1.file_uploader("A chat log: OpenAI / ChatML messages (.jsonl), a ChatGPT export (conversations.json) or a "
                      "CSV of session, role, text, timestamp", type=config.CHAT_TYPES, key="import_upload")
fmt = config.CHAT_CHOICES[c2.selectbox("Format", list(config.CHAT_CHOICES), key="import_format")]
if up is None:
    state.pop("import_error", None)  # the bad file was removed (or left behind on another page)
else:
    data = up.getvalue()
    source = f"{hashlib.sha256(data).hexdigest()}:{fmt}"
    bad = state.get("import_error")
    if state.get("import_source") != source and not (bad and bad[0] == source):  # a file not read yet
        try:
            loaded = views.conversation_from_bytes(up.name, data, fmt)
        except DatasetError as exc:
            # The last good import, its probes and the form stay: a bad file must not cost the work done.
            state.import_error = (source, f"Cannot import {views.plain(up.name)}: {views.plain(exc, 400)}")
        else:
            kept.forget(*FORM, "import_target")  # a new file: its probes, its form and its messages afresh
            for k in ("import_message", "import_probe", "import_error"):
                state.pop(k, None)
            set_imported(loaded)
            state.import_source = source
if state.get("import_error"):
    st.error(state.import_error[1])
    if "imported" not in state:
        st.stop()
    st.info(f"Still using the last chat imported, {views.plain(state.imported['conversation'].name)}, and its "
            "probes: upload a good file to replace it.")
if "imported" not in state:
    st.info("Upload a chat log to start.")
    st.stop()

conv = state.imported["conversation"]
stats = conv.meta.get("stats", {})
st.markdown(f"**{views.plain(conv.name)}**: {views.plain(conv.description, 300)}")
skipped = stats.get("skipped") or {}
if skipped:
    st.caption("Left out (instructions and tooling, not what was said): "
               + ", ".join(f"{v} {k}" for k, v in skipped.items()))
clamped = int(stats.get("clamped") or 0)
if clamped:
    st.caption(f"{clamped} timestamp{'s were' if clamped != 1 else ' was'} moved forward to keep time in order "
               "(earlier than the message before it in its chat).")
turns = views.turn_table(conv)
st.dataframe(turns, hide_index=True, width="stretch", height=min(400, 38 + 35 * len(turns)),
             column_config={"label": st.column_config.TextColumn(width="small"),
                            "text": st.column_config.TextColumn(width="large")})

corrections_box.corrections_section(conv, dict(zip(turns["label"], turns["text"])), set_imported)

st.subheader("Probes")
probes = views.probe_list(conv)
if not probes.empty:
    # A probe asked in no session recalls from every one; one without a category has none: never "None".
    listed = probes.assign(session=probes["session"].fillna(EVERY), category=probes["category"].fillna(""))
    st.dataframe(listed, hide_index=True, width="stretch", column_config={
        "label": st.column_config.TextColumn(width="small"), "query": st.column_config.TextColumn(width="large")})
labels = probes["label"].tolist()
target = kept.widget(st.selectbox, "Write", key="import_target", default=NEW, options=[NEW, *labels],
                     on_change=pick_target, format_func=lambda t: t if t == NEW else f"probe {t}: edit or delete it")
editing = target != NEW
sessions = sorted({s for s in turns["session"] if isinstance(s, str)})
q1, q2 = st.columns([3, 1])
query = kept.widget(q1.text_input, "Question", key="import_query", default="",
                    placeholder="e.g. which saddle did I order?")
kept.widget(q2.selectbox, "Asked in session", key="import_session", default=EVERY, options=[EVERY, *sessions])
texts = dict(zip(turns["label"], turns["text"]))


def turn(lab: str) -> str:
    return f"{lab}: {texts[lab][:90]}" if lab in texts else lab


# New options are accepted (a pasted label); the library names a label that is not a memory here.
relevant = kept.widget(st.multiselect, "The turns a good recall returns", key="import_relevant", default=[],
                       options=turns["label"].tolist(), format_func=turn, accept_new_options=True)
kept.widget(st.multiselect, "Stale turns it must not return (superseded, out of date)", key="import_stale", default=[],
            options=turns["label"].tolist(), format_func=turn, accept_new_options=True,
            help="A memory recalled here counts in stale-leak@k.")
c1, c2 = st.columns(2)
kept.widget(c1.text_input, "Category (optional)", key="import_category", default="", placeholder="e.g. preference")
kept.widget(c2.selectbox, "Asked after", key="import_after", default=END, options=[END, *turns["label"].tolist()],
            format_func=lambda t: t if t == END else turn(t), disabled=editing,
            help="An edited probe keeps its moment.")


def write() -> None:
    """Add or change the probe of the form (views.write_probe: add_probe's checks, as `vxmem probes add`)."""
    target = state.get("import_target", NEW)
    try:
        new = views.write_probe(state.imported["conversation"], state.import_query, state.import_relevant,
                                state.import_stale, None if state.import_session == EVERY else state.import_session,
                                state.import_category, label=None if target == NEW else target,
                                after=None if state.import_after == END else state.import_after)
    except (ValueError, TypeError, KeyError) as exc:
        state.import_message = ("error", f"Not saved, the dataset is unchanged: {exc}")
        return
    was_new = target == NEW
    before = set(views.probe_list(state.imported["conversation"])["label"])
    written = next((p.label for p in new.probes if p.label not in before), target)
    set_imported(new)
    state.import_message = ("success", f"{'Added' if was_new else 'Saved'} probe {written}.")
    if was_new:
        fill_form(None)
        # The why section below follows the probe just written (its picker would stay on the first one).
        state.import_probe = views.probe_list(new)["label"].tolist().index(written)


def delete() -> None:
    label = state.import_target
    try:
        new = views.delete_probe(state.imported["conversation"], label)
    except KeyError as exc:
        state.import_message = ("error", f"Not deleted: {exc}")
        return
    set_imported(new)
    state.import_target = NEW
    fill_form(None)
    state.pop("import_probe", None)
    state.import_message = ("success", f"Deleted probe {label}.")


b1, b2, _ = st.columns([1, 1, 3])
b1.button("Save the changes" if editing else "Add the probe", on_click=write, type="primary",
          key="import_save" if editing else "import_add", disabled=not query.strip(), width="stretch")
if editing:
    b2.button("Delete the probe", on_click=delete, key="import_delete", width="stretch")
if state.get("import_message"):
    kind, text = state.import_message
    (st.error if kind == "error" else st.success)(views.plain(text, 400))

conv = state.imported["conversation"]
probes = views.probe_list(conv)
if probes.empty:
    st.stop()
st.download_button("Save as a vxmem JSONL dataset", conv.to_jsonl(), file_name=f"{conv.name}.jsonl",
                   mime="application/json", key="import_download",
                   help="The dataset file, written as `vxmem probes` writes it; `vxmem replay` and the other pages "
                        "read it.")

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
                         reps[0].meta.get("low_relevance"), reps[0].mode, reps[0].rerank,
                         views.replay_match_probability(reps[0], int(pick), point["limit"]), results)
st.markdown("**The turns this probe should return, and why**")
st.table(views.why_table(why, only_relevant=True)[["reason", "rank", "label", "text", "detail"]], hide_index=True)
st.markdown("**Every turn, and why it was or was not returned**")
shared.why_table(why, key="import_why")
st.caption("The Replay, Tune, Sweep and A/B pages use this dataset when \"Imported chat\" is picked in their "
           "sidebar.")
