"""The surfaces' edges a new user meets first: the version, the formats `ingest` takes, `export -o -`, what
`forget` returns, a query with nothing to search for, values a store cannot hold as they are, the demo's one
warning without a model, and docs that name only paths a user has."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import date, datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore
from support.paths import ROOT

import memcompile_langgraph
from memcompile_langgraph.cli import main
from memcompile_langgraph.integrations.base_store import MemCompileStore
from memcompile_langgraph.text.terms import clean_query

TURNS = [
    {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"},
    {"speaker": "Ann", "text": "I am training for the Boston marathon in April.", "time": "4 March 2024"},
]
NO_WORD = "query must contain a word (a letter or digit)"


def test_version_on_the_command_line_and_in_the_package(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"memcompile {memcompile_langgraph.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.?(a|b|rc|dev|post)\d+)?", memcompile_langgraph.__version__)
    assert "__version__" in memcompile_langgraph.__all__


def _beam_chat() -> list[dict]:
    """A BEAM chat.json of two batches, as the benchmark publishes them (a "->-> b,t" tag ends user messages)."""
    return [
        {
            "batch_number": 1,
            "time_anchor": "March-15-2024",
            "turns": [
                [
                    {"role": "user", "id": 0, "content": "I adopted a beagle named Biscuit. ->-> 1,1"},
                    {"role": "assistant", "id": 1, "content": "Congratulations on Biscuit!"},
                ]
            ],
        },
        {
            "batch_number": 2,
            "time_anchor": "April-02-2024",
            "turns": [[{"role": "user", "id": 2, "content": "Biscuit learned to sit. ->-> 2,1"}]],
        },
    ]


def test_ingest_takes_a_beam_chat_json(tmp_path, capsys):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(_beam_chat()))
    store = tmp_path / "s"
    assert main(["ingest", str(path), "--store", str(store), "--records-url", "", "--user", "me", "--quiet"]) == 0
    assert "me: stored 3 turns" in capsys.readouterr().out
    assert main(["export", "--store", str(store), "--records-url", "", "--user", "me"]) == 0
    turns = [json.loads(line) for line in capsys.readouterr().out.splitlines()[1:-1]]
    assert [(t["dia_id"], t["speaker"], t["session"]) for t in turns] == [
        ("D1:0", "User", 1),
        ("D1:1", "Assistant", 1),
        ("D2:2", "User", 2),
    ]
    assert turns[0]["text"] == "I adopted a beagle named Biscuit." and turns[2]["time"] == "April-02-2024"


@pytest.mark.parametrize("suffix", ["jsonl", "json"])
def test_ingest_takes_chat_messages_with_role_and_content(tmp_path, capsys, suffix):
    messages = [
        {"role": "user", "content": "I adopted a beagle named Biscuit.", "time": "4 March 2024"},
        {"role": "assistant", "content": "What a lovely name.", "time": "4 March 2024"},
    ]
    path = tmp_path / f"chat.{suffix}"
    path.write_text("\n".join(json.dumps(m) for m in messages) if suffix == "jsonl" else json.dumps(messages))
    store = tmp_path / "s"
    assert main(["ingest", str(path), "--store", str(store), "--records-url", "", "--user", "me", "--quiet"]) == 0
    assert "me: stored 2 turns" in capsys.readouterr().out
    assert main(["query", "What is the dog called?", "--store", str(store), "--records-url", "", "--user", "me"]) == 0
    out = capsys.readouterr().out
    assert "User" in out and "Biscuit" in out


def test_a_file_of_no_known_format_is_refused_with_the_formats_taken(tmp_path, capsys):
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps({"who": "me", "said": "hello"}) + "\n")
    assert main(["ingest", str(path), "--store", str(tmp_path / "s"), "--records-url", "", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    for named in ("LoCoMo", "BEAM chat.json", "JSONL", "{speaker, text}", "{role, content}"):
        assert named in err
    assert not (tmp_path / "s").exists()


def test_export_dash_o_dash_writes_to_stdout(tmp_path, capsys, make_mem):
    mem = make_mem("s", turns=TURNS, user_id="tom", dense=False, records_url="")
    mem.close()
    os.chdir(tmp_path)
    assert main(["export", "--store", str(tmp_path / "s"), "--records-url", "", "--user", "tom", "-o", "-"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 4 and json.loads(lines[1])["text"] == TURNS[0]["text"]
    assert not (tmp_path / "-").exists() and captured.err.strip() == "tom: exported 2 turns"


def test_forget_returns_the_turns_it_removed_as_mcp_forget_does(backend, tmp_path):
    mem = backend.where(tmp_path / "store").memory(dense=False)
    try:
        mem.add_turns(TURNS, user_id="tom")
        mem.add_turns(TURNS[:1], user_id="ann")
        assert mem.forget("tom") == {"forgot_turns": 2}
        assert mem.forget("tom") == {"forgot_turns": 0}  # idempotent
        assert mem.stats("ann")["packets"] == 1  # no other user touched
    finally:
        mem.close()


@given(st.text(alphabet=st.characters(categories=["P", "S", "Z", "Cc"]), max_size=20))
def test_a_query_without_a_letter_or_digit_is_refused_like_an_empty_one(query):
    with pytest.raises(ValueError, match=re.escape(NO_WORD)):
        clean_query(query)


@pytest.mark.parametrize("query", ["", "??", " ... !"])
def test_nothing_to_search_for_is_one_error_on_the_api_and_the_cli(query, make_mem, capsys, tmp_path):
    mem = make_mem("s", turns=TURNS, user_id="tom", dense=False, records_url="")
    with pytest.raises(ValueError, match=re.escape(NO_WORD)):
        mem.compile(query, user_id="tom")
    mem.close()
    assert main(["query", query, "--store", str(tmp_path / "s"), "--records-url", "", "--user", "tom"]) == 2
    assert capsys.readouterr().err.strip() == f"memcompile: error: {NO_WORD}"


def test_a_query_of_one_word_or_digit_still_searches(make_mem):
    mem = make_mem(turns=TURNS, user_id="tom", dense=False)
    assert mem.compile("Biscuit?", user_id="tom").packets and mem.compile("10", user_id="tom") is not None


def test_dates_and_times_in_a_store_value_are_kept_as_iso_text_where_in_memory_store_takes_them(make_mem):
    when = datetime(2024, 3, 4, 9, 15, tzinfo=timezone.utc)
    value = {"text": "Tom adopted a beagle named Biscuit.", "when": when, "day": date(2024, 3, 4)}
    peer = InMemoryStore()
    peer.put(("tom",), "dog", value)  # the store MemCompileStore stands in for takes it
    store = MemCompileStore(make_mem(dense=False))
    store.put(("tom",), "dog", value)
    store.put(("tom",), "leaf", {"when": when})  # no text: its fields are the text
    store.put(("tom",), "timed", {"text": "Biscuit learned to sit.", "time": when})
    got = store.get(("tom",), "dog").value
    assert got == {**value, "when": "2024-03-04T09:15:00+00:00", "day": "2024-03-04"}
    assert store.get(("tom",), "leaf").value == {"when": "2024-03-04T09:15:00+00:00"}
    assert store.get(("tom",), "timed").value["time"] == "2024-03-04T09:15:00+00:00"
    with pytest.raises(ValueError, match=r"^store value must be JSON: a set is not JSON$"):
        store.put(("tom",), "bad", {"text": "x", "tags": {"a"}})
    assert store.get(("tom",), "bad") is None  # refused before anything changed


@pytest.mark.slow
def test_the_demo_without_a_model_warns_once(tmp_path):
    home = tmp_path / "home"  # no Chroma cache of the model either
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MEMCOMPILE_MODEL_DIR"}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), ANONYMIZED_TELEMETRY="False", MEMCOMPILE_CACHE_DIR=str(home))
    run = subprocess.run(
        [sys.executable, "-m", "memcompile_langgraph", "demo"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    said = (run.stdout + run.stderr).lower()
    assert said.count("embedding model") == 1 and "warning" in run.stderr.lower()
    assert "Q: " in run.stdout


def test_docs_name_no_path_only_the_project_workspace_has():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [f"{p.name}: {m}" for p in pages for m in re.findall(r"\S*(?:\.\./shared/|/work/)\S*", p.read_text())]
    assert not found
