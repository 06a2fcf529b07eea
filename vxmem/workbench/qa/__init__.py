"""Answer-level evaluation: recall, answer from the recalled memories only, grade with a pinned judge.

    from vxmem.llm import OpenAICompatibleChat
    from vxmem.workbench.datasets import load
    from vxmem.workbench.qa import QASetup, run_qa

    chat = OpenAICompatibleChat("qwen2.5:7b", base_url="http://localhost:11434/v1")
    result = run_qa(load("locomo10.json"), QASetup(answerer=chat, judge=chat, systems=["vxmem", "bm25"]))
    result.summary      # accuracy [95% CI] per system and category, recall@k, tokens, latency

The modules, one job each: :mod:`.prompt` (the pinned prompts shipped as text files),
:mod:`.cache` (replies on disk by content hash), :mod:`.grading` (asking the model and the
judge), :mod:`.report` (accuracy with intervals, the JSON report) and :mod:`.run` (the whole path).
"""

from .cache import AnswerCache, default_cache_dir
from .prompt import PinnedPrompt, Recalled, pinned, prompt_of
from .report import summarize
from .run import QAResult, QASetup, answerable, gold_answer, run_qa

__all__ = ["AnswerCache", "PinnedPrompt", "QAResult", "QASetup", "Recalled", "answerable", "default_cache_dir",
           "gold_answer", "pinned", "prompt_of", "run_qa", "summarize"]
