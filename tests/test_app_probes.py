"""Probes written on the Import page: added, edited and deleted (question, expected and stale
memories, category) through the functions `vxmem probes` uses, validated, and saved in the
dataset file the page offers (streamlit's AppTest, no browser)."""

import pytest
from test_app import OPENAI_CHAT, ROOT, page, sessions_dir, shown  # noqa: F401  (sessions_dir: an autouse fixture)

from vxmem.workbench.datasets.jsonl import load_jsonl, loads_jsonl
from vxmem.workbench.datasets.probes import add_probe

# Every chart these pages draw is built from channel objects (conftest's fixture says why).
pytestmark = pytest.mark.usefixtures("charts_from_channel_objects")


def imported(at):
    return at.session_state["imported"]["conversation"]


def download(at) -> str:
    """The dataset file the page offers: its "Save as a vxmem JSONL dataset" button downloads this text."""
    assert any(d.proto.label.startswith("Save as a vxmem JSONL") for d in at.get("download_button"))
    return imported(at).to_jsonl()


def chat_page():
    at = page("importer")
    at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT).run()
    assert not at.exception and not at.error
    return at


def add(at, query, relevant, stale=(), category="", after=None):
    at.text_input(key="import_query").set_value(query).run()
    at.multiselect(key="import_relevant").set_value(list(relevant)).run()
    at.multiselect(key="import_stale").set_value(list(stale)).run()
    at.text_input(key="import_category").set_value(category).run()
    if after is not None:
        at.selectbox(key="import_after").set_value(after).run()
    at.button(key="import_add").click().run()
    assert not at.exception


def test_a_probe_with_stale_memories_and_a_category_is_added_and_saved_in_the_dataset_file():
    at = chat_page()
    chat = imported(at)
    add(at, "what do I ride on?", ["bike:0"], stale=["bike:2"], category="preference")
    assert not at.error, shown(at.error)
    table = at.dataframe[1].value
    assert table[["label", "query", "relevant", "stale", "category"]].values.tolist() == [
        ["q1", "what do I ride on?", "bike:0", "bike:2", "preference"]]
    (probe,) = loads_jsonl(download(at)).probes  # the file as the page saves it reads back
    assert probe.stale == ("bike:2",) and probe.category == "preference" and probe.relevant == {"bike:0": 1.0}
    # the same probe as `vxmem probes add` writes it (add_probe), byte for byte
    expected = add_probe(chat, "what do I ride on?", ["bike:0"], stale_labels=["bike:2"], category="preference")
    assert expected.to_jsonl() == download(at)


def test_a_probe_is_edited_in_place_and_the_form_shows_the_probe_picked():
    at = chat_page()
    add(at, "what do I ride on?", ["bike:0"])
    add(at, "am I allergic to anything?", ["food:0"])
    time_before = [p.time for p in imported(at).probes]
    at.selectbox(key="import_target").set_value("q1").run()
    assert at.text_input(key="import_query").value == "what do I ride on?"  # the form shows q1
    assert at.multiselect(key="import_relevant").value == ["bike:0"]
    at.text_input(key="import_query").set_value("which saddle did I order?").run()
    at.multiselect(key="import_stale").set_value(["bike:2"]).run()
    at.button(key="import_save").click().run()
    assert not at.exception and not at.error, shown(at.error)
    probes = {p.label: p for p in imported(at).probes}
    assert probes["q1"].query == "which saddle did I order?" and probes["q1"].stale == ("bike:2",)
    assert probes["q2"].query == "am I allergic to anything?"
    assert [p.time for p in imported(at).probes] == time_before  # an edit keeps the probe's moment
    assert "Saved probe q1" in shown(at.success)
    at.selectbox(key="import_target").set_value("(a new probe)").run()
    assert at.text_input(key="import_query").value == ""  # a new probe starts from an empty form


def test_a_probe_is_deleted():
    at = chat_page()
    add(at, "what do I ride on?", ["bike:0"])
    add(at, "am I allergic to anything?", ["food:0"])
    at.selectbox(key="import_target").set_value("q1").run()
    at.button(key="import_delete").click().run()
    assert not at.exception and not at.error
    assert [p.label for p in imported(at).probes] == ["q2"]
    assert "Deleted probe q1" in shown(at.success)
    assert at.selectbox(key="import_target").value == "(a new probe)"


def test_an_unknown_label_is_a_clear_error_and_the_dataset_is_unchanged():
    at = chat_page()
    add(at, "what do I ride on?", ["bike:0"])
    before = download(at)
    add(at, "where is my bike?", ["bike:0"], stale=["bike:99"])
    assert at.error and "bike:99" in shown(at.error) and "not the label of a memory" in shown(at.error)
    assert "unchanged" in shown(at.error)
    assert download(at) == before
    at.selectbox(key="import_target").set_value("q1").run()
    at.multiselect(key="import_relevant").set_value(["nope"]).run()
    at.button(key="import_save").click().run()
    assert at.error and "'nope'" in shown(at.error)
    assert download(at) == before


def test_a_label_both_expected_and_stale_is_refused():
    at = chat_page()
    add(at, "what do I ride on?", ["bike:0"], stale=["bike:0"])
    assert at.error and "both" in shown(at.error)
    assert not imported(at).probes


def test_a_probe_asked_mid_chat_cannot_expect_a_later_turn():
    at = chat_page()
    add(at, "what do I ride on?", ["bike:2"], after="bike:0")
    assert at.error and "after the probe" in shown(at.error)
    add(at, "what do I ride on?", ["bike:0"], after="bike:1")
    assert not at.error
    assert imported(at).probes[0].time == next(e.time for e in imported(at).events if e.label == "bike:1")


def test_a_vxmem_dataset_uploads_to_have_its_probes_edited(tmp_path):
    path = tmp_path / "drift.jsonl"
    source = (ROOT / "datasets" / "preference_drift.jsonl").read_text()
    path.write_text(source)
    at = page("importer")
    at.file_uploader(key="import_upload").upload("drift.jsonl", source.encode()).run()
    assert not at.exception and not at.error, shown(at.error)
    labels = [p.label for p in load_jsonl(path).probes]
    assert at.dataframe[1].value["label"].tolist() == labels
    at.selectbox(key="import_target").set_value(labels[0]).run()
    at.button(key="import_delete").click().run()
    assert [p.label for p in loads_jsonl(download(at)).probes] == labels[1:]
    assert path.read_text() == source  # the page writes nothing: the file is its download


def test_a_bad_upload_keeps_the_last_good_import_and_its_probes_and_says_what_was_wrong():
    at = chat_page()
    for query in ("what do I ride on?", "am I allergic to anything?"):
        add(at, query, ["bike:0"])
    before = download(at)
    at.file_uploader(key="import_upload").upload("broken.csv", b"session,role\n\"unclosed,quote\n").run()
    assert not at.exception
    assert "broken.csv" in shown(at.error), shown(at.error)
    assert "Still using the last chat imported" in shown(at.info)
    assert download(at) == before  # the chat and both probes, as they were
    assert at.dataframe[1].value["label"].tolist() == ["q1", "q2"]
    at.switch_page("app_pages/tune.py").run()  # the other pages still offer it
    assert "Imported chat (Import page)" in at.selectbox(key="dataset_choice").options
    at.switch_page("app_pages/importer.py").run()
    assert not at.error and download(at) == before  # back, without the bad file: no stale error
    at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT.replace(b"peanuts", b"cats")).run()
    assert not at.error and not imported(at).probes  # a good new file replaces it


def test_the_why_probe_picker_follows_each_probe_added():
    at = chat_page()
    for n, query in enumerate(("what do I ride on?", "am I allergic to anything?", "how was the weather?"), 1):
        add(at, query, ["bike:0"])
        assert at.selectbox(key="import_probe").value == n - 1, n  # the probe just added, not q1
        assert query in at.selectbox(key="import_probe").format_func(at.selectbox(key="import_probe").value)


def test_a_probe_asked_in_no_session_says_so_rather_than_none():
    at = chat_page()
    add(at, "what do I ride on?", ["bike:0"])  # asked in "(every session)": the probe's session is None
    assert imported(at).probes[0].session is None
    listed = at.dataframe[1].value
    assert listed["session"].tolist() == ["(every session)"] and listed["category"].tolist() == [""]
    for name in ("replay", "budget"):
        at.switch_page(f"app_pages/{name}.py").run()
        at.selectbox(key="dataset_choice").set_value("Imported chat (Import page)").run()
        assert not at.exception and not at.error, shown(at.error)
        said = shown(at.markdown)
        assert "no session (recalls from every session)" in said and "None" not in said, said


def test_corrections_found_by_the_judge_or_marked_by_hand_replay_as_corrections():
    from vxmem.workbench.datasets.corrections import correction_pairs

    chat = (b"session,role,text,timestamp\n"
            b"s1,user,Dana lives in Lisbon.,2024-01-01T10:00:00Z\n"
            b"s1,user,Dana likes green tea.,2024-01-02T10:00:00Z\n"
            b"s1,user,Dana has moved to Porto.,2024-02-01T10:00:00Z\n")
    at = page("importer")
    at.file_uploader(key="import_upload").upload("dana.csv", chat).run()
    assert "None marked yet" in shown(at.caption)
    at.button(key="corr_find").click().run()  # the rule-based judge
    assert not at.exception and not at.error
    found = next(d.value for d in at.dataframe if "corrects" in d.value)
    assert found[["corrects", "turn"]].values.tolist() == [["s1:0", "s1:2"]]
    at.button(key="corr_apply").click().run()
    assert correction_pairs(imported(at)) == [("s1:0", "s1:2")]
    assert "s1:2 corrects s1:0" in shown(at.caption)
    at.selectbox(key="corr_new").set_value("s1:1").run()
    at.selectbox(key="corr_old").set_value("s1:2").run()
    at.button(key="corr_mark").click().run()  # a turn cannot correct a later one: said, nothing changed
    assert "comes before" in " ".join(e.value for e in at.error)
    assert correction_pairs(imported(at)) == [("s1:0", "s1:2")]
