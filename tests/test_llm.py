"""The chat-completions judge and summarizer (vxmem.llm) against a loopback server of the tests' own.

tests/llm_server.py runs as a real subprocess on a free loopback port and plays back
tests/data/llm_answers.json: hand-written answers in the chat-completions format (no model ran;
see tests/data/README.md), malformed JSON, answers outside the schema, a hang past the
client's timeout and 500s. Whatever fails, the memory is unchanged.
"""

import json
from importlib.util import find_spec

import pytest

from vxmem import Vectrix
from vxmem.llm import LLMError, OpenAICompatibleChat, OpenAICompatibleJudge, OpenAICompatibleSummarizer

from helpers import DAY, T0
from servers import llm_stub, stub_received, stub_rewound

# Checked without importing: openai and jsonschema take 1-2 s of CPU to import, and every xdist
# worker collects this module; vxmem.llm imports them when a test calls it.
pytestmark = pytest.mark.skipif(find_spec("openai") is None or find_spec("jsonschema") is None,
                                reason='needs the llm extra: pip install "vxmem[llm]"')

JUDGE_FAILURES = ["judge-malformed", "judge-wrong-count", "judge-prose", "judge-no-choices", "judge-500",
                  "judge-hang"]
SUMMARIZER_FAILURES = ["summarizer-malformed", "summarizer-wrong-type", "summarizer-surrogate", "summarizer-500",
                       "summarizer-hang"]


@pytest.fixture(scope="module")
def server():
    with llm_stub() as base:
        yield base


@pytest.fixture
def url(server):
    """The server's base URL for the SDK, with its scripts rewound and its request log empty."""
    return stub_rewound(server)


def received(url: str) -> list[dict]:
    """The request bodies the server received since the test began."""
    return stub_received(url)


def endpoint(cls, model, url, **kw):
    """An adapter for ``model`` at ``url`` that fails fast: a short timeout, one retry, no backoff."""
    return cls(model, base_url=url, **{"timeout": 0.5, "retries": 1, "backoff": 0.0, **kw})


def state(db) -> dict:
    """Every memory's text and metadata: what "the memory is unchanged" compares."""
    with db.engine.locked() as m:
        return {i: (m.texts[p], json.dumps(m.metas[p], sort_keys=True, default=str)) for i, p in m.pos_of_id.items()}


def lisbon(judge) -> tuple[Vectrix, str]:
    db = Vectrix(judge=judge)
    old = db.remember("Dana lives in Lisbon.", kind="fact", session="s", timestamp=T0)
    return db, old


def chat(db, session="s") -> list[str]:
    texts = ["I'm allergic to peanuts.", "What's the weather like?", "I live in Lisbon by the way.", "Thanks!"]
    return [db.remember(t, session=session, role="user" if i % 2 == 0 else "assistant", timestamp=T0 + i * 60)
            for i, t in enumerate(texts)]


# ---------------------------------------------------------------------------- the judge

def test_a_contradiction_the_endpoint_reports_supersedes_the_old_fact(url):
    db, old = lisbon(endpoint(OpenAICompatibleJudge, "judge-recorded", url))
    new = db.remember("Dana has moved to Porto.", kind="fact", session="s", timestamp=T0 + DAY)
    assert [e.id for e in db.history(new)] == [old, new] and not db.history(new)[0].live
    [asked] = received(url)
    assert asked["response_format"]["type"] == "json_schema"
    assert asked["response_format"]["json_schema"]["schema"]["properties"]["contradicted"]["maxItems"] == 1
    assert "Dana has moved to Porto." in asked["messages"][1]["content"]
    assert "1. Dana lives in Lisbon." in asked["messages"][1]["content"]


def test_a_fact_the_endpoint_keeps_stays_live(url):
    db, old = lisbon(endpoint(OpenAICompatibleJudge, "judge-keeps", url))
    db.remember("Dana likes the sea.", kind="fact", session="s", timestamp=T0 + DAY)
    assert db.history(old)[0].live


def test_a_transient_500_is_retried(url):
    db, old = lisbon(endpoint(OpenAICompatibleJudge, "judge-flaky", url))
    db.remember("Dana has moved to Porto.", kind="fact", session="s", timestamp=T0 + DAY)
    assert not db.history(old)[0].live
    assert len(received(url)) == 2


@pytest.mark.parametrize("model", JUDGE_FAILURES)
def test_a_failing_judge_raises_and_stores_nothing(url, model):
    db, _ = lisbon(endpoint(OpenAICompatibleJudge, model, url))
    before = state(db)
    with pytest.raises(LLMError, match="nothing was changed") as err:
        db.remember("Dana has moved to Porto.", kind="fact", session="s", timestamp=T0 + DAY)
    assert state(db) == before
    assert len(err.value.attempts) == 2 and len(received(url)) == 2  # bounded: one try and one retry


@pytest.mark.parametrize("model", JUDGE_FAILURES)
def test_a_failing_judge_that_keeps_supersedes_nothing_and_reports_it(url, model):
    judge = endpoint(OpenAICompatibleJudge, model, url, on_error="keep")
    db, old = lisbon(judge)
    before = state(db)
    new = db.remember("Dana has moved to Porto.", kind="fact", session="s", timestamp=T0 + DAY)
    assert state(db) == {**before, new: state(db)[new]}  # the new fact is stored, the old one untouched
    assert db.history(old)[0].live and [e.id for e in db.history(new)] == [new]
    [failure] = judge.failures
    assert failure.task == "contradiction_judge" and len(failure.attempts) == 2


def test_the_judge_is_not_asked_about_no_candidates(url):
    judge = endpoint(OpenAICompatibleJudge, "judge-recorded", url)
    assert judge("Dana has moved to Porto.", []) == []
    assert received(url) == []


# ---------------------------------------------------------------------------- the summarizer

def test_consolidation_stores_the_endpoints_facts_and_drops_the_turns(url):
    db = Vectrix()
    turns = chat(db)
    report = db.consolidate("s", endpoint(OpenAICompatibleSummarizer, "summarizer-recorded", url), keep_recent=0,
                            now=T0 + DAY)
    assert report.completed and report.turns_consolidated == turns and report.turns_deleted == 4
    assert [db.get(f).text for f in report.facts] == ["The user is allergic to peanuts.",
                                                            "The user lives in Lisbon."]
    assert db.turns("s") == []
    [asked] = received(url)
    assert "user: I'm allergic to peanuts." in asked["messages"][1]["content"]


@pytest.mark.parametrize("model", ["summarizer-fenced", "summarizer-fenced-upper"])
def test_a_fenced_answer_is_read(url, model):
    db = Vectrix()
    chat(db)
    report = db.consolidate("s", endpoint(OpenAICompatibleSummarizer, model, url), keep_recent=0,
                            now=T0 + DAY)
    assert [db.get(f).text for f in report.facts] == ["The user is allergic to peanuts."]


def test_no_fact_keeps_the_turns(url):
    db = Vectrix()
    turns = chat(db)
    report = db.consolidate("s", endpoint(OpenAICompatibleSummarizer, "summarizer-nothing", url), keep_recent=0,
                            now=T0 + DAY)
    assert report.turns_kept == turns and report.facts == [] and len(db.turns("s")) == 4


@pytest.mark.parametrize("model", SUMMARIZER_FAILURES)
def test_a_failing_summarizer_raises_and_keeps_the_turns(url, model):
    db = Vectrix()
    chat(db)
    before = state(db)
    with pytest.raises(LLMError, match="summarizer") as err:
        db.consolidate("s", endpoint(OpenAICompatibleSummarizer, model, url), keep_recent=0, now=T0 + DAY)
    assert state(db) == before
    assert err.value.report.facts == [] and not err.value.report.completed


@pytest.mark.parametrize("model", SUMMARIZER_FAILURES)
def test_a_failing_summarizer_that_keeps_reports_the_turns_kept(url, model):
    db = Vectrix()
    turns = chat(db)
    before = state(db)
    summarize = endpoint(OpenAICompatibleSummarizer, model, url, on_error="keep")
    report = db.consolidate("s", summarize, keep_recent=0, now=T0 + DAY)
    assert state(db) == before
    assert report.turns_kept == turns and report.facts == [] and report.turns_deleted == 0
    assert len(summarize.failures) == 1 and "nothing was changed" in summarize.failures[0].message


# ---------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("kw, error", [
    ({"base_url": "localhost:8000"}, ValueError),
    ({"on_error": "ignore"}, ValueError),
    ({"retries": -1}, ValueError),
    ({"timeout": 0}, ValueError),
    ({"response_format": "yaml"}, ValueError),
])
def test_bad_settings_are_refused_before_any_request(url, kw, error):
    with pytest.raises(error):
        OpenAICompatibleJudge("judge-recorded", **{"base_url": url, **kw})
    assert received(url) == []


# ---------------------------------------------------------------------------- plain answers

def test_a_plain_completion_carries_its_text_and_the_tokens_the_endpoint_counted(url):
    chat = endpoint(OpenAICompatibleChat, "judge-recorded", url)
    reply = chat.complete([{"role": "user", "content": "Say something."}])
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ('{"contradicted": [true]}', 120, 12)
    assert reply.seconds > 0
    [asked] = received(url)
    assert "response_format" not in asked  # no schema: plain text is asked for


def test_a_failing_plain_completion_names_its_task_and_the_endpoint(url):
    chat = endpoint(OpenAICompatibleChat, "judge-500", url, task="answer")
    with pytest.raises(LLMError, match=r"^answer via 'judge-500' at .* failed 2 time\(s\)"):
        chat.complete([{"role": "user", "content": "Say something."}])
    assert len(received(url)) == 2
