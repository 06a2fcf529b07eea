"""The Import page's corrections: nothing in a chat log says a turn corrects another, so the rule-based
judge or an LLM endpoint finds them, or the user marks one by hand; the imported chat then replays
each as the library records a correction (the old turn superseded by the new one, kept in history)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from vxmem.workbench import views
from vxmem.workbench.analysis.audit import judge_named
from vxmem.workbench.datasets import DatasetError
from vxmem.workbench.datasets.corrections import correction_pairs, find_corrections, mark_correction

state = st.session_state


def _judge(kind: str, url: str, model: str) -> Any:
    if kind == "rules":
        return judge_named("rules")[1]
    from vxmem.llm import OpenAICompatibleJudge

    return OpenAICompatibleJudge(model, base_url=url)


def _apply(conv: Any, pairs: list[tuple[str, str]], keep: Callable[[Any], None]) -> None:
    for old, new in pairs:
        conv = mark_correction(conv, old, new)
    keep(conv)


def corrections_section(conv: Any, texts: dict[str, str], keep: Callable[[Any], None]) -> None:
    """Find corrections in ``conv`` with a judge, or mark one by hand; ``keep`` stores the changed chat."""
    st.subheader("Corrections")
    done = correction_pairs(conv)
    st.caption("A turn that corrects an earlier one replays as a correction: the earlier turn is superseded (kept in "
               "history, out of recall). " + (f"{len(done)} marked: " + "; ".join(f"{n} corrects {o}" for o, n in done)
                                               if done else "None marked yet."))
    c1, c2, c3 = st.columns([1, 2, 2])
    kind = c1.selectbox("Judge", ["rules", "LLM endpoint"], key="corr_judge",
                        help="rules: the rule-based judge of the shipped scenarios (\"Dana lives in Lisbon\" shapes "
                             "only); an endpoint reads any turn.")
    url = c2.text_input("Endpoint URL (OpenAI-compatible)", key="corr_url", disabled=kind == "rules",
                        placeholder="http://localhost:11434/v1")
    model = c3.text_input("Judge model", key="corr_model", disabled=kind == "rules", placeholder="qwen2.5:7b")
    if st.button("Find corrections", key="corr_find"):
        if kind != "rules" and not (url.strip() and model.strip()):
            st.error("Name the endpoint and its model.")
        else:
            try:
                with st.spinner("Asking the judge about each user turn..."):
                    state.corr_found = find_corrections(conv, _judge(kind, url.strip(), model.strip()), "hashing")
            except Exception as exc:  # an endpoint's failure is shown, never a traceback
                st.error(f"The judge failed: {views.plain(exc, 300)}")
    found = [p for p in state.get("corr_found", []) if p not in done]
    if found:
        st.dataframe([{"corrects": o, "earlier turn": texts.get(o, ""), "turn": n, "text": texts.get(n, "")}
                      for o, n in found], hide_index=True, width="stretch")
        st.button(f"Mark these {len(found)} as corrections", key="corr_apply", on_click=_apply,
                  args=(conv, found, keep))
    elif "corr_found" in state:
        st.caption("The judge found no correction.")
    labels = list(texts)
    h1, h2, h3 = st.columns([2, 2, 1])
    new = h1.selectbox("This turn", labels, key="corr_new", index=len(labels) - 1 if labels else None,
                       format_func=lambda lab: f"{lab}: {texts[lab][:60]}")
    old = h2.selectbox("corrects", labels, key="corr_old", format_func=lambda lab: f"{lab}: {texts[lab][:60]}")
    if h3.button("Mark", key="corr_mark") and new and old:
        try:
            keep(mark_correction(conv, old, new))
            st.rerun()
        except DatasetError as exc:
            st.error(views.plain(exc, 300))
