"""Every workbench page renders and reacts (streamlit's AppTest, no browser)."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


def page(name=None, dataset=None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    if name is not None:
        at.switch_page(f"app_pages/{name}.py").run()
        assert not at.exception, at.exception
    if dataset is not None:
        at.selectbox(key="dataset_choice").set_value(dataset).run()
        assert not at.exception, at.exception
    return at


def metric_values(at):
    return {m.label: m.value for m in at.metric}


def charts(at):
    return at.get("vega_lite_chart")


# ---------------------------------------------------------------- Playground


def test_playground_ranks_the_correction_first_and_draws_score_parts():
    at = page()
    assert not at.error
    ranking = at.dataframe[0].value
    assert "light mode" in ranking.iloc[0]["text"]
    assert "I prefer dark mode" not in " ".join(ranking["text"])  # superseded: out of recall
    assert charts(at), "the stacked bar of score parts is missing"
    chains = at.dataframe[1].value
    assert chains["label"].tolist() == ["m2", "m4"]  # the supersession chain, oldest first


def test_playground_half_life_slider_changes_the_scores():
    at = page()
    before = at.dataframe[0].value["score"].tolist()
    at.slider(key="pg_half_life_days").set_value(120.0).run()
    assert not at.exception
    assert at.dataframe[0].value["score"].tolist() != before


def test_playground_remembers_a_fact_and_moves_the_clock():
    at = page()
    clock = at.markdown[0].value
    at.button(key="pg_step_+1 month").click().run()
    assert at.markdown[0].value != clock
    at.text_area(key="pg_text").set_value("I switched back to dark mode after all").run()
    at.radio(key="pg_kind").set_value("fact").run()
    at.button(key="pg_remember").click().run()
    assert not at.exception and not at.error
    assert "I switched back to dark mode after all" in at.dataframe[0].value["text"].tolist()


def test_playground_grading_a_result_dead_end_lowers_its_feedback():
    at = page()
    top = at.dataframe[0].value.iloc[0]["label"]
    at.selectbox(key="pg_graded").set_value(top).run()
    at.button(key="pg_dead_end").click().run()
    assert not at.exception and not at.error
    row = at.dataframe[0].value.set_index("label").loc[top]
    assert row["feedback"] < 0


def test_playground_correction_extends_the_chain():
    at = page()
    at.selectbox(key="pg_target").set_value("m3").run()
    at.text_input(key="pg_correction").set_value("My sister Ana moved from Lisbon to Porto.").run()
    at.button(key="pg_correct").click().run()
    assert not at.exception and not at.error
    chains = at.selectbox(key="pg_chain").options
    assert any("m3" in c for c in chains)


# ---------------------------------------------------------------- Replay


def test_replay_page_shows_the_timeline_and_the_recall_at_a_probe():
    at = page("replay")
    assert not at.error
    assert charts(at), "the timeline chart is missing"
    results = at.dataframe[1].value
    assert {"rank", "label", "text", "relevant", "stale"} <= set(results.columns)
    assert len(results) > 0


def test_replay_probe_slider_changes_what_recall_returned():
    at = page("replay")
    before = at.dataframe[1].value["text"].tolist()
    slider = at.select_slider(key="replay_probe")
    slider.set_value(len(slider.options) - 1).run()  # the values are probe numbers
    assert not at.exception
    assert at.dataframe[1].value["text"].tolist() != before


def test_replay_of_the_locomo_fixture_marks_relevant_evidence():
    at = page("replay", dataset="fixtures/locomo_sample.json")
    assert not at.error
    assert at.dataframe[1].value is not None


# ---------------------------------------------------------------- Tune


def test_tune_page_shows_metrics_and_a_ranking():
    at = page("tune")
    assert not at.error
    labels = [m.label for m in at.metric]
    assert labels == ["hit@k", "MRR", "nDCG@k", "stale-leak@k"]
    assert len(at.table) == 1 and len(at.table[0].value) == 10
    assert charts(at), "the rank-movement chart is missing"


def test_tune_half_life_slider_changes_metrics_and_ranking():
    at = page("tune")
    metrics, ranking = metric_values(at), at.table[0].value["text"].tolist()
    at.slider(key="tune_half_life_days").set_value(180.0).run()
    assert not at.exception
    assert metric_values(at) != metrics
    assert at.table[0].value["text"].tolist() != ranking


def test_tune_limit_slider_shortens_the_ranking():
    at = page("tune")
    at.slider(key="tune_limit").set_value(3).run()
    assert len(at.table[0].value) == 3


# ---------------------------------------------------------------- Sweep


def test_sweep_page_draws_a_heatmap_with_best_and_default_and_offers_csv():
    at = page("sweep")
    assert not at.error
    assert charts(at), "the heatmap is missing"
    assert [m.label for m in at.metric] == ["best nDCG@k", "default nDCG@k"]
    assert float(at.metric[0].value) >= float(at.metric[1].value)
    assert at.get("download_button"), "no CSV download"


def test_sweep_range_slider_changes_the_best_point():
    at = page("sweep")
    before = metric_values(at)
    at.slider(key="sweep_range_recency_weight").set_value((1.5, 2.0)).run()
    assert not at.exception
    assert metric_values(at) != before


# ---------------------------------------------------------------- Budget


def test_budget_page_splits_tokens_by_section_and_shows_the_text():
    at = page("budget")
    assert not at.error
    used, limit = at.metric[0].value.split(" / ")
    assert int(used) <= int(limit)
    assert at.code and at.code[0].value != "(empty)"
    assert charts(at)


def test_budget_slider_changes_the_tokens_used():
    at = page("budget")
    before = metric_values(at)
    at.select_slider(key="budget_tokens").set_value(50).run()
    assert not at.exception
    after = metric_values(at)
    assert after != before
    assert int(after["tokens used"].split(" / ")[0]) <= 50


# ---------------------------------------------------------------- Compare


def test_compare_page_has_every_policy_at_default_and_best():
    at = page("compare")
    assert not at.error
    table = at.dataframe[0].value
    assert set(table["policy"]) == {"blend", "cosine", "multiplicative", "langchain", "generative_agents",
                                    "memorybank"}
    assert sorted(table["setting"].unique()) == ["best", "default"]
    best = table[table["setting"] == "best"].set_index("policy")["ndcg"]
    default = table[table["setting"] == "default"].set_index("policy")["ndcg"]
    assert (best >= default - 1e-12).all()


def test_compare_limit_slider_changes_the_metrics():
    at = page("compare")
    before = at.dataframe[0].value[["hit", "ndcg"]].to_numpy().tolist()
    at.slider(key="compare_limit").set_value(2).run()
    assert not at.exception
    assert at.dataframe[0].value[["hit", "ndcg"]].to_numpy().tolist() != before


# ---------------------------------------------------------------- uploads


@pytest.mark.parametrize("name, content", [
    ("broken.jsonl", b'{"format": "vxmem-conversation/1", "name": "x"}\n{"time": "yesterday", "type": "turn"}\n'),
    ("broken.json", b"[{\"sample_id\": \"s1\", \"conversation\": 3}]"),
    ("notjson.json", b"\xff\xfe this is not json"),
])
def test_a_bad_upload_gets_a_clear_error_not_a_traceback(name, content):
    at = page("tune", dataset="Upload a file...")
    assert at.error  # asks for a file
    at.file_uploader(key="dataset_upload").upload(name, content).run()
    assert not at.exception
    assert at.error and "Cannot load" in at.error[0].value and name in at.error[0].value


def test_an_uploaded_longmemeval_file_is_replayed():
    data = (ROOT / "datasets" / "fixtures" / "longmemeval_sample.json").read_bytes()
    at = page("tune", dataset="Upload a file...")
    at.file_uploader(key="dataset_upload").upload("lme.json", data).run()
    assert not at.exception and not at.error
    assert len(at.metric) == 4


def test_the_dataset_choice_survives_a_visit_to_the_playground():
    at = page("tune", dataset="many_users")
    at.switch_page("app_pages/playground.py").run()
    at.switch_page("app_pages/tune.py").run()
    assert not at.exception
    assert at.selectbox(key="dataset_choice").value == "many_users"
