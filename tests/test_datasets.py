"""Conversations: the event model, the JSONL format and its validation, benchmark loaders."""

import json
from pathlib import Path

import pytest

from vxmem.workbench.datasets import (
    Conversation,
    DatasetError,
    Event,
    load,
    load_jsonl,
    load_locomo,
    load_longmemeval,
    loads_jsonl,
    parse_locomo_date,
    parse_longmemeval_date,
    save_jsonl,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "datasets" / "fixtures"
HEADER = {"format": "vxmem-conversation/1", "name": "t", "description": "test"}


def _jsonl(*events, header=HEADER):
    return "\n".join(json.dumps(x) for x in [header, *events]) + "\n"


GOOD = [
    {"time": "2024-01-01T09:00:00Z", "type": "turn", "label": "a", "session": "u", "text": "I prefer dark mode"},
    {"time": "2024-01-02T09:00:00Z", "type": "fact", "label": "f", "session": "u", "text": "User lives in Oslo",
     "pinned": True},
    {"time": "2024-01-03T09:00:00Z", "type": "feedback", "target": "a", "outcome": "corrected",
     "correction": "I prefer light mode", "label": "c"},
    {"time": "2024-01-04T09:00:00Z", "type": "probe", "query": "which theme?", "session": "u",
     "relevant": {"c": 2, "f": 1}, "stale": ["a"], "category": "drift"},
]


def test_jsonl_round_trip_keeps_every_event(tmp_path):
    conv = loads_jsonl(_jsonl(*GOOD))
    path = tmp_path / "c.jsonl"
    save_jsonl(conv, path)
    again = load_jsonl(path)
    assert again.events == conv.events
    assert again.name == "t" and again.description == "test"


def test_probe_relevance_accepts_grades_or_a_list():
    conv = loads_jsonl(_jsonl(*GOOD[:3], {**GOOD[3], "relevant": ["c", "f"]}))
    assert conv.probes[0].relevant == {"c": 1.0, "f": 1.0}
    graded = loads_jsonl(_jsonl(*GOOD))
    assert graded.probes[0].relevant == {"c": 2.0, "f": 1.0}
    assert graded.probes[0].stale == ("a",)


def test_bad_json_is_reported_with_its_line_number():
    text = _jsonl(*GOOD[:2]) + "{not json\n"
    with pytest.raises(DatasetError, match="line 4: not valid JSON"):
        loads_jsonl(text)


def test_missing_field_is_reported_with_its_line_number():
    with pytest.raises(DatasetError, match=r"line 3: 'text' must be a non-empty string"):
        loads_jsonl(_jsonl(GOOD[0], {"time": "2024-01-02T00:00:00Z", "type": "turn"}))


def test_unknown_field_is_refused():
    with pytest.raises(DatasetError, match="line 2: a turn event has no field 'colour'"):
        loads_jsonl(_jsonl({**GOOD[0], "colour": "red"}))


def test_time_going_backwards_is_refused():
    late = {**GOOD[0], "time": "2025-01-01T00:00:00Z"}
    with pytest.raises(DatasetError, match="line 3: time goes backwards"):
        loads_jsonl(_jsonl(late, GOOD[1]))


def test_reference_to_a_later_or_unknown_label_is_refused():
    probe = {**GOOD[3], "relevant": ["nope"], "stale": []}
    with pytest.raises(DatasetError, match="line 3: relevant label 'nope' names no earlier event"):
        loads_jsonl(_jsonl(GOOD[0], probe))


def test_duplicate_label_is_refused():
    with pytest.raises(DatasetError, match="line 3: label 'a' is already used"):
        loads_jsonl(_jsonl(GOOD[0], {**GOOD[1], "label": "a"}))


def test_header_is_required():
    with pytest.raises(DatasetError, match="line 1: the first line must be a header"):
        loads_jsonl(_jsonl(*GOOD[1:], header=GOOD[0]))


def test_empty_file_is_refused():
    with pytest.raises(DatasetError, match="empty file"):
        loads_jsonl("\n\n")


def test_bad_outcome_and_misplaced_correction_are_refused():
    with pytest.raises(DatasetError, match="'outcome' must be one of"):
        loads_jsonl(_jsonl(GOOD[0], {"time": "2024-01-05T00:00:00Z", "type": "feedback", "target": "a",
                                     "outcome": "meh"}))
    with pytest.raises(DatasetError, match="'correction' goes with outcome 'corrected' only"):
        loads_jsonl(_jsonl(GOOD[0], {"time": "2024-01-05T00:00:00Z", "type": "feedback", "target": "a",
                                     "outcome": "useful", "correction": "x"}))


def test_a_label_both_relevant_and_stale_is_refused():
    with pytest.raises(DatasetError, match="both relevant and stale"):
        loads_jsonl(_jsonl(*GOOD[:3], {**GOOD[3], "stale": ["c"]}))


def test_missing_file_gives_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="cannot read"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_conversation_built_in_code_is_validated_too():
    with pytest.raises(DatasetError, match="names no earlier event"):
        Conversation("x", [Event(0.0, "feedback", target="ghost", outcome="useful")])


def test_conversation_to_frame_has_one_row_per_event():
    frame = loads_jsonl(_jsonl(*GOOD)).to_frame()
    assert list(frame["type"]) == ["turn", "fact", "feedback", "probe"]
    assert frame.loc[3, "query"] == "which theme?"


def test_locomo_dates_parse():
    assert parse_locomo_date("1:56 pm on 8 May, 2023") == pytest.approx(1683554160.0)
    assert parse_locomo_date("12:05 am on 1 January, 2023") == pytest.approx(1672531500.0)
    with pytest.raises(ValueError):
        parse_locomo_date("yesterday")


def test_longmemeval_dates_parse():
    assert parse_longmemeval_date("2023/05/30 (Tue) 23:40") == pytest.approx(1685490000.0)


def test_locomo_fixture_loads_turns_probes_and_categories():
    convs = load_locomo(FIXTURES / "locomo_sample.json")
    assert [c.name for c in convs] == ["conv-fx1", "conv-fx2"]
    c = convs[0]
    turns = [e for e in c.events if e.type == "turn"]
    assert turns[0].label == "D1:1" and turns[0].role == "Caroline" and turns[0].session == "conv-fx1:S1"
    assert [p.category for p in c.probes] == ["single-hop", "temporal", "multi-hop", "open-domain"]
    assert [p.meta["category_number"] for p in c.probes] == [4, 2, 1, 3]
    assert all(p.session is None for p in c.probes)
    assert c.probes[0].relevant == {"D1:3": 1.0}


def test_a_locomo_turn_is_stored_as_speaker_colon_text_with_its_photo_caption():
    turns = [e for e in load_locomo(FIXTURES / "locomo_sample.json")[0].events if e.type == "turn"]
    assert turns[0].text == "Caroline: Hey Mel! I went to an LGBTQ support group yesterday and it was so powerful."
    assert turns[3].text == ("Melanie: You'd be amazing at that. I just finished a painting of a sunrise. "
                             "[shares a photo: a painting of a sunrise over a lake]")


def test_adversarial_questions_are_left_out_unless_asked_for():
    c = load_locomo(FIXTURES / "locomo_sample.json")[0]
    assert "adversarial" not in {p.category for p in c.probes}
    assert c.meta["stats"]["qa"] == 5 and c.meta["stats"]["qa_left_out"] == 1
    every = load_locomo(FIXTURES / "locomo_sample.json", categories="all")[0]
    adv = every.probes[4]
    assert adv.category == "adversarial" and adv.meta["answer"] == "A sunrise" and adv.meta["adversarial"]
    some = load_locomo(FIXTURES / "locomo_sample.json", categories=["temporal", 5])[0]
    assert [p.category for p in some.probes] == ["temporal", "adversarial"]
    assert [p.category for p in load_locomo(FIXTURES / "locomo_sample.json", categories="4,1")[0].probes] == [
        "single-hop", "multi-hop"]


@pytest.mark.parametrize("bad, error", [(["trivia"], ValueError), ([6], ValueError), (3.5, TypeError)])
def test_an_unknown_locomo_category_is_a_clear_error(bad, error):
    with pytest.raises(error, match="categories"):
        load_locomo(FIXTURES / "locomo_sample.json", categories=bad)


def test_each_benchmark_loader_names_the_format_it_expected_when_given_the_other():
    with pytest.raises(DatasetError, match=r"not a LongMemEval instance: expected keys question_id.*looks like LoCoMo"):
        load_longmemeval(FIXTURES / "locomo_sample.json")
    with pytest.raises(DatasetError, match=r"not a LoCoMo sample: expected keys sample_id.*looks like LongMemEval"):
        load_locomo(FIXTURES / "longmemeval_sample.json")


def test_locomo_malformed_evidence_is_parsed_where_possible_and_counted():
    c = load_locomo(FIXTURES / "locomo_sample.json")[0]
    assert c.probes[2].relevant == {"D2:2": 1.0, "D1:4": 1.0}  # "D2:2; D1:4"
    assert c.probes[3].relevant == {"D2:5": 1.0, "D3:2": 1.0}  # "D9:1" is not in the conversation
    stats = c.meta["stats"]
    assert stats["evidence_malformed"] == 2  # "D2:2; D1:4" and "see D3"
    assert stats["evidence_unparsed"] == 2  # "see", "D3"
    assert stats["evidence_unresolved"] == 1  # D9:1


def test_locomo_undated_session_follows_the_previous_one_and_probes_come_last():
    c = load_locomo(FIXTURES / "locomo_sample.json")[0]
    s2_last = max(e.time for e in c.events if e.session == "conv-fx1:S2")
    s3_first = min(e.time for e in c.events if e.session == "conv-fx1:S3")
    assert s3_first == s2_last + 3600
    assert c.meta["stats"]["undated_sessions"] == 1 and c.meta["stats"]["dates_without_session"] == 1
    assert min(p.time for p in c.probes) > max(e.time for e in c.events if e.type == "turn")


def test_longmemeval_fixture_loads_one_probe_per_instance():
    convs = load_longmemeval(FIXTURES / "longmemeval_sample.json")
    assert [c.name for c in convs] == ["fx_ssu_1", "fx_ku_2", "fx_ms_3_abs"]
    p = convs[0].probes[0]
    assert p.relevant == {"sess_a:0": 1.0}
    assert p.relevant_sessions == ("sess_a",)
    assert p.category == "single-session-user"
    assert p.time == parse_longmemeval_date("2023/05/30 (Tue) 23:40")


def test_longmemeval_sessions_are_replayed_in_date_order():
    c = load_longmemeval(FIXTURES / "longmemeval_sample.json")[1]
    turns = [e for e in c.events if e.type == "turn"]
    assert [t.session for t in turns] == ["sess_early", "sess_early", "sess_late", "sess_late"]


def test_longmemeval_abstention_is_flagged():
    c = load_longmemeval(FIXTURES / "longmemeval_sample.json")[2]
    assert c.probes[0].meta["abstention"] is True
    assert c.probes[0].relevant == {}


def test_benchmark_loader_reports_bad_structure(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"sample_id": "s", "conversation": {"session_1": "oops"}}]))
    with pytest.raises(DatasetError, match=r"sample 0 \('s'\): session_1 must be a list"):
        load_locomo(bad)
    bad.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(DatasetError, match="JSON list of instances"):
        load_longmemeval(bad)


def test_load_guesses_the_format():
    assert load(FIXTURES / "locomo_sample.json")[0].meta["source"] == "locomo"
    assert load(FIXTURES / "longmemeval_sample.json")[0].meta["source"] == "longmemeval"
    with pytest.raises(DatasetError, match="unknown format"):
        load(FIXTURES / "locomo_sample.json", format="xml")


def test_loaded_benchmark_survives_a_jsonl_round_trip(tmp_path):
    c = load_locomo(FIXTURES / "locomo_sample.json")[0]
    c.save(tmp_path / "c.jsonl")
    assert load_jsonl(tmp_path / "c.jsonl").events == c.events
