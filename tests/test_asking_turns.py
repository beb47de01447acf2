"""A chat memory built as a new user builds it (chat agent with the offline reader, then MemCompileStore search):
a question is weak evidence for its own answer, and the assistant's stored reply reads as a sentence."""

import pytest
from langchain_core.messages import HumanMessage
from support.claim_faults import faults

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore
from memcompile_langgraph.integrations.chat_agent import build_chat_agent

TOM = ("tom",)


@pytest.fixture(params=[False, True], ids=["bm25", "dense"])
def mem(request, tmp_path):
    memory = MemCompile(tmp_path / "store", dense=request.param)
    yield memory
    memory.close()


def converse(mem, texts):
    agent = build_chat_agent(mem)
    replies = []
    for n, text in enumerate(texts):
        out = agent.invoke(
            {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": str(n)}}, context={"user_id": "tom"}
        )
        replies.append(out["messages"][-1].text)
    return replies


def test_the_stating_turn_comes_before_the_earlier_question_and_the_reply_reads(mem):
    replies = converse(
        mem,
        [
            "Hi! I just adopted a puppy.",
            "My dog is called Rex.",
            "I also like hiking on weekends.",
            "What is the name of my dog?",
        ],
    )
    assert "Rex" in replies[-1]  # the offline reader found the answer
    store = MemCompileStore(mem)
    found = store.search(TOM, query="What is my dog called?")
    texts = [item.value["text"] for item in found]
    # no question above the statement answering it; with the dense channel the statement is first (BM25 alone
    # over four turns has next to no term weights: "dog" is in half of them)
    assert texts.index("My dog is called Rex.") < texts.index("What is the name of my dog?")
    assert mem.embeddings is None or texts[0] == "My dog is called Rex."
    # the reply only quoted the stating turn and the other replies only acknowledged: none of them is stored
    rex = next(item for item in found if item.value["text"] == "My dog is called Rex.")
    assert f"[{rex.key}]" in replies[-1] and texts.count("My dog is called Rex.") == 1
    assert {t.packet.speaker for t in mem.turns("tom")} == {"User"}


def test_no_stored_claim_of_the_conversation_is_broken(mem):
    converse(mem, ["My dog is called Rex.", "What is the name of my dog?", "Where do I work?", "I work as a nurse."])
    index = mem.index("tom")
    claims = [(d.claim, d.speaker) for d in index.descriptors]
    assert claims
    assert [c for c, speaker in claims if faults(c, (speaker, "User", "Assistant"))] == []
