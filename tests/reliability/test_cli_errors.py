"""The CLI never prints a traceback: a bad input file, a bad store path or a damaged store file gives exactly one
line "memcompile: error: ..." and exit code 2, for every command that opens a store."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.cli import main
from memcompile_langgraph.store.layout import ENTRIES

from .harness import memcompile
from .strategies import examples, hostile_turn, json_values

GOOD = [{"speaker": "Ann", "text": "I keep my kayak in Lisbon", "dia_id": "D1:1"}]


def run(capsys, *args) -> tuple[int, list[str]]:
    code = main([str(a) for a in args])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return code, err


def assert_one_line(code: int, err: list[str], *fragments: str) -> None:
    assert code == 2 and len(err) == 1, (code, err)
    assert err[0].startswith("memcompile: error: ") and "Traceback" not in err[0]
    for f in fragments:
        assert f in err[0], err[0]


def assert_fails_in_one_line(code: int, err: list[str], kind: str) -> None:
    assert code == 2 and len(err) == 1, (kind, code, err)
    assert err[0].startswith("memcompile: error: ") and "Traceback" not in err[0]


def _commands(store: Path, turns: Path) -> list[list]:
    return [
        ["ingest", turns, "--store", store, "--quiet"],
        ["query", "where is the kayak?", "--store", store],
        ["stats", "--store", store],
        ["forget", "--store", store, "--user", "default"],
    ]


def _bad_stores(root: Path, turns: Path) -> dict[str, Path]:
    """One store path per kind of damage: (name -> path), each made on disk."""
    out = {}
    out["file_as_store"] = root / "a-file"
    out["file_as_store"].write_text("not a store")
    out["parent_is_file"] = out["file_as_store"] / "store"
    for name, folder in ENTRIES.items():
        store = root / f"wrong-{name.replace('/', '-')}"
        entry = store / name
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text("x") if folder else entry.mkdir()
        out[f"wrong_kind_{name}"] = store
    out["garbage_records"] = root / "garbage"
    out["garbage_records"].mkdir()
    (out["garbage_records"] / "memcompile.sqlite3").write_bytes(os.urandom(8192))
    damaged = root / "damaged-chroma"
    assert main(["ingest", str(turns), "--store", str(damaged), "--quiet"]) == 0
    with open(damaged / "chroma" / "chroma.sqlite3", "r+b") as fh:  # 16 KiB zeroed inside the vector store
        fh.seek(4096)
        fh.write(b"\0" * 16384)
    out["damaged_chroma"] = damaged
    return out


def test_bad_store_paths_are_one_line_errors(tmp_path, capsys):
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(GOOD))
    stores = _bad_stores(tmp_path, turns)
    capsys.readouterr()
    tried = 0
    for kind, store in stores.items():
        for args in _commands(store, turns):
            if kind == "damaged_chroma":
                continue  # below: what works on it is the repair work's to decide; here only: no traceback
            code, err = run(capsys, *args)
            assert_fails_in_one_line(code, err, kind)
            tried += 1
    assert tried >= 28


def test_damaged_vector_store_prints_no_traceback(tmp_path, capsys):
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(GOOD))
    store = _bad_stores(tmp_path, turns)["damaged_chroma"]
    capsys.readouterr()
    for args in _commands(store, turns):
        code, err = run(capsys, *args)
        assert code in (0, 2) and not any("Traceback" in line for line in err)
        assert code == 0 or len(err) == 1


file_contents = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.lists(hostile_turn, max_size=5).map(lambda ts: json.dumps(ts).encode()),
    st.lists(hostile_turn, max_size=5).map(lambda ts: "\n".join(json.dumps(t) for t in ts).encode()),
)


@examples(15)
@given(content=file_contents)
def test_any_input_file_is_stored_or_one_line(capsys, content):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.json"
        path.write_bytes(content)
        code, err = run(capsys, "ingest", path, "--store", Path(tmp) / "store", "--quiet")
        if code == 0:
            assert err and err[-1].startswith("done in")
        else:
            assert_one_line(code, err)


@pytest.mark.slow
def test_real_process_prints_no_traceback(tmp_path):
    """The installed entry point in its own process, for the path errors (the class above runs in-process)."""
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(GOOD))
    (tmp_path / "a-file").write_text("x")
    for store in (tmp_path / "a-file", tmp_path / "a-file" / "s"):
        for args in _commands(store, turns)[:2]:
            result = memcompile(*args)
            assert result.code == 2 and len(result.err_lines) == 1 and "is a file" in result.err, result.err
