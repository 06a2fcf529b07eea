"""`vxmem qa` end to end against the loopback chat-completions server (tests/llm_server.py).

The server runs as a real process and works out its replies from each request by rule, no model:
``qa-answerer`` answers with the memories its prompt lists, joined; ``qa-judge`` says an answer is
correct when it contains the gold answer; ``qa-500`` fails every request. So every figure of a
report can be worked out from the dataset and the recall alone, and the requests the server
received show what the model saw: the whole path (recall, prompt, answer, grade, report, cache,
failing endpoint) is checked against it.
"""

import hashlib
import json
import re
import urllib.request
from importlib.util import find_spec

import pytest

from vxmem.llm import OpenAICompatibleChat
from vxmem.workbench.datasets import load_jsonl
from vxmem.workbench.datasets.formats import load
from vxmem.workbench.qa import AnswerCache, QASetup, answerable, pinned, run_qa

from helpers import ROOT, vxmem_here
from servers import free_port, llm_stub, run_vxmem, stub_received, stub_rewound

# Checked without importing: jsonschema (with rfc3987-syntax, which builds its grammar on import) and
# openai take 1-2 s of CPU to import, and every xdist worker collects this module; vxmem.llm imports
# them when a test calls it.
pytestmark = [pytest.mark.subprocess,
              pytest.mark.skipif(find_spec("openai") is None or find_spec("jsonschema") is None,
                                 reason='needs the llm extra: pip install "vxmem[llm]"')]

LOCOMO = ROOT / "datasets" / "fixtures" / "locomo_sample.json"
JUDGE_FILE = ROOT / "vxmem" / "workbench" / "qa" / "prompts" / "judge.txt"
MEMORY_LINE = re.compile(r"^\d+\. \[[^\]]*\] (.*)$", re.MULTILINE)


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


def qa(url, tmp_path, *extra, model="qa-answerer", judge="qa-judge", dataset=LOCOMO, report="report.json",
       run=vxmem_here):
    """``vxmem qa`` on ``dataset`` against the stub, in this process (``run=run_vxmem``: a child process)."""
    return run("qa", str(dataset), "--base-url", url, "--model", model, "--judge-model", judge,
                     "--cache", str(tmp_path / "cache"), "--json", str(tmp_path / report), "--retries", "0", *extra)


def texts_by_label(conv) -> dict[str, str]:
    return {str(ev.label): " ".join(str(ev.text).split()) for ev in conv.events if ev.type in ("turn", "fact")}


def test_each_answer_comes_from_the_recalled_memories_alone_and_is_graded_with_the_pinned_prompt(url, tmp_path):
    r = qa(url, tmp_path, "--system", "bm25", "--k", "3")
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    convs = load(str(LOCOMO), format="locomo")
    questions = report["questions"]
    assert len(questions) == answerable(convs) == 5  # the fixture's adversarial question is left out
    asked = received(url)
    answers = [a for a in asked if a["model"] == "qa-answerer"]
    grades = [a for a in asked if a["model"] == "qa-judge"]
    assert len(answers) == len(grades) == len(questions)
    said = {c.name: texts_by_label(c) for c in convs}
    for q, a, g in zip(questions, answers, grades, strict=True):
        [message] = a["messages"]
        assert message["role"] == "user" and f"Question: {q['question']}" in message["content"]
        # The memories in the prompt are exactly the ones the system recalled, best first.
        assert MEMORY_LINE.findall(message["content"]) == [said[q["conversation"]][lab] for lab in q["ranked"]]
        assert "response_format" not in a
        judged = g["messages"][0]["content"]
        assert f"Gold answer: {q['gold']}" in judged and f"Candidate answer: {q['answer']}" in judged
        assert g["response_format"]["json_schema"]["schema"]["required"] == ["correct"]
        assert q["correct"] == float(q["gold"].lower() in q["answer"].lower())
    text = JUDGE_FILE.read_text(encoding="utf-8")
    assert report["prompts"]["judge"] == {"name": "judge", "text": text,
                                          "sha256": hashlib.sha256(text.encode()).hexdigest()}
    assert report["prompts"]["judge"]["sha256"][:12] in r.stdout
    assert report["dataset"]["sha256"] == hashlib.sha256(LOCOMO.read_bytes()).hexdigest()


def test_the_report_gives_accuracy_with_an_interval_per_category_beside_recall_tokens_and_latency(url, tmp_path):
    r = qa(url, tmp_path, "--system", "bm25", "--system", "vxmem:fast@hashing", "--k", "2")
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    for system in ("bm25", "vxmem:fast@hashing"):
        mine = [q for q in report["questions"] if q["system"] == system]
        rows = {row["category"]: row for row in report["summary"] if row["system"] == system}
        assert set(rows) == {q["category"] for q in mine} | {"all"}
        every = rows["all"]
        assert every["questions"] == len(mine) == 5
        assert every["accuracy"] == pytest.approx(sum(q["correct"] for q in mine) / len(mine))
        assert every["accuracy_lo"] <= every["accuracy"] <= every["accuracy_hi"]
        assert every["recall"] == pytest.approx(sum(q["recall"] for q in mine) / len(mine))
        tokens = [q["answer_prompt_tokens"] + q["answer_completion_tokens"] for q in mine]
        assert every["tokens_per_question"] == pytest.approx(sum(tokens) / len(tokens))
        assert every["answer_s_median"] > 0 and every["recall_ms_median"] > 0
    # The endpoint's usage is the stub's word count of what it read and wrote.
    first = received(url)[0]
    assert report["questions"][0]["answer_prompt_tokens"] == len(first["messages"][0]["content"].split())
    assert "95% CI" in r.stdout and "recall@2" in r.stdout and "tokens/question" in r.stdout
    assert {row["system"] for row in report["retrieval"]} == {"bm25", "vxmem:fast@hashing"}


def test_a_rerun_asks_the_endpoint_nothing_and_reports_the_same(url, tmp_path):
    first = qa(url, tmp_path, "--system", "bm25", report="first.json")
    assert first.returncode == 0, first.stderr
    assert len(received(url)) == 10
    urllib.request.urlopen(urllib.request.Request(url.removesuffix("/v1") + "/reset", data=b"{}", method="POST"))
    again = qa(url, tmp_path, "--system", "bm25", report="again.json")
    assert again.returncode == 0, again.stderr
    assert received(url) == []
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("first.json", "again.json"))
    drop = ("answer_cached", "grade_cached", "recall_ms")
    assert [{k: v for k, v in q.items() if k not in drop} for q in a["questions"]] == \
           [{k: v for k, v in q.items() if k not in drop} for q in b["questions"]]
    assert b["cache"] == {"hits": 10, "misses": 0} and "10 replies from the cache, 0 asked" in again.stdout


def test_a_changed_judge_prompt_asks_only_the_judge_again(url, tmp_path):
    convs = load(str(LOCOMO), format="locomo")
    chat = OpenAICompatibleChat("qa-answerer", base_url=url, retries=0)
    judge = OpenAICompatibleChat("qa-judge", base_url=url, retries=0, task="grading")
    cache = AnswerCache(tmp_path / "cache")
    run_qa(convs, QASetup(answerer=chat, judge=judge, systems=["bm25"], cache=cache))
    before = len(received(url))
    strict = tmp_path / "strict.txt"
    strict.write_text(JUDGE_FILE.read_text() + "\nBe strict.\n")
    again = run_qa(convs, QASetup(answerer=chat, judge=judge, systems=["bm25"], cache=AnswerCache(tmp_path / "cache"),
                                  judge_prompt=pinned("judge", strict)))
    asked = received(url)[before:]
    assert [a["model"] for a in asked] == ["qa-judge"] * 5
    assert again.report["prompts"]["judge"]["sha256"] == hashlib.sha256(strict.read_bytes()).hexdigest()


def test_a_probe_of_ones_own_with_an_answer_in_its_meta_is_graded(url, tmp_path):
    conv = load_jsonl(str(ROOT / "datasets" / "knowledge_update.jsonl"))
    for ev in conv.events:  # the gold answer: the text of the memory the probe should recall
        if ev.type == "probe" and ev.relevant:
            best = max(ev.relevant, key=ev.relevant.get)
            ev.meta = {**(ev.meta or {}), "answer": next(e.text for e in conv.events if e.label == best)}
    chat = OpenAICompatibleChat("qa-answerer", base_url=url, retries=0)
    judge = OpenAICompatibleChat("qa-judge", base_url=url, retries=0, task="grading")
    res = run_qa([conv], QASetup(answerer=chat, judge=judge, systems=["bm25"], k=3))
    rows = res.per_question
    assert len(rows) == sum(1 for p in conv.probes if p.relevant) > 5
    # The echoing model is right exactly where the recall found the memory that holds the answer.
    assert rows["correct"].tolist() == rows["hit"].tolist()
    assert 0 < rows["correct"].mean() < 1


def test_a_failing_endpoint_is_one_line_exit_2_and_no_report(url, tmp_path):
    r = qa(url, tmp_path, "--system", "bm25", model="qa-500")
    assert r.returncode == 2
    assert r.stderr.startswith("vxmem: error: answer via 'qa-500'") and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "report.json").exists()
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing was answered, nothing kept


def test_a_failing_judge_keeps_only_whole_answers_and_writes_no_report(url, tmp_path):
    r = qa(url, tmp_path, "--system", "bm25", judge="qa-500")
    assert r.returncode == 2 and "grading via 'qa-500'" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "report.json").exists()
    kept = list((tmp_path / "cache").rglob("*"))
    assert [json.loads(p.read_text())["model"] for p in kept if p.is_file()] == ["qa-answerer"]


def test_an_unreachable_endpoint_is_one_line_exit_2(tmp_path):
    r = qa(f"http://127.0.0.1:{free_port()}/v1", tmp_path, "--system", "bm25", run=run_vxmem)  # the process's exit
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "answer via 'qa-answerer'" in r.stderr and "Connection" in r.stderr
    assert not (tmp_path / "report.json").exists()


@pytest.mark.parametrize("extra, says", [
    ((), "no probe has a gold answer"),
    (("--k", "0"), "--k must be >= 1"),
    (("--system", "nosuch"), "unknown system 'nosuch'"),
])
def test_what_cannot_be_evaluated_is_refused_in_one_line(tmp_path, extra, says):
    dataset = LOCOMO if extra else ROOT / "datasets" / "knowledge_update.jsonl"
    r = qa("http://127.0.0.1:9/v1", tmp_path, *extra, dataset=dataset)
    assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_your_own_chat_with_a_probe_and_its_answer_written_from_the_cli_is_graded(url, tmp_path):
    chat = tmp_path / "chat.csv"
    chat.write_text("session,role,text,timestamp\nmon,user,I prefer dark mode in my editor,2024-03-04T09:00:00\n"
                    "mon,user,The train was late again,2024-03-04T09:05:00\n")
    dataset = tmp_path / "chat.jsonl"
    assert run_vxmem("import", str(chat), "-o", str(dataset)).returncode == 0
    added = run_vxmem("probes", "add", str(dataset), "--query", "Which mode do I prefer in my editor?",
                      "--expect", "mon:0", "--answer", "dark mode")
    assert added.returncode == 0, added.stderr
    r = qa(url, tmp_path, "--system", "bm25", "--k", "1", dataset=dataset)
    assert r.returncode == 0, r.stderr
    [q] = json.loads((tmp_path / "report.json").read_text())["questions"]
    assert (q["gold"], q["ranked"], q["correct"]) == ("dark mode", ["mon:0"], 1.0)


def test_qa_draws_a_progress_bar_on_a_terminal_and_none_in_a_pipe(url, tmp_path, monkeypatch):
    import io
    import sys

    from vxmem.cli import main

    class Terminal(io.StringIO):  # what stderr is in a shell: a terminal
        def isatty(self):
            return True

    argv = ["qa", str(LOCOMO), "--base-url", url, "--model", "qa-answerer", "--judge-model", "qa-judge",
            "--system", "bm25", "--no-cache", "--retries", "0"]
    for stream, bar in ((io.StringIO(), False), (Terminal(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        assert main(argv) == 0
        drawn = stream.getvalue()
        assert ("%|" in drawn) is bar, drawn  # a log file or a pipe gets no bar
        if bar:
            assert "bm25 on" in drawn and "answering and grading" in drawn  # the recall, then the questions


def test_questions_asked_several_at_once_give_the_same_report_in_the_same_order(url, tmp_path):
    one = qa(url, tmp_path, "--system", "bm25", "--no-cache", report="one.json")
    four = qa(url, tmp_path, "--system", "bm25", "--no-cache", "--workers", "4", report="four.json")
    assert one.returncode == four.returncode == 0, (one.stderr, four.stderr)
    a, b = (json.loads((tmp_path / f).read_text())["questions"] for f in ("one.json", "four.json"))
    keep = ("probe", "question", "answer", "correct", "ranked", "answer_prompt_tokens")
    assert [{k: q[k] for k in keep} for q in a] == [{k: q[k] for k in keep} for q in b]
    assert "up to 10 requests" in four.stdout.splitlines()[0]  # said before any work


def test_a_judge_prompt_of_ones_own_is_used_and_named_by_its_hash(url, tmp_path):
    strict = tmp_path / "strict.txt"
    strict.write_text("Question: $question\nGold answer: $gold\nCandidate answer: $answer\nBe strict. JSON only.\n")
    r = qa(url, tmp_path, "--system", "bm25", "--judge-prompt", str(strict))
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    digest = hashlib.sha256(strict.read_bytes()).hexdigest()
    assert report["prompts"]["judge"]["sha256"] == digest and f"the judge prompt {strict}" in r.stdout
    assert all(a["messages"][0]["content"].endswith("Be strict. JSON only.\n")
               for a in received(url) if a["model"] == "qa-judge")


def test_a_prompt_without_its_placeholders_is_refused_before_any_work(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("Is $answer right? Reply with $verdict.\n")
    r = qa("http://127.0.0.1:9/v1", tmp_path, "--judge-prompt", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "no placeholder $verdict" in r.stderr and r.stdout == ""
