"""QA: answer each probe from the recalled memories with a model at an endpoint the user names, grade
the answers with the pinned judge prompt, and chart accuracy per category with its interval
(the same code path as `vxmem qa`)."""

import json

import streamlit as st

from app_pages import shared
from vxmem.workbench import views
from vxmem.workbench.qa import AnswerCache, QASetup, answerable, default_cache_dir, pinned, prompt_of, run_qa
from vxmem.workbench.qa.chart import accuracy_chart
from vxmem.workbench.views.systems import DASHBOARD_SYSTEMS

st.title("QA")
st.caption("Answer-level evaluation: each probe with a gold answer is recalled by each system, answered by the "
           "model from the recalled memories only, and graded by a judge model with the judge prompt shipped in "
           "vxmem (its text and sha256 below and in the report). Any OpenAI-compatible endpoint: a local "
           "llama.cpp, Ollama or vLLM server, or OpenAI. Replies are cached on disk by content hash, so running "
           "it again asks the endpoint nothing. Each system recalls as `vxmem compare` runs it (its own preset; "
           "the sidebar's embedder for the vxmem ones). The same run from a shell: `vxmem qa DATASET --base-url "
           "URL --model M`.")
shipped = {name: pinned(name) for name in ("answer", "judge")}  # read once per run of the page
judge = shipped["judge"]
with st.expander(f"The pinned judge prompt (sha256 {judge.sha256})"):
    st.code(judge.text, language=None, wrap_lines=True)
picked = shared.picked()
convs = picked["conversations"]
questions = answerable(convs)
if not questions:
    st.info("This dataset has no probe with a gold answer to grade. Pick fixtures/locomo_sample.json or "
            "fixtures/longmemeval_sample.json in the sidebar, or upload a LoCoMo or LongMemEval file.")
    st.stop()
s = shared.settings()

with st.form("qa_form"):
    url = st.text_input("Endpoint URL (OpenAI-compatible)", placeholder="http://localhost:11434/v1", key="qa_url")
    c1, c2 = st.columns(2)
    model = c1.text_input("Answer model", placeholder="qwen2.5:7b", key="qa_model")
    judge_model = c2.text_input("Judge model (blank: the answer model)", key="qa_judge")
    api_key = st.text_input("API key (blank: $OPENAI_API_KEY, or none for a local server)", type="password",
                            key="qa_key")
    c3, c4 = st.columns(2)
    systems = c3.multiselect("Systems", list(DASHBOARD_SYSTEMS), default=["vxmem", "bm25"], key="qa_systems")
    k = c4.number_input("Memories per question (k)", min_value=1, max_value=100, value=int(s["limit"]), key="qa_k")
    c5, c6 = st.columns(2)
    workers = c5.number_input("Questions asked at once", min_value=1, max_value=32, value=1, key="qa_workers",
                              help="1 asks one question at a time; a server that batches (vLLM, say) takes more. "
                                   "The report keeps the questions' order either way.")
    cached = c6.checkbox(f"Cache replies in {default_cache_dir()}", value=True, key="qa_cache")
    with st.expander("Prompts: the pinned ones, or your own"):
        st.caption("Edit a prompt to answer or grade with your own words; its sha256 in the report then differs "
                   "from the pinned one's. The answer prompt takes $memories, $question and $today; the judge "
                   "prompt $question, $gold and $answer.")
        answer_text = st.text_area("Answer prompt", value=shipped["answer"].text, height=160, key="qa_answer_prompt")
        judge_text = st.text_area("Judge prompt", value=judge.text, height=160, key="qa_judge_prompt")
    go = st.form_submit_button(f"Answer and grade {questions} question{'s' * (questions != 1)} per system",
                               type="primary")


def endpoint_chat(name: str, task: str):
    """A client for ``name`` at the URL given; a bad URL or a missing extra is said on the page."""
    try:
        from vxmem.llm import OpenAICompatibleChat

        return OpenAICompatibleChat(name, base_url=url.strip(), api_key=api_key or None, task=task, retries=1)
    except (ImportError, TypeError, ValueError) as exc:
        st.error(views.plain(exc, 300))
        st.stop()


def run() -> None:
    """The evaluation, its progress drawn; the result kept in the session for this dataset."""
    from vxmem.llm import LLMError

    if not url.strip() or not model.strip() or not systems:
        st.error("Give the endpoint URL, the answer model and at least one system.")
        return
    try:
        prompts = {"answer_prompt": prompt_of("answer", answer_text), "judge_prompt": prompt_of("judge", judge_text)}
    except ValueError as exc:
        st.error(views.plain(exc, 300))
        return
    names = [f"{x}@{s['embedder']}" if s["embedder"] != "default" and x.startswith("vxmem") else x for x in systems]
    setup = QASetup(answerer=endpoint_chat(model.strip(), "answer"),
                    judge=endpoint_chat(judge_model.strip() or model.strip(), "grading"), systems=names, k=int(k),
                    cache=AnswerCache(default_cache_dir() if cached else None), workers=int(workers), **prompts)
    bar = st.progress(0.0, text="Recalling...")

    def progress(done: int, total: int, desc: str) -> None:
        bar.progress(done / max(total, 1), text=f"{desc}: {done} of {total}")

    try:
        result = run_qa(convs, setup, progress=progress, dataset={"name": picked["label"]})
    except LLMError as exc:
        bar.empty()
        st.error(views.plain(str(exc).splitlines()[0], 400))
        return
    bar.empty()
    st.session_state["qa_result"] = {"key": picked["key"], "summary": result.summary,
                                     "questions": result.per_question, "report": result.report, "k": int(k)}


if go:
    run()
kept = st.session_state.get("qa_result")
if kept is not None and kept["key"] == picked["key"]:
    summary = kept["summary"]
    shared.chart(accuracy_chart(summary, kept["k"]))
    st.caption("Bars: the share of questions graded correct, per category and over all (\"all\"); the black "
               "whiskers their bootstrap 95% intervals. Hover a bar for the questions behind it and the recall of "
               "the same questions.")
    shared.sample_caveat(int(summary["questions"].min()))
    cache = kept["report"]["cache"]
    st.caption(f"{cache['hits']} replies came from the cache, {cache['misses']} were asked of the endpoint.")
    used = kept["report"]["prompts"]
    st.caption("Prompts: " + "; ".join(
        f"{name} {'pinned' if p['sha256'] == shipped[name].sha256 else 'of your own'} (sha256 {p['sha256'][:12]})"
        for name, p in used.items()) + ".")
    st.dataframe(summary, hide_index=True, width="stretch", column_config={
        "accuracy": st.column_config.NumberColumn(format="%.3f"),
        "accuracy_lo": st.column_config.NumberColumn("95% CI low", format="%.3f"),
        "accuracy_hi": st.column_config.NumberColumn("95% CI high", format="%.3f"),
        "recall": st.column_config.NumberColumn(f"recall@{kept['k']}", format="%.3f"),
        "hit": st.column_config.NumberColumn(f"hit@{kept['k']}", format="%.3f"),
        "tokens_per_question": st.column_config.NumberColumn("tokens per question", format="%.0f"),
        "judge_tokens_per_question": st.column_config.NumberColumn("judge tokens per question", format="%.0f"),
        "answer_s_median": st.column_config.NumberColumn("answer s (median)", format="%.2f"),
        "answer_s_p90": st.column_config.NumberColumn("answer s (p90)", format="%.2f"),
        "recall_ms_median": st.column_config.NumberColumn("recall ms (median)", format="%.2f")})
    with st.expander("Every question: its answer and grade"):
        st.dataframe(kept["questions"][["system", "category", "question", "gold", "answer", "correct", "recall"]],
                     hide_index=True, width="stretch")
    st.download_button("Download the report (JSON)", json.dumps(kept["report"], indent=1, ensure_ascii=False),
                       file_name="vxmem-qa-report.json", mime="application/json", key="qa_download")
