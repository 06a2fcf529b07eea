"""Chat-log importers: OpenAI/ChatML JSONL, the ChatGPT export, CSV; probes written for them."""

import json
from datetime import UTC, datetime

import pytest

from vxmem.workbench.datasets import Conversation, DatasetError, load_jsonl
from vxmem.workbench.datasets.chatlogs import CHAT_FORMATS, detect_chat_format, load_chatlog, loads_chatlog
from vxmem.workbench.datasets.probes import add_probe
from vxmem.workbench.replay.run import replay


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp()


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(*objs) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def _turns(conv):
    return [(e.label, e.session, e.role, e.text, e.time) for e in conv.events]


# ---------------------------------------------------------------------------- OpenAI / ChatML

TRIP = {"conversation_id": "trip", "messages": [
    {"role": "system", "content": "You are a helpful travel agent"},
    {"role": "user", "content": "I fly to Oslo on Friday", "timestamp": "2024-03-01T09:00:00Z"},
    {"role": "assistant", "content": "Noted: Oslo, Friday."},
]}
SEAT = [
    {"role": "user", "content": "Book a window seat"},
    {"role": "assistant", "content": [{"type": "text", "text": "Window seat it is."},
                                      {"type": "image_url", "image_url": {"url": "seat.png"}}]},
]


def test_openai_conversation_per_line_becomes_one_session_per_line(tmp_path):
    conv = load_chatlog(_write(tmp_path, "chats.jsonl", _jsonl(TRIP, SEAT)))
    nine = _t("2024-03-01T09:00:00")
    # trip: dated first message, the reply a minute later; the unnamed second chat
    # starts an hour after the first ends, its reply a minute after that.
    assert _turns(conv) == [
        ("trip:0", "trip", "user", "I fly to Oslo on Friday", nine),
        ("trip:1", "trip", "assistant", "Noted: Oslo, Friday.", nine + 60),
        ("c2:0", "c2", "user", "Book a window seat", nine + 60 + 3600),
        ("c2:1", "c2", "assistant", "Window seat it is.", nine + 60 + 3600 + 60),
    ]
    assert conv.name == "chats" and conv.probes == []
    assert conv.meta["source"] == "openai"
    assert conv.meta["stats"] == {"sessions": 2, "turns": 4, "undated": 3, "clamped": 0,
                                  "skipped": {"non_text_part": 1, "system": 1}}


def test_openai_one_message_per_line_groups_messages_by_conversation_id():
    text = _jsonl({"role": "user", "content": "hi A", "conversation_id": "a", "created_at": 1000},
                  {"role": "user", "content": "hi B", "conversation_id": "b", "created_at": 1030},
                  {"role": "assistant", "content": "hello A", "conversation_id": "a"},
                  {"role": "assistant", "content": "hello B", "session": "b", "timestamp": 1050},
                  {"role": "assistant", "content": None, "session": "b", "tool_calls": []})
    conv = loads_chatlog(text, "openai")
    # a:1 is undated: a minute after a:0 (1060), so it comes after b:1 (1050) on the timeline.
    assert _turns(conv) == [("a:0", "a", "user", "hi A", 1000.0), ("b:0", "b", "user", "hi B", 1030.0),
                            ("b:1", "b", "assistant", "hello B", 1050.0),
                            ("a:1", "a", "assistant", "hello A", 1060.0)]
    assert conv.meta["stats"]["skipped"] == {"empty": 1}


def test_messages_without_a_conversation_id_share_one_chat():
    conv = loads_chatlog(_jsonl({"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}))
    assert _turns(conv) == [("chat:0", "chat", "user", "one", 0.0), ("chat:1", "chat", "assistant", "two", 60.0)]


def test_a_timestamp_earlier_than_the_previous_message_is_moved_up_to_it():
    conv = loads_chatlog(_jsonl({"role": "user", "content": "first", "timestamp": 500},
                                {"role": "assistant", "content": "second", "timestamp": 400},
                                {"role": "user", "content": "third", "timestamp": 700}))
    assert [e.time for e in conv.events] == [500.0, 500.0, 700.0]
    assert [e.text for e in conv.events] == ["first", "second", "third"]
    assert conv.meta["stats"]["clamped"] == 1


# ---------------------------------------------------------------------------- ChatGPT export


def _node(nid, parent, children, role=None, text=None, t=None, content_type="text", **msg):
    message = None
    if role is not None:
        message = {"id": nid, "author": {"role": role}, "create_time": t,
                   "content": {"content_type": content_type, "parts": [text] if text is not None else []}, **msg}
    return {"id": nid, "message": message, "parent": parent, "children": children}


EXPORT = [
    {"title": "Trip", "create_time": 1000.0, "id": "conv-1", "current_node": "u2", "mapping": {
        "root": _node("root", None, ["sys"]),
        "sys": _node("sys", "root", ["u1"], "system", "You are ChatGPT", 1000.0),
        "u1": _node("u1", "sys", ["a1", "a2"], "user", "Plan a trip to Rome", 1010.0),
        "a1": _node("a1", "u1", [], "assistant", "Version one", 1020.0),
        "a2": _node("a2", "u1", ["h", "code"], "assistant", "Version two", 1030.0),
        "h": _node("h", "a2", ["code"], "user", "custom instructions", 1031.0,
                   metadata={"is_visually_hidden_from_conversation": True}),
        "code": _node("code", "h", ["tool"], "assistant", "print(1)", 1032.0, content_type="code",
                      recipient="python"),
        "tool": _node("tool", "code", ["u2"], "tool", "1", 1033.0, content_type="execution_output"),
        "u2": {"id": "u2", "parent": "tool", "children": [], "message": {
            "id": "u2", "author": {"role": "user"}, "create_time": 1040.0,
            "content": {"content_type": "multimodal_text",
                        "parts": [{"content_type": "image_asset_pointer"}, "Thanks, and this photo?"]}}},
    }},
    {"title": "Undated", "create_time": 5000.0, "id": "conv-2", "mapping": {
        "r": _node("r", None, ["x"]),
        "x": _node("x", "r", ["y1", "y2"], "user", "Hello"),
        "y1": _node("y1", "x", [], "assistant", "Old answer"),
        "y2": _node("y2", "x", [], "assistant", "New answer"),
    }},
]


def test_chatgpt_export_follows_the_current_branch_and_skips_what_was_not_said(tmp_path):
    conv = load_chatlog(_write(tmp_path, "conversations.json", json.dumps(EXPORT)))
    # conv-1: the regenerated answer a2 is on the branch to current_node, a1 is not; the
    # system prompt, the hidden message, the code sent to a tool and its output are left out.
    # conv-2 has no current_node: the newest leaf (the last child) is followed; its messages
    # are undated, so they start at the conversation's create_time, a minute apart.
    assert _turns(conv) == [
        ("conv-1:0", "conv-1", "user", "Plan a trip to Rome", 1010.0),
        ("conv-1:1", "conv-1", "assistant", "Version two", 1030.0),
        ("conv-1:2", "conv-1", "user", "Thanks, and this photo?", 1040.0),
        ("conv-2:0", "conv-2", "user", "Hello", 5000.0),
        ("conv-2:1", "conv-2", "assistant", "New answer", 5060.0),
    ]
    assert conv.events[0].meta == {"id": "u1", "title": "Trip"}
    assert conv.events[3].meta == {"id": "x", "title": "Undated"}
    assert conv.meta["stats"]["skipped"] == {"hidden": 1, "non_text": 1, "non_text_part": 1, "system": 1,
                                             "to_tool": 1}


def test_chatgpt_parent_outside_the_mapping_is_reported_with_the_conversation(tmp_path):
    bad = [{"title": "Broken", "id": "c", "current_node": "b", "mapping": {
        "b": _node("b", "ghost", [], "user", "hi", 1.0)}}]
    with pytest.raises(DatasetError, match=r"x\.json: conversation 0 \('Broken'\): parent 'ghost' of node 'b'"):
        load_chatlog(_write(tmp_path, "x.json", json.dumps(bad)), "chatgpt")


def test_chatgpt_parents_that_loop_are_an_error_not_a_hang():
    loop = [{"title": "Loop", "id": "c", "current_node": "a", "mapping": {
        "a": _node("a", "b", [], "user", "hi", 1.0), "b": _node("b", "a", ["a"], "user", "ho", 2.0)}}]
    with pytest.raises(DatasetError, match="loop back to 'a'"):
        loads_chatlog(json.dumps(loop), "chatgpt")


def test_chatgpt_conversation_without_a_mapping_names_what_is_expected():
    with pytest.raises(DatasetError, match=r"conversation 1 \('B'\): 'mapping' must be an object of node id"):
        loads_chatlog(json.dumps([EXPORT[1], {"title": "B", "mapping": []}]), "chatgpt")


# ---------------------------------------------------------------------------- CSV

CSV = ("session,role,text,timestamp\n"
       "s1,user,I like tea,2024-01-01T10:00:00Z\n"
       "s1,assistant,\"Tea, noted\",\n"
       "s2,user,Coffee please,1704106800\n"
       "s2,user,,\n"
       "s2,assistant,\"Two lines\nhere\",\n"
       "s1,user,Also biscuits,\n")


def test_csv_reads_iso_and_epoch_times_and_dates_missing_ones_a_minute_after_the_previous(tmp_path):
    conv = load_chatlog(_write(tmp_path, "log.csv", CSV))
    ten = _t("2024-01-01T10:00:00")
    assert ten + 3600 == 1704106800
    assert _turns(conv) == [
        ("s1:0", "s1", "user", "I like tea", ten),
        ("s1:1", "s1", "assistant", "Tea, noted", ten + 60),
        ("s1:2", "s1", "user", "Also biscuits", ten + 120),
        ("s2:0", "s2", "user", "Coffee please", ten + 3600),
        ("s2:1", "s2", "assistant", "Two lines\nhere", ten + 3660),
    ]
    assert conv.meta["stats"]["skipped"] == {"empty": 1}


def test_csv_without_a_timestamp_column_starts_each_chat_an_hour_after_the_previous():
    conv = loads_chatlog("Session,Role,Text\na,user,x\na,assistant,y\nb,user,z\n", "csv")
    assert [(e.label, e.time) for e in conv.events] == [("a:0", 0.0), ("a:1", 60.0), ("b:0", 3660.0)]


@pytest.mark.parametrize("text,message", [
    ("session,role,text,mood\na,user,x,happy\n", r"line 1: unknown column 'mood'"),
    ("session,text\na,x\n", r"line 1: missing column 'role'"),
    ("session,role,text\na,user,x\na,user\n", r"line 3: expected 3 fields \(session,role,text\), got 2"),
    ("session,role,text,timestamp\na,user,x,yesterday\n", r"line 2: timestamp is not an ISO-8601 time"),
    ("session,role,text,timestamp\na,user,x,1704106800000\n", r"line 2: .*out of range.*milliseconds"),
    ("session,role,text\n,user,x\n", r"line 2: session must not be empty"),
    ("session,role,text\n\"a\",\"user\",\"multi\nline\"\nb,,x\n", r"line 4: role must not be empty"),
])
def test_bad_csv_names_the_file_and_the_line(tmp_path, text, message):
    with pytest.raises(DatasetError, match=r"bad\.csv " + message):
        load_chatlog(_write(tmp_path, "bad.csv", text))


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("lines,message", [
    ([json.dumps(TRIP), "{not json"], r"line 2: not valid JSON"),
    (['{"messages": [{"content": "no role"}]}'], r"line 1: message 0: a message must be an object with a 'role'"),
    ([json.dumps(TRIP), '{"role": "user", "content": "x"}'],
     r"line 2: a message line in a file of one conversation per line \(line 1\)"),
    (['{"role": "user"}'], r"line 1: a message needs a 'content'"),
    (['{"role": "user", "content": 3}'], r"line 1: 'content' must be a string, a list of parts or null"),
    (['{"role": "user", "content": "x", "timestamp": true}'], r"line 1: the message's timestamp must be"),
    (['"just a string"'], r"line 1: expected a conversation"),
    (['{"role": "user", "content": "\\ud800"}'], r"line 1: 'content' is not valid Unicode"),
    ([json.dumps(TRIP), json.dumps(TRIP)], r"line 2: conversation 'trip' appears twice"),
])
def test_bad_openai_jsonl_names_the_file_and_the_line(tmp_path, lines, message):
    with pytest.raises(DatasetError, match=r"bad\.jsonl " + message):
        load_chatlog(_write(tmp_path, "bad.jsonl", "\n".join(lines) + "\n"), "openai")


DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize("fmt,text", [
    ("openai", '{"messages": [{"role": "user", "content": ' + DEEP + "}]}\n"),
    ("chatgpt", DEEP),
    ("chatgpt", '[{"title": "t", "mapping": ' + DEEP + "}]"),
])
def test_deeply_nested_json_is_a_dataset_error_not_a_recursion_error(tmp_path, fmt, text):
    with pytest.raises(DatasetError, match=r"deep\.json.*nested too deeply"):
        load_chatlog(_write(tmp_path, "deep.json", text), fmt)


def test_deeply_nested_json_of_unknown_shape_is_a_dataset_error_when_detecting(tmp_path):
    with pytest.raises(DatasetError, match="cannot tell the chat format"):
        load_chatlog(_write(tmp_path, "deep.json", DEEP))


def test_a_log_with_nothing_said_is_an_error(tmp_path):
    only_system = _jsonl({"role": "system", "content": "be nice"})
    with pytest.raises(DatasetError, match=r"empty\.jsonl: no chat messages found"):
        load_chatlog(_write(tmp_path, "empty.jsonl", only_system))


def test_unreadable_files_are_dataset_errors(tmp_path):
    with pytest.raises(DatasetError, match=r"nope\.jsonl: cannot read chat log"):
        load_chatlog(tmp_path / "nope.jsonl")
    path = tmp_path / "latin1.csv"
    path.write_bytes("session,role,text\na,user,caf\xe9\n".encode("latin-1"))
    with pytest.raises(DatasetError, match=r"latin1\.csv: not UTF-8 text"):
        load_chatlog(path)


def test_unknown_format_names_the_formats():
    with pytest.raises(DatasetError, match="unknown chat format 'whatsapp'; expected one of openai, chatgpt, csv"):
        loads_chatlog("x", "whatsapp")


def test_format_is_detected_from_the_name_and_the_first_bytes(tmp_path):
    assert detect_chat_format(_write(tmp_path, "a.jsonl", _jsonl(TRIP))) == "openai"
    assert detect_chat_format(_write(tmp_path, "b.txt", _jsonl({"role": "user", "content": "x"}))) == "openai"
    assert detect_chat_format(_write(tmp_path, "conversations.json", json.dumps(EXPORT))) == "chatgpt"
    assert detect_chat_format(_write(tmp_path, "c.csv", CSV)) == "csv"
    assert detect_chat_format(_write(tmp_path, "c.txt", "\ufeffsession,role,text\na,user,x\n")) == "csv"
    assert set(CHAT_FORMATS) == {"openai", "chatgpt", "csv"}
    with pytest.raises(DatasetError, match=r"notes\.txt: cannot tell the chat format; pass format="):
        detect_chat_format(_write(tmp_path, "notes.txt", "dear diary"))


# ---------------------------------------------------------------------------- probes and round trip


def _imported():
    return loads_chatlog(_jsonl(TRIP, SEAT), "openai", name="trips")


def test_add_probe_returns_a_new_conversation_with_the_probe_after_the_last_event():
    conv = _imported()
    before = list(conv.events)
    out = add_probe(conv, "when do I fly to Oslo?", ["trip:0"], session="trip")
    assert conv.events == before  # unchanged
    probe = out.events[-1]
    assert (probe.type, probe.label, probe.session, probe.query) == ("probe", "q1", "trip", "when do I fly to Oslo?")
    assert probe.relevant == {"trip:0": 1.0} and probe.time == conv.events[-1].time + 60
    again = add_probe(out, "which seat?", {"c2:0": 2, "c2:1": 1}, stale_labels=["trip:1"], category="seat")
    assert again.probes[-1].label == "q2" and again.probes[-1].relevant == {"c2:0": 2.0, "c2:1": 1.0}
    assert again.probes[-1].session is None and again.probes[-1].stale == ("trip:1",)


def test_add_probe_at_an_earlier_time_sits_at_that_moment_of_the_timeline():
    conv = _imported()
    t = conv.events[1].time  # trip:1, the assistant's reply
    out = add_probe(conv, "where to?", ["trip:0", "trip:1"], time=t)
    assert [e.label for e in out.events] == ["trip:0", "trip:1", "q1", "c2:0", "c2:1"]


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(relevant_labels=["nope"]), ValueError, "relevant_labels: 'nope' is not the label of a memory"),
    (dict(relevant_labels=["c2:0"], time=0), ValueError, "relevant_labels: 'c2:0' is said after the probe's time"),
    (dict(relevant_labels=["trip:0"], session="elsewhere"), ValueError, "session 'elsewhere' has no memories"),
    (dict(relevant_labels=["trip:0"], stale_labels=["trip:0"]), ValueError, "in both relevant_labels and stale"),
    (dict(relevant_labels="trip:0"), TypeError, "relevant_labels must be a list of labels, not a single string"),
    (dict(relevant_labels={"trip:0": 0}), ValueError, "the grade of 'trip:0' must be a number > 0"),
    (dict(relevant_labels=["trip:0"], label="trip:1"), ValueError, "label 'trip:1' is already used"),
    (dict(relevant_labels=["trip:0"], time="soon"), ValueError, "time is not an ISO-8601 time"),
])
def test_add_probe_rejects_bad_arguments_naming_them(kwargs, error, message):
    conv = _imported()
    with pytest.raises(error, match=message):
        add_probe(conv, "when?", **kwargs)
    assert conv.probes == []


def test_an_import_saved_as_vxmem_jsonl_round_trips_and_replays(tmp_path, word_embedder):
    conv = add_probe(load_chatlog(_write(tmp_path, "log.csv", CSV)), "tea or coffee", ["s1:0"], session="s1")
    path = tmp_path / "log.vxmem.jsonl"
    conv.save(path)
    again = load_jsonl(path)
    assert isinstance(again, Conversation)
    assert again.events == conv.events and again.name == "log" and again.meta == conv.meta
    rep = replay(again, {"limit": 10}, word_embedder)
    # Session s1 holds three turns; with a limit of 10 recall returns all three, the
    # relevant one among them, and nothing of s2.
    probe = rep.probes[0]
    assert probe["n_relevant"] == 1 and probe["hit"] == 1.0 and probe["recall"] == 1.0
    assert sorted(lab for labs in probe["recalled_labels"] for lab in labs) == ["s1:0", "s1:1", "s1:2"]
