"""The MCP server (`memcompile mcp`) through real MCP client sessions: stdio, streamable HTTP, and a LangGraph agent
whose tools come from langchain-mcp-adapters."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from support.paths import ROOT
from support.servers import free_port, running

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-c", "import sys; from memcompile_langgraph.cli import main; sys.exit(main())"]
ENV = {"PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"}
TURNS = [
    {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"},
    {"speaker": "Ann", "text": "I am training for the Boston marathon in April.", "time": "4 March 2024"},
]


def payload(result) -> dict:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


async def exercise(session: ClientSession) -> None:
    """Every tool once, and every kind of bad input answered as a tool error by a server that keeps serving."""
    await session.initialize()
    assert {t.name for t in (await session.list_tools()).tools} == {"remember", "recall", "forget", "stats"}
    stored = payload(await session.call_tool("remember", {"turns": TURNS, "user_id": "tom"}))
    assert stored["stored"] == 2
    question = {"query": "What is the beagle called?", "user_id": "tom"}
    recalled = payload(await session.call_tool("recall", {**question, "k": 1}))
    assert [p["dia_id"] for p in recalled["packets"]] == ["D1:1"] and "[D1:1] Tom" in recalled["context"]
    assert "Biscuit" in recalled["context"] and "marathon" not in recalled["context"]
    for tool, args in [
        ("recall", {"query": "beagle", "user_id": ""}),
        ("recall", {"query": "beagle", "user_id": "a\x00b"}),
        ("recall", {"query": "   ", "user_id": "tom"}),
        ("recall", {"query": "beagle", "user_id": "tom", "k": 0}),
        ("remember", {"turns": [{"text": "no speaker"}], "user_id": "tom"}),
        ("remember", {"turns": "not a list", "user_id": "tom"}),
        ("stats", {"user_id": "x" * 300}),
        ("forget", {}),
        ("stats", {}),  # no silent "default" user
        ("stats", {"user": "tom"}),  # the old argument name: refused, not ignored
        ("recall", {"query": "beagle", "user_id": "tom", "users": "ann"}),
    ]:
        result = await session.call_tool(tool, args)
        assert result.isError, (tool, args)
        reason = result.content[0].text.removeprefix(f"Error executing tool {tool}").strip(": ")
        assert reason, (tool, args, result.content)  # the reason, not the bare prefix (mcp 2 for any exception)
    assert payload(await session.call_tool("stats", {"user_id": "tom"}))["packets"] == 2  # nothing lost
    removed = payload(await session.call_tool("forget", {"user_id": "tom", "dia_ids": ["D1:2", "D9:9"]}))
    assert removed["removed_turns"] == 1
    assert payload(await session.call_tool("stats", {"user_id": "tom"}))["packets"] == 1
    assert payload(await session.call_tool("forget", {"user_id": "tom"}))["forgot_turns"] == 1
    recalled = payload(await session.call_tool("recall", {"query": "What is the beagle called?", "user_id": "tom"}))
    assert recalled == {"context": "", "packets": [], "note": "nothing is stored for user_id 'tom'"}


async def test_stdio_session(tmp_path):
    params = StdioServerParameters(
        command=CLI[0],
        args=[*CLI[1:], "mcp", "--store", str(tmp_path / "store")],
        env={**os.environ, **ENV},
        cwd=str(tmp_path),
    )
    with open(tmp_path / "stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await exercise(session)
    # the client closing the session is the normal end: nothing on stderr says otherwise
    assert "error" not in (tmp_path / "stderr").read_text().lower()


@pytest.fixture
def http_server(tmp_path):
    port = free_port()
    cmd = [*CLI, "mcp", "--store", str(tmp_path / "store"), "--http", str(port)]
    with running(cmd, f"http://127.0.0.1:{port}/health", tmp_path / "mcp.log", env=ENV):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_streamable_http_session(http_server):
    async with streamablehttp_client(http_server) as (read, write, _), ClientSession(read, write) as session:
        await exercise(session)


async def test_langchain_mcp_adapters_agent_remembers_then_recalls(tmp_path):
    import warnings

    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools
    from support.scripted_model import ScriptedChatModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    def call(name: str, args: dict, call_id: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])

    def last_tool_result(messages) -> str:
        return next(m for m in reversed(messages) if isinstance(m, ToolMessage)).text

    client = MultiServerMCPClient(
        {
            "memory": {
                "transport": "stdio",
                "command": CLI[0],
                "args": [*CLI[1:], "mcp", "--store", str(tmp_path / "store")],
                "env": {**os.environ, **ENV},
                "cwd": str(tmp_path),
            }
        }
    )
    async with client.session("memory") as session:  # one server process for the whole conversation
        tools = await load_mcp_tools(session)
        assert {t.name for t in tools} == {"remember", "recall", "forget", "stats"}
        model = ScriptedChatModel(
            replies=[
                call("remember", {"turns": TURNS[:1], "user_id": "tom"}, "c1"),
                "Saved.",
                call("recall", {"query": "What is the beagle called?", "user_id": "tom"}, "c2"),
                lambda messages: (
                    "Your beagle is Biscuit." if "Biscuit" in last_tool_result(messages) else "I don't know."
                ),
            ]
        )
        agent = create_react_agent(model, tools)
        out = await agent.ainvoke({"messages": [("user", "Remember that I adopted a beagle named Biscuit.")]})
        assert json.loads(last_tool_result(out["messages"]))["stored"] == 1
        out = await agent.ainvoke({"messages": [("user", "What is my beagle called?")]})
        recalled = json.loads(last_tool_result(out["messages"]))
        assert recalled["packets"][0]["dia_id"] == "D1:1" and out["messages"][-1].content == "Your beagle is Biscuit."


@pytest.mark.parametrize("page, heading", [("README.md", "### MCP server"), ("docs/integrations.md", "## MCP server")])
def test_the_pages_mcp_clients_run_and_leave_no_store_behind(tmp_path, page, heading):
    """The pages' client examples, as written, on this environment's SDK (CI's first contact runs them on the
    newest): the answer, a bad argument's reason, no traceback from the server, no temporary store left."""
    block = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "readme_block.py"), heading, page], capture_output=True, text=True
    )
    (tmp_path / "example.py").write_text(block.stdout)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, **ENV, "TMPDIR": str(temp), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run = subprocess.run(
        [sys.executable, "example.py"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "Biscuit" in run.stdout and "Traceback" not in run.stderr
    if "bad =" in block.stdout:
        assert "query must contain a word" in run.stdout
    assert not [p for p in temp.iterdir() if p.is_dir()]  # the store went with the example
