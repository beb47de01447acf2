import json
import subprocess

from memcompile_langgraph.cli import main


def test_query_and_stats_never_create_a_store(tmp_path, capsys):
    missing = tmp_path / "nope"
    for argv in (["query", "anything", "--store", str(missing)], ["stats", "--store", str(missing)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no store at" in err
    assert not missing.exists()


def test_ingest_query_stats_graph_round_trip(tmp_path, capsys):
    turns = tmp_path / "turns.jsonl"
    turns.write_text("\n".join(json.dumps(t) for t in [
        {"speaker": "Ann", "text": "I adopted a grey cat named Miso.", "time": "2024-01-02T10:00"},
        {"speaker": "Bob", "text": "Lovely! I started learning the cello.", "time": "2024-01-02T10:01"},
    ]))
    store = str(tmp_path / "s")
    assert main(["ingest", str(turns), "--store", store, "--user", "ann", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["query", "What is the cat called?", "--store", store, "--user", "ann", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["packets"][0]["dia_id"] == "D1:1" and "Miso" in out["context"]
    assert set(out["packets"][0]) == {"dia_id", "speaker", "session", "time", "score"}
    assert main(["stats", "--store", store, "--user", "ann", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["packets"] == 2
    proc = subprocess.run(["memcompile", "graph"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "cell_routing" in proc.stdout and "frontier" in proc.stdout


def test_stats_says_when_vectors_await_a_reembed(tmp_path, capsys):
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from memcompile_langgraph import MemCompile
    from memcompile_langgraph.demo_data import demo_turns

    store = tmp_path / "s"
    MemCompile(store, embeddings=DeterministicFakeEmbedding(size=8)).add_turns(demo_turns()[:4], "ann")
    assert main(["stats", "--store", str(store), "--user", "ann"]) == 0
    assert "4 vectors (another model's: re-embedded at the next ingest)" in capsys.readouterr().out
    assert main(["stats", "--store", str(store), "--user", "ann", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vector_model"]["current"] is False
