"""MemCompileStore where LangGraph code reaches the store: get_store() / runtime.store in a graph, and LangMem's
memory tools inside a prebuilt agent driven by a scripted model."""

import json
import warnings

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langmem import create_manage_memory_tool, create_search_memory_tool
from support.scripted_model import ScriptedChatModel
from typing_extensions import TypedDict

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


@pytest.fixture
def store(tmp_path):
    mem = MemCompile(tmp_path / "store", dense=False)
    yield MemCompileStore(mem)
    mem.close()


class Ctx(TypedDict):
    user_id: str


class State(TypedDict, total=False):
    text: str
    question: str
    found: list


async def test_a_graph_writes_through_get_store_and_reads_through_runtime_store(store):
    def write(state: State, runtime: Runtime[Ctx]) -> dict:
        get_store().put(("memories", runtime.context["user_id"]), "t1", {"speaker": "Tom", "text": state["text"]})
        return {}

    async def read(state: State, runtime: Runtime[Ctx]) -> dict:
        items = await runtime.store.asearch(("memories", runtime.context["user_id"]), query=state["question"])
        return {"found": [(i.key, i.memcompile["compiled"]) for i in items if i.memcompile is not None]}

    graph = StateGraph(State, context_schema=Ctx)
    graph.add_node("write", write)
    graph.add_node("read", read)
    graph.add_edge(START, "write")
    graph.add_edge("write", "read")
    graph.add_edge("read", END)
    app = graph.compile(store=store)
    question = "Where does Maya live?"
    tom = {"user_id": "tom"}
    out = await app.ainvoke({"text": "My sister Maya lives in Lisbon.", "question": question}, context=tom)
    assert out["found"][0][0] == "t1" and "Lisbon" in out["found"][0][1]
    assert store.memory.turns("memories/tom")[0].packet.text == "My sister Maya lives in Lisbon."
    other = await app.ainvoke({"text": "I have no sister.", "question": question}, context={"user_id": "ann"})
    assert [k for k, _ in other["found"]] == ["t1"] and "Lisbon" not in other["found"][0][1]  # users stay apart


def _call(name: str, args: dict, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _last_tool_result(messages) -> str:
    return next(m for m in reversed(messages) if isinstance(m, ToolMessage)).content


async def test_langmem_tools_manage_and_search_memories_in_a_react_agent(store):
    namespace = ("memories", "{langgraph_user_id}")
    tools = [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)]
    model = ScriptedChatModel(
        replies=[
            _call("manage_memory", {"content": "Tom's beagle is called Biscuit."}, "c1"),
            "Noted.",
            _call("search_memory", {"query": "What is Tom's beagle called?"}, "c2"),
            lambda messages: f"From memory: {_last_tool_result(messages)}",
        ]
    )
    agent = create_react_agent(model, tools, store=store)
    config = {"configurable": {"langgraph_user_id": "tom"}}
    out = await agent.ainvoke({"messages": [("user", "Remember: my beagle is called Biscuit.")]}, config)
    memory_id = _last_tool_result(out["messages"]).split()[-1]
    assert out["messages"][-1].content == "Noted." and store.get(("memories", "tom"), memory_id).value["content"] == (
        "Tom's beagle is called Biscuit."
    )
    out = await agent.ainvoke({"messages": [("user", "What is my beagle called?")]}, config)
    found = json.loads(_last_tool_result(out["messages"]))
    assert found[0]["key"] == memory_id and found[0]["value"] == {"content": "Tom's beagle is called Biscuit."}
    assert 0 < found[0]["score"] <= 1
    assert "Biscuit" in out["messages"][-1].content

    # update and delete by id, as the tool's model would (outside a graph: the store given to the tools)
    manage = create_manage_memory_tool(namespace, store=store)
    search = create_search_memory_tool(namespace, store=store)
    update = {"content": "Tom's beagle is called Pretzel now.", "action": "update", "id": memory_id}
    await manage.ainvoke(update, config)
    assert (await store.aget(("memories", "tom"), memory_id)).value["content"] == "Tom's beagle is called Pretzel now."
    assert len(store.memory.turns("memories/tom")) == 1
    await manage.ainvoke({"action": "delete", "id": memory_id}, config)
    assert await store.asearch(("memories", "tom"), query="What is Tom's beagle called?") == []
    assert search.invoke({"query": "beagle"}, config) == "[]"
