"""Chroma server mode against a real `chroma run` on a free loopback port: vectors live in the server."""

import json
import subprocess

import chromadb
import pytest
from chromadb.config import Settings
from support.servers import free_port

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import demo_turns

pytestmark = pytest.mark.slow


def test_ingest_and_query_keep_vectors_in_the_server(tmp_path, chroma_url, embeddings):
    store = tmp_path / "store"
    mem = MemCompile(store, embeddings=embeddings, chroma_url=chroma_url)
    assert mem.add_turns(demo_turns(), user_id="demo")["stored"] == len(demo_turns())
    ctx = mem.compile("What kind of dog did Tom adopt?", user_id="demo")
    assert "Biscuit" in ctx.text and ctx.trace["dense"]["hits"] == len(demo_turns())

    port = int(chroma_url.rsplit(":", 1)[1])
    server = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
    col = server.get_collection(mem.engine.vectors.name("demo"))
    got = col.get(include=["embeddings", "metadatas"])
    assert sorted(got["ids"]) == sorted(mem.index("demo").packets)
    assert len(got["embeddings"][0]) == 384 and {m["dia_id"] for m in got["metadatas"]} == set(mem.index("demo").by_dia)
    assert not (store / "chroma").exists()  # nothing went to a local Chroma

    # another process sharing the memory: the CLI with --chroma-url sees the same vectors
    cli = ["memcompile", "stats", "--store", str(store), "--user", "demo", "--json", "--chroma-url", chroma_url]
    stats = json.loads(subprocess.run(cli, capture_output=True, text=True, check=True, timeout=120).stdout)
    assert stats["vectors"] == stats["packets"] == len(demo_turns())

    mem.forget("demo")
    assert mem.engine.vectors.name("demo") not in [c.name for c in server.list_collections()]
    mem.close()


def test_unreachable_server_is_one_clear_error(tmp_path):
    mem = MemCompile(tmp_path, dense=False)  # a store whose vectors are said to be on a server that is not there
    mem.add_turns(demo_turns()[:2], user_id="demo")
    mem.close()
    cli = ["memcompile", "stats", "--store", str(tmp_path), "--chroma-url", f"http://127.0.0.1:{free_port()}"]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Chroma server" in proc.stderr, proc.stderr


def test_two_stores_share_one_server_without_meeting(tmp_path, chroma_url, embeddings):
    a = MemCompile(tmp_path / "a", embeddings=embeddings, chroma_url=chroma_url)
    b = MemCompile(tmp_path / "b", embeddings=embeddings, chroma_url=chroma_url)
    a.add_turns([{"speaker": "Ann", "text": "My cat Miso loves tuna.", "time": "2024-01-02"}], user_id="same")
    b.add_turns([{"speaker": "Bob", "text": "I repaired my bicycle.", "time": "2024-01-03"}], user_id="same")
    assert a.engine.vectors.name("same") != b.engine.vectors.name("same")
    reopened = MemCompile(tmp_path / "a", embeddings=embeddings, chroma_url=chroma_url)  # reconcile removes orphans
    assert reopened.engine.vectors.name("same") == a.engine.vectors.name("same")
    assert (
        len(reopened.engine.vectors.ids("same")) == 1
        and len(MemCompile(tmp_path / "b", embeddings=embeddings, chroma_url=chroma_url).engine.vectors.ids("same"))
        == 1
    )
    assert "bicycle" not in reopened.compile("What was repaired?", user_id="same").text


def test_a_collection_dropped_by_another_process_is_fetched_again(tmp_path, chroma_url, embeddings):
    store = tmp_path / "store"
    a = MemCompile(store, embeddings=embeddings, chroma_url=chroma_url)
    b = MemCompile(store, embeddings=embeddings, chroma_url=chroma_url)  # another process on the same store
    a.add_turns(demo_turns()[:10], user_id="u")
    b.add_turns(demo_turns()[10:20], user_id="u")
    a.forget("u")  # deletes the server collection b last wrote to
    assert b.add_turns(demo_turns()[:5], user_id="u")["stored"] == 5
    assert (
        len(b.engine.vectors.ids("u")) == 5 and b.compile("Who is Tom's dog?", user_id="u").trace["dense"]["hits"] == 5
    )
