"""Inputs bounded on every surface (issue 26): a file with one line nested too deeply for the parser, and a CLI
whose reader closes the pipe."""

from __future__ import annotations

import json
import subprocess

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.loaders import load_file

from .harness import CLI, cli_env, memcompile

DEEP = "[" * 100_000 + "]" * 100_000  # past json's recursion limit
GOOD = [{"speaker": "Ann", "text": 'I keep bees " ] { on the roof.'}, {"speaker": "Tom", "text": "I sail on Sundays."}]


@pytest.mark.parametrize(
    "name, body",
    [
        ("deep_line_in_the_middle.jsonl", "\n".join([json.dumps(GOOD[0]), DEEP, json.dumps(GOOD[1])])),
        ("deep_first_line.jsonl", "\n".join([DEEP, json.dumps(GOOD[0]), json.dumps(GOOD[1])])),
        ("deep_item.json", "[\n" + ",\n".join([json.dumps(GOOD[0]), DEEP, json.dumps(GOOD[1])]) + "\n]"),
        ("deep_field.json", "[" + json.dumps(GOOD[0])[:-1] + ', "x": ' + DEEP + "}, " + json.dumps(GOOD[1]) + "]"),
    ],
)
def test_one_deeply_nested_line_costs_that_line(name, body, tmp_path):
    path = tmp_path / name
    path.write_text(body)
    (conv,) = load_file(path)
    kept = [t["text"] for t in conv.turns]
    assert conv.bad_lines == 1 and GOOD[1]["text"] in kept and len(kept) == (1 if "field" in name else 2)


@pytest.mark.slow  # the real CLI in a subprocess
def test_ingest_stores_the_good_lines_around_a_deep_one_and_counts_it(tmp_path):
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join([json.dumps(GOOD[0]), DEEP, json.dumps(GOOD[1])]))
    run = memcompile("ingest", path, "--store", tmp_path / "s", "--user", "ann", "--quiet")
    assert run.code == 0 and "Traceback" not in run.err, run.err
    stats = json.loads(memcompile("stats", "--store", tmp_path / "s", "--user", "ann", "--json").out)
    assert stats["packets"] == 2 and stats["counters"]["skipped_bad_json_line"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("command", [["stats"], ["query", "Who keeps bees?"]])
def test_cli_exits_quietly_when_its_reader_closes_the_pipe(command, tmp_path):
    mem = MemCompile(tmp_path / "s", dense=False)
    mem.add_turns(GOOD * 50, user_id="default")
    mem.close()
    proc = subprocess.Popen(
        [*CLI, *command, "--store", str(tmp_path / "s")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env()
    )
    proc.stdout.close()  # the reader is gone before the first line is written (`| head -0`)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 0 and "error" not in err and "Traceback" not in err, err
