"""What each CLI command loads, in a fresh process as a user runs it: `--help` and `stats` load none of LangGraph,
LangChain, Chroma or onnxruntime; `query` on a store whose snapshot file is current never imports chromadb, and it
prints what it prints with Chroma opened. (How long they take: `memcompile bench --startup`, docs/performance.md.)"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from support.ranking import assert_same_context

from memcompile_langgraph import MemCompile
from memcompile_langgraph.demo_data import demo_turns

HEAVY = ("langgraph", "langchain_core", "langsmith", "chromadb", "onnxruntime", "tokenizers")
# the CLI as the `memcompile` script runs it, saying at exit which of HEAVY it imported
CHILD = (
    "import atexit, json, sys\n"
    f"atexit.register(lambda: print('LOADED=' + json.dumps([m for m in {HEAVY!r} if m in sys.modules]), "
    "file=sys.stderr))\n"
    "from memcompile_langgraph.cli import main\n"
    "sys.exit(main())\n"
)
QUESTION = "Where does Priya work now?"


def run(*args) -> tuple[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = [line for line in proc.stderr.splitlines() if line.startswith("LOADED=")]
    assert len(loaded) == 1, proc.stderr[-2000:]
    return proc.stdout, json.loads(loaded[0][len("LOADED=") :])


@pytest.fixture(scope="module")
def store(tmp_path_factory, embeddings):
    path = tmp_path_factory.mktemp("startup") / "store"
    mem = MemCompile(path, embeddings=embeddings)
    mem.add_turns(demo_turns(), user_id="demo")
    mem.close()  # the snapshot file is current from here on
    return path


@pytest.mark.slow  # one fresh interpreter per command
def test_help_and_stats_load_no_graph_vector_store_or_model(store):
    out, loaded = run("--help")
    assert "query" in out and loaded == []
    out, loaded = run("stats", "--store", store)
    assert f"{len(demo_turns())} packets" in out and f"{len(demo_turns())} vectors" in out and loaded == []


@pytest.mark.slow
def test_query_from_a_current_snapshot_file_needs_no_chroma_and_answers_as_with_it(store):
    out, loaded = run("query", QUESTION, "--store", store, "--user", "demo", "--json")
    assert "chromadb" not in loaded and {"langgraph", "onnxruntime"} <= set(loaded)  # the graph runs, the query embeds
    from_snapshot = json.loads(out)
    assert from_snapshot["trace"]["dense"]["hits"] > 0 and "Northwind" in from_snapshot["context"]

    shutil.rmtree(store / "snapshots")  # a cold start without it: every vector is read from Chroma
    out, loaded = run("query", QUESTION, "--store", store, "--user", "demo", "--json")
    assert "chromadb" in loaded
    from_chroma = json.loads(out)
    assert_same_context(
        from_chroma["packets"], from_chroma["context"], from_snapshot["packets"], from_snapshot["context"]
    )
    assert (store / "snapshots").is_dir()  # that load saved the snapshot file again: the next query skips Chroma
    _, loaded = run("query", QUESTION, "--store", store, "--user", "demo")
    assert "chromadb" not in loaded
