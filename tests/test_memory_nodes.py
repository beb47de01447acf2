"""recall / remember nodes in real LangGraph graphs: the next recall finds what remember stored, nothing twice."""

from dataclasses import dataclass
from datetime import datetime

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import Field

from memcompile_langgraph.evidence.render import MEMORY_FRAME
from memcompile_langgraph.integrations.chat_agent import build_chat_agent
from memcompile_langgraph.integrations.memory_nodes import is_recall_message, make_recall_node
from memcompile_langgraph.users import MissingUserId


class RecordingModel(GenericFakeChatModel):
    """Scripted replies; keeps every input it was given."""

    seen: list = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def chat(mem, replies, **names):
    model = RecordingModel(messages=iter(replies))
    return build_chat_agent(mem, model, checkpointer=InMemorySaver(), **names), model


def say(agent, text, thread, **context):
    return agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=context)


KIM = {"configurable": {"user_id": "kim"}}


def stored(mem, user):
    index = mem.index(user)
    return [index.packets[p] for p in index.packet_order]


def test_next_recall_finds_the_stored_exchange(make_mem):
    mem = make_mem("store")
    agent, model = chat(
        mem, ["Congratulations on Biscuit!", "Your dog is called Biscuit."], user_name="Tom", assistant_name="Aria"
    )
    say(agent, "I adopted a beagle named Biscuit last week.", "monday", user_id="tom")
    turns = stored(mem, "tom")
    assert [(p.speaker, p.text) for p in turns] == [
        ("Tom", "I adopted a beagle named Biscuit last week."),
        ("Aria", "Congratulations on Biscuit!"),
    ]
    for p in turns:
        assert (
            p.dia_id.startswith("m-")
            and abs((datetime.now() - datetime.fromisoformat(p.session_time)).total_seconds()) < 300
        )
    out = say(agent, "What is my dog called?", "later", user_id="tom")
    memory = [m for m in model.seen[-1] if is_recall_message(m)]
    assert len(memory) == 1 and memory[0].text.startswith(MEMORY_FRAME)
    today = datetime.now().date().isoformat()
    assert f"[{turns[0].dia_id}] Tom | {today}" in memory[0].text and "Biscuit" in memory[0].text
    assert out["messages"][-1].text == "Your dog is called Biscuit."


def test_nothing_is_stored_twice_and_recall_messages_are_not_stored(make_mem):
    mem = make_mem("store")
    agent, _ = chat(mem, ["Nice.", "Sounds fun.", "Good luck!"])
    for text in ["I moved to Oslo in March.", "I joined a rowing club in Oslo.", "The regatta is in June."]:
        out = say(agent, text, "one-thread", user_id="ann")
    turns = stored(mem, "ann")
    assert len(turns) == 6 and [p.speaker for p in turns] == ["User", "Assistant"] * 3
    assert not any("Long-term memory recalled" in p.text for p in turns)
    messages = out["messages"]
    recalls = [i for i, m in enumerate(messages) if is_recall_message(m)]
    assert len(recalls) == 1 and messages[recalls[0] - 1].text == "The regatta is in June."  # stale ones removed
    assert mem.remember_node({"messages": messages}, {"configurable": {"user_id": "ann"}}) == {}
    assert len(stored(mem, "ann")) == 6 and "already_stored" not in mem.stats("ann")["counters"]


def test_user_id_from_configurable_or_context_object_and_none_is_an_error(make_mem):
    mem = make_mem("store")
    exchange = {
        "messages": [HumanMessage("I live in Oslo near the fjord.", id="h1"), AIMessage("Lovely place.", id="a1")]
    }
    assert mem.remember_node(exchange, {"configurable": {"user_id": "ann"}}) == {}
    assert len(stored(mem, "ann")) == 2
    question = {"messages": [HumanMessage("Where do I live?", id="h2")]}
    update = mem.recall_node(question, {"configurable": {"user_id": "ann"}})
    assert "Oslo" in update["messages"][-1].text
    assert mem.recall_node(question, {"configurable": {"user_id": "bob"}}) == {}
    for node in (mem.recall_node, mem.remember_node):  # no silent shared "default" user
        with pytest.raises(MissingUserId, match="needs a user_id"):
            node(question)
    assert mem.users() == ["ann"]

    @dataclass
    class Ctx:
        user_id: str

    builder = StateGraph(MessagesState, context_schema=Ctx)
    builder.add_node("recall", mem.recall_node)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", END)
    out = builder.compile().invoke(question, context=Ctx(user_id="ann"))
    assert isinstance(out["messages"][-1], SystemMessage) and "Oslo" in out["messages"][-1].text


def test_speaker_names_from_context_and_message_name(make_mem):
    mem = make_mem("store")
    agent, _ = chat(mem, ["Noted."])
    say(agent, "My bike is red.", "t", user_id="u", user_name="Kim", assistant_name="Aria")
    assert [p.speaker for p in stored(mem, "u")] == ["Kim", "Aria"]
    mem.remember_node(
        {"messages": [HumanMessage("Hello from Lee.", name="Lee", id="x1")]}, {"configurable": {"user_id": "u"}}
    )
    assert stored(mem, "u")[-1].speaker == "Lee"


def test_tool_traffic_is_not_dialogue(make_mem):
    mem = make_mem("store")
    call = {"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}
    messages = [
        HumanMessage("What is the weather in Oslo?", id="h"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("12 C and sunny", tool_call_id="c1", id="t"),
        AIMessage("It is 12 C and sunny in Oslo.", id="a2"),
    ]
    mem.remember_node({"messages": messages}, KIM)
    assert [p.text for p in stored(mem, "kim")] == ["What is the weather in Oslo?", "It is 12 C and sunny in Oslo."]


def test_messages_without_ids_are_stored_once(make_mem):
    mem = make_mem("store")
    state = {
        "messages": [
            {"role": "user", "content": "I collect vinyl records."},
            {"role": "assistant", "content": "Which genre?"},
        ]
    }
    mem.remember_node(state, KIM)
    mem.remember_node(state, KIM)
    assert len(stored(mem, "kim")) == 2


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"messages": []},
        {"messages": "not a list"},
        {"messages": [42]},
        {"messages": [AIMessage("hello")]},
        {"messages": [HumanMessage("   ")]},
        "not a state",
    ],
)
def test_bad_input_gives_no_update(make_mem, state):
    mem = make_mem("store")
    assert mem.recall_node(state, KIM) == {}
    assert mem.remember_node(state, KIM) == {}
    assert stored(mem, "kim") == []


def test_recall_k_limits_the_blocks(make_mem):
    mem = make_mem("store")
    turns = [HumanMessage(f"I visited museum number {i} in Oslo.", id=f"h{i}") for i in range(4)]
    mem.remember_node({"messages": turns}, KIM)
    update = make_recall_node(mem, k=2)({"messages": [HumanMessage("Which museums did I visit in Oslo?")]}, KIM)
    assert update["messages"][-1].text.count("\n\n[m-") == 2
    with pytest.raises(ValueError):
        make_recall_node(mem, k=0)


def test_ten_chat_runs_on_a_persistent_store_answer_from_the_users_turn(tmp_path, embeddings):
    from memcompile_langgraph import MemCompile

    def run(text: str, thread: int) -> str:
        mem = MemCompile(tmp_path / "store", embeddings=embeddings)  # each run opens the store anew, as a script does
        try:
            agent = build_chat_agent(mem, checkpointer=InMemorySaver())  # the offline reader
            return say(agent, text, str(thread), user_id="tom", user_name="Tom")["messages"][-1].text
        finally:
            mem.close()

    run("I adopted a beagle named Biscuit.", 0)
    replies = [run("What is my dog's name?", thread) for thread in range(1, 10)]
    mem = MemCompile(tmp_path / "store", embeddings=embeddings)
    try:
        turns = [(t.packet.dia_id, t.packet.speaker, t.packet.text) for t in mem.turns("tom")]
    finally:
        mem.close()
    source = next(dia for dia, speaker, text in turns if text == "I adopted a beagle named Biscuit.")
    assert replies[-1].startswith(f"From memory [{source}], quoted by the offline reader") and "Biscuit" in replies[-1]
    assert all(r.startswith(f"From memory [{source}]") for r in replies), replies
    assert [speaker for _, speaker, _ in turns] == ["Tom"] * 10  # the replies only quoted the turn: none is a source


def test_a_reply_quoting_a_search_memory_result_points_to_it(make_mem):
    mem = make_mem(
        "store", turns=[{"speaker": "Kim", "text": "My sister lives in Oslo.", "dia_id": "D1:1"}], user_id="kim"
    )
    found = mem.as_tool().invoke(
        {"type": "tool_call", "name": "search_memory", "args": {"query": "Where does my sister live?"}, "id": "c1"},
        KIM,
    )
    assert "[D1:1]" in found.content
    messages = [
        HumanMessage("Where does my sister live?", id="h"),
        AIMessage("", tool_calls=[{"name": "search_memory", "args": {"query": "sister"}, "id": "c1"}], id="a1"),
        found,
        AIMessage("Your sister lives in Oslo [D1:1]. Want to plan a visit?", id="a2"),
    ]
    mem.remember_node({"messages": messages}, KIM)
    assert [p.text for p in stored(mem, "kim")][1:] == [
        "Where does my sister live?",
        "Want to plan a visit?",  # the quoted sentence is left to its source
    ]
