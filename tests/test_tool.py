"""search_memory: the tool a tool-calling agent gets; the user comes from the run, never from the model."""

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.evidence.render import MEMORY_FRAME
from memcompile_langgraph.integrations.tool import NOTHING_STORED
from memcompile_langgraph.users import MissingUserId

QUESTION = "What kind of dog did Tom adopt?"


def call(query, id="c1"):
    return {"type": "tool_call", "id": id, "name": "search_memory", "args": {"query": query}}


def test_the_model_sees_only_the_query_and_as_of_arguments(make_mem):
    mem = make_mem(turns=demo_turns(), user_id="demo")
    tool = mem.as_tool()
    assert tool.name == "search_memory"
    schema = tool.tool_call_schema.model_json_schema()
    assert set(schema["properties"]) == {"query", "as_of"} and schema["required"] == ["query"]  # never the user


def test_tool_call_returns_context_and_packet_artifact(make_mem):
    mem = make_mem(turns=demo_turns(), user_id="demo")
    msg = mem.as_tool().invoke(call(QUESTION), {"configurable": {"user_id": "demo"}})
    assert isinstance(msg, ToolMessage) and msg.tool_call_id == "c1"
    assert "Biscuit" in msg.content
    assert msg.content == f"{MEMORY_FRAME}\n\n{mem.compile(QUESTION, user_id='demo').text}"
    assert [p["dia_id"] for p in msg.artifact] == mem.compile(QUESTION, user_id="demo").dia_ids
    assert {"dia_id", "time", "score", "rank"} <= set(msg.artifact[0])


def test_fixed_user_and_k(make_mem):
    mem = make_mem(turns=demo_turns(), user_id="demo")
    tool = mem.as_tool(user_id="demo", k=2)
    msg = tool.invoke(call(QUESTION), {"configurable": {"user_id": "someone-else"}})
    assert len(msg.artifact) == 2 and msg.content.count("\n\n") == 2  # the frame, then two blocks
    assert mem.as_tool().invoke({"query": QUESTION}, {"configurable": {"user_id": "someone-else"}}) == NOTHING_STORED
    with pytest.raises(MissingUserId, match="search_memory needs a user_id"):  # no silent "default" user
        mem.as_tool().invoke({"query": QUESTION})


async def test_async_and_empty_query(make_mem):
    mem = make_mem(turns=demo_turns(), user_id="demo")
    tool = mem.as_tool(user_id="demo")
    msg = await tool.ainvoke(call(QUESTION))
    assert "Biscuit" in msg.content
    assert "empty" in tool.invoke({"query": "  "})


def test_user_from_runtime_context_inside_a_tool_node(make_mem):
    mem = make_mem(turns=demo_turns(), user_id="demo")

    class Ctx(TypedDict):
        user_id: str

    builder = StateGraph(MessagesState, context_schema=Ctx)
    builder.add_node("tools", ToolNode([mem.as_tool()]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    request = {
        "messages": [AIMessage("", tool_calls=[{"name": "search_memory", "args": {"query": QUESTION}, "id": "c9"}])]
    }
    assert "Biscuit" in graph.invoke(request, context={"user_id": "demo"})["messages"][-1].content
    assert graph.invoke(request, context={"user_id": "nobody"})["messages"][-1].content == NOTHING_STORED


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"user_id": ""}])
def test_bad_tool_parameters_are_rejected(make_mem, kwargs):
    mem = make_mem(turns=demo_turns(), user_id="demo")
    with pytest.raises(ValueError):
        mem.as_tool(**kwargs)
