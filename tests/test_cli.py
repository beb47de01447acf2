import argparse
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.paths import DATA

from memcompile_langgraph.cli import main
from memcompile_langgraph.cli.core import positive_int


def test_query_and_stats_never_create_a_store(tmp_path, capsys):
    missing = tmp_path / "nope"
    for argv in (["query", "anything", "--store", str(missing)], ["stats", "--store", str(missing)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no store at" in err
    assert not missing.exists()


@pytest.mark.slow  # a subprocess or a whole store build per case
def test_ingest_query_stats_graph_round_trip(tmp_path, capsys):
    turns = DATA / "cat_and_cello.jsonl"
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
    from memcompile_langgraph.cli.demo_data import demo_turns

    store = tmp_path / "s"
    MemCompile(store, embeddings=DeterministicFakeEmbedding(size=8)).add_turns(demo_turns()[:4], "ann")
    assert main(["stats", "--store", str(store), "--user", "ann"]) == 0
    assert "4 vectors (another model's: re-embedded at the next ingest)" in capsys.readouterr().out
    assert main(["stats", "--store", str(store), "--user", "ann", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vector_model"]["current"] is False


def _subcommands(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner, deeper in _subcommands(sub):
                    yield f"{name} {inner}", deeper


def test_every_argument_of_every_command_says_what_it_is():
    from memcompile_langgraph.cli import build_parser

    found = dict(_subcommands(build_parser()))
    assert {"demo", "ingest", "query", "stats", "graph", "ask", "forget", "eval locomo", "bench"} <= set(found)
    for name, sub in found.items():
        for action in sub._actions:
            if action.dest in ("help", "benchmark"):
                continue
            assert action.help, f"memcompile {name}: {action.option_strings or action.dest} has no help"
    for name in ("query", "stats", "ask"):  # they refuse a missing store, so their help must not promise one
        help_text = found[name].format_help()
        assert "created when missing" not in help_text and "an existing store" in help_text, name
    assert "default: 'default'" in found["query"].format_help() and "sample_id" not in found["query"].format_help()


def test_stats_says_singular_and_plural_and_what_its_counters_mean(tmp_path, capsys):
    turns = tmp_path / "one.jsonl"
    turn = {"speaker": "Ann", "text": "Thanks! How is Biscuit doing?", "time": "2024-01-02T10:00"}  # no claim in it
    turns.write_text(json.dumps(turn) + "\n")
    store = str(tmp_path / "s")
    assert main(["ingest", str(turns), "--store", store, "--user", "ann", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["stats", "--store", store]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ann: 1 packet (stored turns), 1 descriptor (claims), 1 Cell, 1 session, 1 vector\n")
    assert "fallback_claims: 1  (turns with no extractable claim: the turn's own text is their one claim)" in out


def test_the_stats_vector_count_read_from_chromas_file_is_chromas_own(tmp_path, embeddings):
    from memcompile_langgraph import MemCompile
    from memcompile_langgraph.cli.demo_data import demo_turns
    from memcompile_langgraph.store.stats import local_vector_count

    store = tmp_path / "s"
    mem = MemCompile(store, embeddings=embeddings)
    assert local_vector_count(store, "ann") == 0  # nothing written yet
    mem.add_turns(demo_turns()[:9], user_id="ann")
    mem.add_turns(demo_turns()[:5], user_id="bob")
    for step in ("added", "deleted", "more", "forgot"):
        for user in ("ann", "bob"):
            assert local_vector_count(store, user) == len(mem.engine.vectors.ids(user)), (step, user)
        if step == "added":
            mem.delete_turns("ann", ["D1:2", "D2:1"])
        elif step == "deleted":
            mem.add_turns(demo_turns()[9:], user_id="ann")
        elif step == "more":
            mem.forget("bob")
    assert local_vector_count(store, "ann") == len(demo_turns()) - 2 and local_vector_count(store, "bob") == 0
    mem.close()


@pytest.mark.slow
def test_stats_imports_no_graph_no_chroma_client_and_no_model(tmp_path):
    from memcompile_langgraph import MemCompile
    from memcompile_langgraph.cli.demo_data import demo_turns

    store = tmp_path / "s"
    MemCompile(store).add_turns(demo_turns()[:3], user_id="ann")
    probe = (
        "import sys; from memcompile_langgraph.cli import main; main(['stats', '--store', sys.argv[1]]); "
        "print(sorted(m for m in ('langgraph', 'chromadb', 'onnxruntime', 'tokenizers') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", probe, str(store)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("ann: 3 packets") and proc.stdout.splitlines()[-1] == "[]"


@given(st.text(max_size=12))
def test_any_max_tokens_argument_is_a_positive_integer_or_a_one_line_usage_error(text):
    try:
        value = positive_int(text)
    except argparse.ArgumentTypeError as exc:
        assert "\n" not in str(exc)
        return
    assert value >= 1 and str(value) == str(int(text))


@pytest.mark.slow  # a subprocess
def test_python_dash_m_runs_the_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "memcompile_langgraph", "stats", "--store", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no store at" in proc.stderr and "Traceback" not in proc.stderr


def test_every_user_option_is_also_spelt_user_id():
    from memcompile_langgraph.cli import build_parser

    parser = build_parser()
    for argv in (["query", "q", "--store", "s"], ["stats", "--store", "s"], ["forget", "--store", "s"], ["repair"]):
        argv = argv + (["--store", "s"] if argv == ["repair"] else [])
        assert parser.parse_args([*argv, "--user-id", "tom"]).user == "tom"
        assert parser.parse_args([*argv, "--user", "tom"]).user == "tom"
    assert parser.parse_args(["ingest", "f.json", "--user-id", "tom"]).user == "tom"
