"""The workbench at its edges: input a newcomer gets wrong is refused with a message that names
it, and input that means something reasonable does what it says."""

import json
import math

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.workbench.analysis import metrics as M
from vxmem.workbench.analysis.questions import inert_parameters
from vxmem.workbench.datasets import Conversation, DatasetError, Event
from vxmem.workbench.datasets.chatlogs import loads_chatlog
from vxmem.workbench.datasets.jsonl import load_jsonl, loads_jsonl
from vxmem.workbench.datasets.locomo import load_locomo
from vxmem.workbench.datasets.longmemeval import load_longmemeval
from vxmem.workbench.replay.run import replay
from vxmem.workbench.sweep.run import sweep
from vxmem.workbench.synth import generate

HEAD = '{"format": "vxmem-conversation/1", "name": "t"}\n'
DRIFT = "datasets/preference_drift.jsonl"


@pytest.fixture(scope="module")
def drift():
    return replay(load_jsonl(DRIFT), embedder="hashing")


# ---------------------------------------------------------------------------- datasets


def test_a_null_time_is_refused_not_read_as_the_wall_clock():
    with pytest.raises(DatasetError, match="needs a 'time'"):
        loads_jsonl(HEAD + '{"time": null, "type": "turn", "text": "x"}')


@pytest.mark.parametrize("fields,message", [
    ({"relevant": {"a": 0}}, "must be a finite number > 0"),
    ({"relevant": {"a": -1}}, "must be a finite number > 0"),
    ({"relevant": {"a": math.nan}}, "must be a finite number > 0"),
    ({"relevant": ["a"], "stale": ["a"]}, "both relevant and stale"),
    ({"limit": 0}, "limit must be an integer >= 1"),
    ({"query": "  "}, "query must be a non-empty string"),
])
def test_a_probe_built_in_code_is_checked_as_its_reader_checks_it(fields, message):
    kwargs = {"query": "hi", **fields}
    with pytest.raises(DatasetError, match=message):
        Event(1, "probe", **kwargs)


def test_a_conversation_refuses_a_probe_without_a_query():
    with pytest.raises(DatasetError, match="a probe needs a query"):
        Conversation("x", [Event(0, "turn", text="hi", label="a"), Event(1, "probe", relevant=["a"])])


def test_an_event_time_must_be_finite():
    with pytest.raises(DatasetError, match="finite"):
        Event(math.inf, "turn", text="hi")


@pytest.mark.parametrize("header,message", [
    ({"settings": 5}, "'settings' must be an object"),
    ({"judge": 3}, "'judge' must be a string"),
])
def test_a_header_of_the_wrong_shape_is_refused_at_load(header, message):
    head = json.dumps({"format": "vxmem-conversation/1", "name": "t", **header})
    with pytest.raises(DatasetError, match=message):
        loads_jsonl(head + '\n{"time": 0, "type": "turn", "text": "x"}')


def test_a_chatgpt_node_whose_children_are_not_a_list_is_a_dataset_error():
    with pytest.raises(DatasetError, match="'children' must be a list"):
        loads_chatlog('[{"mapping": {"a": {"message": null, "parent": null, "children": 5}}}]', "chatgpt")


def test_a_chat_without_an_id_is_never_named_like_one_the_file_names():
    text = ('{"messages": [{"role": "user", "content": "a"}]}\n'
            '{"id": "c1", "messages": [{"role": "user", "content": "b"}]}\n'
            '{"messages": [{"role": "user", "content": "c"}]}\n')
    sessions = {e.text: e.session for e in loads_chatlog(text, "openai").events if e.type == "turn"}
    assert sessions == {"a": "c1-2", "b": "c1", "c": "c3"}


def test_a_chatgpt_conversation_without_an_id_is_named_apart_from_those_with_one():
    def conv(text, **extra):
        node = {"message": {"author": {"role": "user"}, "content": {"content_type": "text", "parts": [text]},
                            "create_time": 1_700_000_000}, "parent": None, "children": []}
        return {"title": text, "create_time": 1_700_000_000, "mapping": {"n": node}, "current_node": "n", **extra}
    data = json.dumps([conv("a"), conv("b", id="c1")])
    sessions = {e.text: e.session for e in loads_chatlog(data, "chatgpt").events if e.type == "turn"}
    assert sessions == {"a": "c1-2", "b": "c1"}


def _locomo(tmp_path, **sample):
    base = {"sample_id": "s", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023",
                                               "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]},
            "qa": [{"question": "hi?", "evidence": ["D1:1"], "category": 4}]}
    base.update(sample)
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([base]))
    return path


@pytest.mark.parametrize("change,message", [
    ({"conversation": {"session_1": [{"speaker": "A", "text": "hi"}]}}, "needs a 'dia_id'"),
    ({"conversation": {"session_1_date_time": 5, "session_1": []}}, "session_1_date_time must be a date"),
    ({"qa": {}}, "'qa' must be a list"),
    ({"qa": [{"question": "", "evidence": []}]}, "query must be a non-empty string"),
])
def test_a_malformed_locomo_sample_says_what_is_wrong(tmp_path, change, message):
    with pytest.raises(DatasetError, match=message):
        load_locomo(_locomo(tmp_path, **change))


def test_a_good_locomo_sample_still_loads(tmp_path):
    (conv,) = load_locomo(_locomo(tmp_path))
    assert [p.relevant for p in conv.probes] == [{"D1:1": 1.0}]


@pytest.mark.parametrize("change,message", [
    ({"question": ""}, "'question' must be a non-empty string"),
    ({"answer_session_ids": "x"}, "'answer_session_ids' must be a list"),
])
def test_a_malformed_longmemeval_instance_says_what_is_wrong(tmp_path, change, message):
    inst = {"question_id": "q1", "question": "where?", "question_date": "2023/05/20 (Sat) 02:21",
            "haystack_sessions": [[{"role": "user", "content": "in Porto", "has_answer": True}]],
            "haystack_dates": ["2023/05/20 (Sat) 01:00"], "haystack_session_ids": ["s1"],
            "answer_session_ids": ["s1"], **change}
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([inst]))
    with pytest.raises(DatasetError, match=message):
        load_longmemeval(path)


def test_a_one_week_drift_labels_what_holds_after_the_change():
    conv = generate("preference_drift", 0, users=1, topics=1, weeks=1, chatter=1)
    changes = [p for p in conv.probes if p.category in ("before_change", "after_change")]
    assert changes and all(p.category == "after_change" and p.stale for p in changes)


# ---------------------------------------------------------------------------- metrics, sweeps, replays


@pytest.mark.parametrize("k", [0, -1])
def test_a_metric_refuses_a_k_below_one(k):
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        M.hit_at_k([0, 1], k)
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        M.ndcg_at_k([1, 0, 0], [1], k)


def test_a_metric_refuses_a_k_that_is_not_an_int():
    with pytest.raises(TypeError, match="k must be a positive int"):
        M.recall_at_k([0, 1], 1, 1.5)


def test_ndcg_at_k_still_reads_k_past_the_ranking_and_none_as_all():
    assert M.ndcg_at_k([0, 1], [1, 1], 5) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert M.ndcg_at_k([1, 0], [1], None) == 1.0


def test_mrr_of_no_rankings_is_nan_without_a_warning(recwarn):
    assert math.isnan(M.mrr(np.zeros((0, 5))))
    assert M.mrr([]) == 0.0
    assert not recwarn.list


def test_hybrid_weight_is_not_inert_in_recalls_default_mode(drift):
    assert "hybrid_weight" not in inert_parameters({"hybrid_weight": 0.3})
    assert "hybrid_weight" not in inert_parameters({"hybrid_weight": 0.3}, replays=drift)
    dense = replay(load_jsonl(DRIFT), {"mode": "dense"}, embedder="hashing")
    assert "mode is dense" in inert_parameters({"hybrid_weight": 0.3}, replays=dense)["hybrid_weight"]
    assert "hybrid_weight" not in inert_parameters({"hybrid_weight": 0.3}, replays=[dense, drift])


def test_replay_reads_kinds_as_recall_does(drift):
    conv = load_jsonl(DRIFT)
    one = replay(conv, {"kinds": "turn"}, embedder="hashing")
    listed = replay(conv, {"kinds": ["turn"]}, embedder="hashing")
    labels = [rep.to_frames()["probes"]["recalled_labels"].tolist() for rep in (one, listed)]
    assert labels[0] == labels[1]
    assert one.settings["kinds"] == ("turn",)
    with pytest.raises(ValueError, match="kinds must name at least one"):
        replay(conv, {"kinds": []}, embedder="hashing")


def test_replay_refuses_settings_that_are_not_a_dict():
    with pytest.raises(TypeError, match="settings must be a dict"):
        replay(load_jsonl(DRIFT), "limit", embedder="hashing")


@pytest.mark.parametrize("budget", [0, -3])
def test_replay_rank_refuses_a_budget_sweep_and_recall_refuse(drift, budget):
    with pytest.raises(ValueError, match="token_budget must be an int >= 1"):
        drift.rank(token_budget=budget)
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        drift.rank(limit=0)


def test_a_sweeps_best_names_the_metrics_it_has(drift):
    result = sweep(drift, {"half_life_days": [1.0, 7.0]})
    assert result.best("rr", 1).index.equals(result.best("mrr", 1).index)
    with pytest.raises(KeyError, match="metric 'foo' is not in this sweep; metrics: hit, recall, mrr"):
        result.best("foo")
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        result.best("ndcg", 0)


def test_a_grid_axis_may_be_a_set_or_a_generator(drift):
    from_set = sweep(drift, {"half_life_days": {7.0, 1.0}}).per_point
    from_gen = sweep(drift, {"half_life_days": (x for x in (1.0, 7.0))}).per_point
    assert from_set["half_life_days"].tolist() == from_gen["half_life_days"].tolist() == [1.0, 7.0]


# ---------------------------------------------------------------------------- a TTL past the clock's range


@pytest.mark.parametrize("ttl", [1e12, 1e300])
def test_a_ttl_past_the_last_time_the_clock_reads_is_forever(ttl):
    db = Vectrix(embedder="hashing")
    mid = db.remember("a very long lived memory", timestamp=0, ttl_days=ttl)
    assert "_vx_expires" not in db.get(mid).metadata
    assert db.expire(now="9999-12-31T00:00:00") == 0
    assert mid in db.recall("long lived memory", now="9999-12-31T00:00:00").ids


def test_a_ttl_inside_the_clocks_range_still_expires():
    db = Vectrix(embedder="hashing")
    mid = db.remember("a memory that expires", timestamp=0, ttl_days=1e6)  # year 4707
    assert db.get(mid).metadata["_vx_expires"] == 1e6 * 86400
    assert db.expire(now="9999-12-31T00:00:00") == 1


def test_a_duplicate_label_names_the_line_of_the_first():
    text = (HEAD + '{"time": 0, "type": "turn", "label": "a", "text": "x"}\n'
            '{"time": 1, "type": "turn", "label": "b", "text": "y"}\n'
            '{"time": 2, "type": "turn", "label": "a", "text": "z"}\n')
    with pytest.raises(DatasetError, match="line 4: label 'a' is already used by line 2"):
        loads_jsonl(text)
    with pytest.raises(DatasetError, match="already used by event 0"):
        Conversation("x", [Event(0, "turn", text="x", label="a"), Event(1, "turn", text="y", label="a")])


def test_a_byte_order_mark_before_the_header_is_skipped():
    conv = loads_jsonl("\ufeff" + HEAD + '{"time": 0, "type": "turn", "text": "x"}\n')
    assert [e.text for e in conv.events] == ["x"]


def test_another_version_of_the_format_is_named_as_such():
    with pytest.raises(DatasetError, match="'vxmem-conversation/2', a version of the format this vxmem does not read"):
        loads_jsonl('{"format": "vxmem-conversation/2", "name": "t"}\n{"time": 0, "type": "turn", "text": "x"}\n')
