"""``vxmem qa``: answer-level evaluation of a dataset against a chat-completions endpoint.

    vxmem qa locomo10.json --base-url http://localhost:11434/v1 --model qwen2.5:7b --system vxmem --system bm25

Each probe with a gold answer is recalled by each system, answered by the model from the
recalled memories only and graded by the judge with the pinned prompt shipped in vxmem
(:mod:`vxmem.workbench.qa`). It prints accuracy with its bootstrap 95% interval per system and
category, beside recall@k, tokens per question and latency, and writes the full report with
``--json``. Replies are cached on disk, so a rerun asks the endpoint nothing. An endpoint that
fails is one line on stderr and exit code 2; the report is written only when the run is whole.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import tempfile
from typing import Any

from ..workbench.datasets.formats import FORMATS
from .tables import terminal_progress
from .workbench import CliError, load_conversations, table_text

SHOWN = {"system": "system", "category": "category", "questions": "questions", "accuracy": "accuracy",
         "ci": "95% CI", "recall": "recall@{k}", "tokens_per_question": "tokens/question",
         "answer_s_median": "answer s (median)", "recall_ms_median": "recall ms (median)", "cached": "cached"}


def add_qa_command(sub: Any) -> None:
    """The ``qa`` verb and its options."""
    q = sub.add_parser("qa", help="answer each probe from the recalled memories and grade it (any chat endpoint)",
                       description="For every probe with a gold answer (LoCoMo, LongMemEval, or meta.answer in a "
                                   "vxmem JSONL dataset): recall with each system, ask the model to answer from the "
                                   "recalled memories only, grade the answer with the pinned judge prompt; print "
                                   "accuracy [bootstrap 95% CI] per category beside recall@k, tokens and latency. "
                                   "Replies are cached by content hash: a rerun makes no request.")
    q.add_argument("dataset")
    q.add_argument("--format", choices=FORMATS, help="default: guessed")
    q.add_argument("--base-url", required=True, help="the OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    q.add_argument("--model", required=True, help="the model that answers")
    q.add_argument("--judge-model", help="the model that grades (default: --model)")
    q.add_argument("--judge-base-url", help="the judge's endpoint (default: --base-url)")
    q.add_argument("--system", action="append", metavar="NAME",
                   help="a memory system to recall with, as `vxmem compare` names them (repeat; default vxmem)")
    q.add_argument("--k", type=int, default=10, help="memories recalled per question (default 10)")
    q.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    q.add_argument("--retries", type=int, default=2, help="retries per request (default 2)")
    q.add_argument("--workers", type=int, default=1,
                   help="questions asked at once (default 1; a server that batches, such as vLLM, takes more)")
    q.add_argument("--cache", help="the reply cache's directory (default $VXMEM_CACHE_DIR/qa or ~/.cache/vxmem/qa)")
    q.add_argument("--no-cache", action="store_true", help="ask the endpoint every time and keep nothing")
    q.add_argument("--judge-prompt", metavar="FILE",
                   help="grade with this prompt instead of the shipped one ($question, $gold, $answer); "
                        "its sha256 goes into the report")
    q.add_argument("--answer-prompt", metavar="FILE",
                   help="answer with this prompt instead of the shipped one ($memories, $question, $today)")
    q.add_argument("--json", help="the full report (settings, prompts with their sha256, every answer), .json")


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _endpoints(args: argparse.Namespace) -> tuple[Any, Any]:
    """The answer model's and the judge's clients, checked before any work."""
    try:
        # The grades are checked against a schema: jsonschema must be there, but loads with the
        # first grade (importing it can take a second, which a run refused before grading saves).
        if importlib.util.find_spec("jsonschema") is None:
            raise ImportError("jsonschema")
        from ..llm import OpenAICompatibleChat
    except ImportError:
        raise CliError("vxmem qa needs the 'llm' extra: pip install 'vxmem[llm]'") from None
    if args.k < 1:
        raise CliError(f"--k must be >= 1, got {args.k}")
    if args.workers < 1:
        raise CliError(f"--workers must be >= 1, got {args.workers}")
    settings = {"timeout": args.timeout, "retries": args.retries, "backoff": 0.5}
    answerer = OpenAICompatibleChat(args.model, base_url=args.base_url, task="answer", **settings)
    judge = OpenAICompatibleChat(args.judge_model or args.model, base_url=args.judge_base_url or args.base_url,
                                 task="grading", **settings)
    return answerer, judge


def _write_json(report: dict[str, Any], path: str) -> None:
    """``report`` to ``path`` whole, through a temporary file renamed into place."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".vxmem-qa-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise CliError(f"cannot write {path!r}: {exc.strerror or exc}") from None


def summary_table(summary: Any, k: int) -> Any:
    """The summary as the command prints it: accuracy with its interval in one cell."""
    shown = summary.assign(ci=[f"[{lo:.3f}, {hi:.3f}]" for lo, hi in
                               zip(summary["accuracy_lo"], summary["accuracy_hi"])])
    return shown[list(SHOWN)].rename(columns={c: t.format(k=k) for c, t in SHOWN.items()})


def run_qa_command(args: argparse.Namespace) -> int:
    """``vxmem qa DATASET --base-url URL --model M``: the table printed, the report written."""
    from ..llm import LLMError
    from ..workbench.qa import AnswerCache, QASetup, answerable, default_cache_dir, pinned, run_qa
    from ..workbench.systems import parse_systems

    if args.json is not None and not args.json.lower().endswith(".json"):
        raise CliError(f"--json {args.json!r}: use a .json file name")
    answerer, judge = _endpoints(args)
    systems = args.system or ["vxmem"]
    parse_systems(systems)  # unknown names and missing libraries: now, not after the replays
    convs = load_conversations(args.dataset, args.format)
    cache = AnswerCache(None if args.no_cache else (args.cache or default_cache_dir()))
    setup = QASetup(answerer=answerer, judge=judge, systems=systems, k=args.k, cache=cache, workers=args.workers,
                    answer_prompt=pinned("answer", args.answer_prompt), judge_prompt=pinned("judge", args.judge_prompt))
    dataset = {"path": os.path.abspath(args.dataset), "sha256": _sha256(args.dataset), "conversations": len(convs)}
    n = answerable(convs)
    # Said before the replays start: how much this run may ask, so a long one is no surprise.
    print(f"vxmem qa: {n} question(s) x {len(systems)} system(s): up to {2 * n * len(systems)} requests to "
          f"{answerer.base_url} (replies in the cache are not asked again)", flush=True)
    try:
        result = run_qa(convs, setup, progress=terminal_progress(), dataset=dataset)
    except LLMError as exc:
        raise CliError(str(exc)) from None
    print(f"{len(result.per_question) // max(len(systems), 1)} questions with a gold answer, k={args.k}; "
          f"answers by {answerer.model}, graded by {judge.model} with "
          f"{'the judge prompt ' + args.judge_prompt if args.judge_prompt else 'the pinned judge prompt'} "
          f"(sha256 {setup.judge_prompt.sha256[:12]}); {cache.hits} replies from the cache, "
          f"{cache.misses} asked")
    print(table_text(summary_table(result.summary, args.k), 200))
    if args.json:
        _write_json(result.report, args.json)
        print(f"wrote {args.json}")
    return 0
