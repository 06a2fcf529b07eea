"""The QA page (streamlit's AppTest, no browser) against the loopback chat-completions server: the
same code path as `vxmem qa`, its accuracy per category charted with intervals."""

import json
import re
import urllib.request
from importlib.util import find_spec

import pytest
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from helpers import ROOT
from servers import free_port, llm_stub

# Checked without importing: jsonschema (with rfc3987-syntax, which builds its grammar on import) and
# openai take 1-2 s of CPU to import, and every xdist worker collects this module; vxmem.llm imports
# them when a test calls it.
pytestmark = [pytest.mark.subprocess, pytest.mark.usefixtures("charts_from_channel_objects"),
              pytest.mark.skipif(find_spec("openai") is None or find_spec("jsonschema") is None,
                                 reason='needs the llm extra: pip install "vxmem[llm]"')]
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def server():
    with llm_stub() as base:
        yield base


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    """Saved sessions and the reply cache go to a temporary directory, not the home directory."""
    from app_pages import config

    monkeypatch.setattr(config, "SESSIONS_DIR", tmp_path / "sessions")
    monkeypatch.setenv("VXMEM_CACHE_DIR", str(tmp_path / "cache"))


def received(server: str) -> list[dict]:
    with urllib.request.urlopen(f"{server}/requests", timeout=10) as r:
        return json.loads(r.read())


def qa_page(dataset: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("app_pages/qa.py").run()
    at.selectbox(key="dataset_choice").set_value(dataset).run()
    assert not at.exception, at.exception
    return at


def ask(at: AppTest, url: str, model: str = "qa-answerer") -> AppTest:
    at.text_input(key="qa_url").input(url)
    at.text_input(key="qa_model").input(model)
    at.text_input(key="qa_judge").input("qa-judge")
    at.multiselect(key="qa_systems").set_value(["bm25", "vxmem:fast"])
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at


def test_the_page_charts_accuracy_per_category_with_intervals_from_the_endpoints_grades(server):
    at = ask(qa_page("fixtures/locomo_sample.json"), f"{server}/v1")
    [chart] = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    rows = [r for d in chart.proto.datasets for r in convert_arrow_bytes_to_pandas_df(d.data.data).to_dict("records")]
    assert {r["system"] for r in rows} == {"bm25", "vxmem:fast"}
    every = [r for r in rows if r["category"] == "all"]
    assert len(every) == 2 and all(r["questions"] == 5 for r in every)
    assert all(r["accuracy_lo"] <= r["accuracy"] <= r["accuracy_hi"] for r in rows)
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["bar", "rule"]  # the bars and their interval whiskers
    assert any(a["model"] == "qa-judge" for a in received(server))
    assert "sha256" in at.expander[0].label


def test_a_failing_endpoint_is_one_line_on_the_page_and_no_chart(server):
    at = ask(qa_page("fixtures/locomo_sample.json"), f"http://127.0.0.1:{free_port()}/v1")
    assert not at.get("vega_lite_chart")
    [error] = at.error
    assert "answer via 'qa-answerer'" in error.value and "\n" not in error.value


def test_a_dataset_without_gold_answers_says_what_to_pick():
    at = qa_page("knowledge_update")
    assert any("no probe with a gold answer" in i.value for i in at.info)


def test_a_script_for_an_endpoint_url_is_refused_as_text_and_nothing_is_asked(server):
    before = len(received(server))
    at = ask(qa_page("fixtures/locomo_sample.json"), "<script>alert(1)</script>")
    [error] = at.error
    assert "must be the endpoint's http(s) URL" in error.value  # said, with the script as escaped text
    assert "\\<script\\>" in error.value and not re.search(r"(?<!\\)<script", error.value)
    assert not at.get("vega_lite_chart") and len(received(server)) == before


def test_a_judge_prompt_written_on_the_page_grades_and_is_named_by_its_hash(server):
    at = qa_page("fixtures/locomo_sample.json")
    own = "Strictly: does $answer state $gold? Reply as the schema says."
    at.text_area(key="qa_judge_prompt").input(own)
    at.number_input(key="qa_workers").set_value(2)
    before = len(received(server))
    ask(at, f"{server}/v1")
    sent = received(server)[before:]
    graded = [r for r in sent if r["model"] == "qa-judge"]
    assert graded and all(r["messages"][0]["content"].startswith("Strictly: does ") for r in graded)
    report = at.session_state["qa_result"]["report"]
    assert report["settings"]["workers"] == 2
    assert report["prompts"]["judge"]["text"] == own
    assert any("judge of your own" in c.value for c in at.caption), [c.value for c in at.caption]


def test_a_prompt_without_its_placeholders_is_refused_on_the_page_and_nothing_is_asked(server):
    at = qa_page("fixtures/locomo_sample.json")
    at.text_area(key="qa_answer_prompt").input("Answer the question: $question")
    before = len(received(server))
    ask(at, f"{server}/v1")
    assert len(received(server)) == before
    assert any("no $memories in it" in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
