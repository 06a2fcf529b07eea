"""vxmem in LangChain (the langchain extra): the retriever and the chat message history, in a runnable chain."""

import pytest

pytest.importorskip("langchain_core", reason='needs the langchain extra: pip install "vxmem[langchain]"')

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from vxmem import Vectrix
from vxmem.integrations.langchain import VxmemChatMessageHistory, VxmemRetriever

from helpers import DAY, T0, run_python


@pytest.fixture
def db(make_db):
    db = make_db()
    db.remember("I prefer dark mode in every editor.", session="alice", timestamp=T0)
    db.remember("My sister is called Ana.", session="alice", timestamp=T0 + 60)
    db.remember("I prefer light mode.", session="bob", timestamp=T0)
    return db


def test_the_retriever_returns_documents_with_the_score_breakdown(db):
    docs = VxmemRetriever(db=db, session="alice", limit=1, now=T0 + DAY).invoke("which mode do I prefer?")
    [doc] = docs
    assert isinstance(doc, Document) and doc.page_content == "I prefer dark mode in every editor."
    assert doc.id == doc.metadata["id"] and doc.metadata["session"] == "alice" and doc.metadata["role"] == "user"
    assert doc.metadata["created"] == "2023-11-14T22:13:20+00:00" and doc.metadata["created_ts"] == T0
    assert {"relevance", "recency", "feedback", "score"} <= set(doc.metadata["scoring"])
    assert doc.metadata["score"] == pytest.approx(doc.metadata["scoring"]["score"])


def test_the_retriever_keeps_to_its_session_and_user(db):
    db.remember("I prefer tea.", kind="fact", user="carol", session="c1", timestamp=T0)
    assert [d.page_content for d in VxmemRetriever(db=db, session="bob", now=T0).invoke("prefer")] == [
        "I prefer light mode."]
    assert [d.page_content for d in VxmemRetriever(db=db, user="carol", now=T0).invoke("prefer")] == [
        "I prefer tea."]


def test_a_chain_puts_the_remembered_fact_into_the_prompt(db):
    retriever = VxmemRetriever(db=db, session="alice", limit=1, now=T0 + DAY)
    prompt = ChatPromptTemplate.from_messages([
        ("system", "What you remember about the user:\n{memories}"),
        ("human", "{question}"),
    ])
    seen = []

    def show(value):
        seen.append(value)
        return value

    chain = ({"memories": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
              "question": RunnablePassthrough()}
             | prompt | show | ParrotFakeChatModel() | StrOutputParser())
    assert chain.invoke("Which mode do I prefer?") == "Which mode do I prefer?"  # the parrot repeats the question
    [prompt_value] = seen
    system = prompt_value.to_messages()[0]
    assert "I prefer dark mode in every editor." in system.content and "light mode" not in system.content


def test_the_history_remembers_each_turn_with_its_role():
    db = Vectrix()
    history = VxmemChatMessageHistory(db, "s", clock=lambda: T0)
    history.add_messages([SystemMessage("Be brief."), HumanMessage("I live in Lisbon."), AIMessage("Noted."),
                          ChatMessage(content="lookup done", role="tool")])
    turns = db.turns("s")
    assert [t.metadata["_vx_role"] for t in turns] == ["system", "user", "assistant", "tool"]
    messages = history.messages
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, ChatMessage]
    assert [m.content for m in messages] == ["Be brief.", "I live in Lisbon.", "Noted.", "lookup done"]
    assert [m.id for m in messages] == [t.id for t in turns]


def test_a_tool_calling_exchange_comes_back_as_it_went_in_and_its_calls_are_recalled():
    db = Vectrix(embedder="hashing")
    history = VxmemChatMessageHistory(db, "s", clock=lambda: T0)
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}
    sent = [HumanMessage("What's the weather in Paris?"), AIMessage(content="", tool_calls=[call]),
            ToolMessage(content="18C and sunny", tool_call_id="call-1"), AIMessage("It is 18C and sunny.")]
    history.add_messages(sent)
    back = history.messages
    assert [type(m) for m in back] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert [m.content for m in back] == [m.content for m in sent]
    assert back[1].tool_calls == [call] and back[2].tool_call_id == "call-1"
    hits = db.recall("get_weather Paris", session="s", now=T0 + 60)
    assert 'calls get_weather({"city": "Paris"})' in [h.text for h in hits]


def test_the_retriever_keeps_the_memorys_fields_over_the_callers_keys_of_the_same_name():
    db = Vectrix(embedder="hashing")
    mid = db.remember("I prefer dark mode", session="alice", metadata={"id": "x", "score": 99, "topic": "ui"},
                      timestamp=T0)
    [doc] = VxmemRetriever(db=db, session="alice", limit=1, now=T0 + 60).invoke("dark mode")
    assert doc.metadata["id"] == mid and doc.metadata["score"] != 99 and doc.metadata["topic"] == "ui"


def test_what_the_history_remembers_is_recalled():
    db = Vectrix()
    history = VxmemChatMessageHistory(db, "s", clock=lambda: T0)
    history.add_user_message("My cat is called Miso.")
    history.add_ai_message("What a lovely name.")
    [doc] = VxmemRetriever(db=db, session="s", limit=1, now=T0 + 60).invoke("cat called")
    assert doc.page_content == "My cat is called Miso."


def test_clearing_the_history_forgets_its_turns_not_its_facts():
    db = Vectrix()
    history = VxmemChatMessageHistory(db, "s", clock=lambda: T0)
    history.add_user_message("hello")
    fact = db.remember("The user lives in Lisbon.", kind="fact", session="s", timestamp=T0)
    history.clear()
    assert history.messages == [] and fact in db


def test_importing_vxmem_never_imports_langchain():
    out = run_python("""
        import sys
        import vxmem
        vxmem.Vectrix().remember("hello", timestamp=0)
        print(any(m.startswith("langchain") for m in sys.modules))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
