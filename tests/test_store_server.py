"""`langgraph dev` with MemCompileStore as its long-term store (graphs/langgraph.store.json): /store/items and the
chat graph read and write one memory."""

import time

import httpx
import pytest
from support.servers import langgraph_dev
from test_studio import assistants

pytestmark = pytest.mark.slow

PET = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("store-server")
    with langgraph_dev(tmp, "langgraph.store.json") as base, httpx.Client(base_url=base, timeout=120) as client:
        yield client


def test_store_api_and_chat_graph_share_compiled_memory(server):
    server.put("/store/items", json={"namespace": ["tom"], "key": "pet", "value": PET}).raise_for_status()
    item = server.get("/store/items", params={"namespace": "tom", "key": "pet"}).raise_for_status().json()
    assert item["value"] == PET and item["created_at"] == item["updated_at"]

    # the chat graph recalls what was put, and remembers the exchange in the same memory
    run = {
        "assistant_id": assistants(server)["memcompile_chat"],
        "context": {"user_id": "tom"},
        "input": {"messages": [{"role": "user", "content": "What is my beagle called?"}]},
    }
    messages = server.post("/runs/wait", json=run).raise_for_status().json()["messages"]
    assert [m["type"] for m in messages] == ["human", "system", "ai"]
    assert "[pet] Tom | 2024-03-04" in messages[1]["content"]

    listed = server.post("/store/items/search", json={"namespace_prefix": ["tom"], "limit": 10})
    listed = listed.raise_for_status().json()
    assert (listed["items"][0]["key"], listed["items"][0]["value"]) == ("pet", PET)
    written = [i["value"]["text"] for i in listed["items"][1:]]
    # the run's turns, through the store: the reply only quoted the put item, which stands for it
    assert "[pet]" in messages[2]["content"] and written == ["What is my beagle called?"]

    query = {"namespace_prefix": ["tom"], "query": "What is the beagle called?"}
    found = server.post("/store/items/search", json=query)
    items = found.raise_for_status().json()["items"]  # the question asked in the chat run is compiled too
    assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
    assert all(0 <= i["score"] <= 1 for i in items)
    pet = next(i for i in items if i["key"] == "pet")
    assert pet["value"] == PET and pet["score"] > 0  # the value as put

    spaces = server.post("/store/namespaces", json={}).raise_for_status().json()["namespaces"]
    assert spaces == [["tom"]]
    server.request("DELETE", "/store/items", json={"namespace": ["tom"], "key": "pet"}).raise_for_status()
    assert server.get("/store/items", params={"namespace": "tom", "key": "pet"}).raise_for_status().json() is None


def test_an_item_put_with_a_ttl_expires(server):
    code = {"namespace": ["ann"], "key": "code", "value": {"text": "The door code is 4711."}, "ttl": 0.02}
    server.put("/store/items", json=code).raise_for_status()  # 1.2 seconds
    params = {"namespace": "ann", "key": "code", "refresh_ttl": "false"}
    assert server.get("/store/items", params=params).raise_for_status().json()["value"] == code["value"]
    time.sleep(1.5)
    assert server.get("/store/items", params=params).raise_for_status().json() is None
