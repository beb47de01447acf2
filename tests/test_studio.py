"""`langgraph dev` serves graphs/langgraph.json offline: every stage node of the query graph, and real runs."""
from pathlib import Path

import httpx
import pytest

from memcompile_langgraph.query_graph import STAGES
from servers import free_port, running

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true", "LANGSMITH_TRACING": "false", "OPENAI_API_KEY": ""}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("studio")
    port = free_port()
    # langgraph dev resolves the config's graph paths and writes its .langgraph_api/ state in its working directory:
    # a temporary one that sees the repository's graphs/, so nothing is left in the repository
    (tmp / "graphs").symlink_to(ROOT / "graphs", target_is_directory=True)
    # --no-reload: other files changing under the repository must not restart the server mid-test
    cmd = ["langgraph", "dev", "--config", "graphs/langgraph.json", "--port", str(port), "--host", "127.0.0.1", "--no-browser", "--no-reload"]
    env = {**OFFLINE, "MEMCOMPILE_STORE": str(tmp / "store")}
    with running(cmd, f"http://127.0.0.1:{port}/ok", tmp / "langgraph.log", env=env, cwd=str(tmp)):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client


def assistants(client) -> dict[str, str]:
    found = client.post("/assistants/search", json={"limit": 100}).raise_for_status().json()
    return {a["graph_id"]: a["assistant_id"] for a in found}


def test_every_graph_is_registered_and_the_query_graph_shows_every_stage(studio):
    ids = assistants(studio)
    assert {"memcompile_query", "memcompile_ingest", "memcompile_chat"} <= set(ids)
    graph = studio.get(f"/assistants/{ids['memcompile_query']}/graph").raise_for_status().json()
    nodes = {n["id"] for n in graph["nodes"]}
    assert set(STAGES) <= nodes
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert {("intent", "bm25"), ("intent", "dense"), ("schedule", "frontier"), ("dense", "normalize"), ("candidates", "normalize"), ("frontier", "render")} <= edges
    chat = studio.get(f"/assistants/{ids['memcompile_chat']}/graph").raise_for_status().json()
    assert {"recall", "model", "remember"} <= {n["id"] for n in chat["nodes"]}


def test_served_graphs_run_offline_against_the_store(studio):
    ids = assistants(studio)
    turn = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}
    run = {"assistant_id": ids["memcompile_ingest"], "input": {"user_id": "tom", "turns": [turn]}}
    assert len(studio.post("/runs/wait", json=run).raise_for_status().json()["packets"]) == 1
    run = {"assistant_id": ids["memcompile_query"], "input": {"user_id": "tom", "query": "What is the beagle called?"}}
    out = studio.post("/runs/wait", json=run).raise_for_status().json()
    assert [p["dia_id"] for p in out["packets"]] == ["D1:1"] and "Biscuit" in out["context"]
    run = {"assistant_id": ids["memcompile_chat"], "input": {"messages": [{"role": "user", "content": "What is my beagle called?"}]}, "context": {"user_id": "tom"}}
    messages = studio.post("/runs/wait", json=run).raise_for_status().json()["messages"]
    assert [m["type"] for m in messages] == ["human", "system", "ai"]
    assert "[D1:1] Tom | 2024-03-04" in messages[1]["content"] and "Biscuit" in messages[2]["content"]
