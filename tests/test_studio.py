"""`langgraph dev` serves graphs/langgraph.json offline: every stage node of the query graph, and real runs."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from support.paths import ROOT
from support.servers import langgraph_dev

from memcompile_langgraph.query_graph import STAGES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("studio")
    with langgraph_dev(tmp, "langgraph.json") as base, httpx.Client(base_url=base, timeout=300) as client:
        client.store_path = tmp / "store"
        yield client


@pytest.fixture(scope="module")
def studio_store(studio):
    return studio.store_path


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
    assert {
        ("intent", "bm25"),
        ("intent", "dense"),
        ("schedule", "frontier"),
        ("dense", "normalize"),
        ("candidates", "normalize"),
        ("frontier", "render"),
    } <= edges
    chat = studio.get(f"/assistants/{ids['memcompile_chat']}/graph").raise_for_status().json()
    assert {"recall", "model", "remember"} <= {n["id"] for n in chat["nodes"]}


def test_served_graphs_run_offline_against_the_store(studio):
    ids = assistants(studio)
    turn = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}
    run = {"assistant_id": ids["memcompile_ingest"], "input": {"turns": [turn]}, "context": {"user_id": "tom"}}
    assert len(studio.post("/runs/wait", json=run).raise_for_status().json()["packets"]) == 1
    run = {
        "assistant_id": ids["memcompile_query"],
        "input": {"query": "What is the beagle called?"},
        "context": {"user_id": "tom"},
    }
    out = studio.post("/runs/wait", json=run).raise_for_status().json()
    assert [p["dia_id"] for p in out["packets"]] == ["D1:1"] and "Biscuit" in out["context"]
    assert "query_vectors" not in out  # 384 floats per vector, of no use to the caller
    run = {
        "assistant_id": ids["memcompile_chat"],
        "input": {"messages": [{"role": "user", "content": "What is my beagle called?"}]},
        "context": {"user_id": "tom"},
    }
    messages = studio.post("/runs/wait", json=run).raise_for_status().json()["messages"]
    assert [m["type"] for m in messages] == ["human", "system", "ai"]
    assert "[D1:1] Tom | 2024-03-04" in messages[1]["content"] and "Biscuit" in messages[2]["content"]


WRITER = """
import json, sys
from memcompile_langgraph import MemCompile
mem = MemCompile(sys.argv[1])
turns = json.loads(sys.argv[2])
for start in range(0, len(turns), 100):  # several units of work, interleaving with the server's runs
    mem.add_turns(turns[start:start + 100], user_id="race")
"""


def test_studio_ingest_runs_and_add_turns_in_another_process_lose_and_duplicate_nothing(studio, studio_store):
    ids = assistants(studio)
    mine = [
        {"speaker": "Ann", "text": f"process note {i} about the canoe {i}", "time": "2024-05-01", "dia_id": f"P:{i}"}
        for i in range(400)
    ]
    served = [
        {"speaker": "Bo", "text": f"studio note {i} about the glacier {i}", "time": "2024-05-02", "dia_id": f"S:{i}"}
        for i in range(120)
    ]
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(studio_store), json.dumps(mine)], cwd=str(ROOT))
    seen = []

    def ingest(chunk):
        run = {"assistant_id": ids["memcompile_ingest"], "input": {"turns": chunk}, "context": {"user_id": "race"}}
        return studio.post("/runs/wait", json=run).raise_for_status().json()

    def query(n):
        run = {
            "assistant_id": ids["memcompile_query"],
            "input": {"query": f"glacier canoe note {n}"},
            "context": {"user_id": "race"},
        }
        out = studio.post("/runs/wait", json=run).raise_for_status().json()
        seen.append(out)

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(ingest, served[i : i + 10]) for i in range(0, len(served), 10)]
        futures += [pool.submit(query, n) for n in range(12)]
        for f in futures:
            f.result()
    assert writer.wait(timeout=600) == 0

    from memcompile_langgraph import MemCompile

    mem = MemCompile(studio_store)
    stored = mem.turns("race")
    dia_ids = [t.packet.dia_id for t in stored]
    assert len(dia_ids) == len(set(dia_ids)) == len(mine) + len(served)  # nothing lost, nothing twice
    assert set(mem.engine.vectors.ids("race")) == {t.packet.packet_id for t in stored}  # records and vectors agree
    for out in seen:  # every reader saw whole, stored turns with their provenance
        for p in out["packets"]:
            assert p["dia_id"] in set(dia_ids) and f"[{p['dia_id']}]" in out["context"]
    final = mem.compile("glacier note 7", "race")
    assert final.trace["dense"]["hits"] > 0 and "S:7" in {p.dia_id for p in final.packets}
