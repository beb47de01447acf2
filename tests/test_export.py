"""Export and re-import: a user's turns written as JSONL by `memcompile export` and stored again by `memcompile
ingest` give the same memory on either records backend: the same compiled selection and provenance for every
question of a LoCoMo conversation."""

from __future__ import annotations

import doctest
import json
import os
import stat

import pytest

from memcompile_langgraph import MemCompile, upkeep
from memcompile_langgraph.cli import main
from memcompile_langgraph.ingest.loaders import locomo_turns

USER = "conv-26"


def _selections(mem: MemCompile, questions: list[str]) -> list[tuple[str, list[tuple[str, str, int, str]], list]]:
    out = []
    for q in questions:
        ctx = mem.compile(q, user_id=USER)
        provenance = [(p.dia_id, p.speaker, p.session, p.time) for p in ctx.packets]
        out.append((ctx.text, provenance, [p.score for p in ctx.packets]))
    return out


@pytest.mark.slow
def test_an_exported_conversation_imports_as_the_same_memory(locomo_samples, backend, tmp_path, capsys):
    sample = next(s for s in locomo_samples if s["sample_id"] == USER)
    questions = [qa["question"] for qa in sample["qa"] if qa.get("category") != 5]
    source = MemCompile(tmp_path / "source", records_url="")
    source.add_turns(locomo_turns(sample["conversation"]), user_id=USER)
    stored = source.stats(USER)["packets"]
    expected = _selections(source, questions)
    source.close()

    dump = tmp_path / "turns.jsonl"
    assert (
        main(["export", "--store", str(tmp_path / "source"), "--records-url", "", "--user", USER, "-o", str(dump)]) == 0
    )
    assert stat.S_IMODE(os.stat(dump).st_mode) == 0o600  # as private as the store it came from
    head, *lines, end = [json.loads(line) for line in dump.read_text().splitlines()]
    assert head == {"memcompile_export": 1, "user": USER} and end == {"memcompile_export_end": stored}
    assert len(lines) == stored and all(line["stored_at"] for line in lines)

    target = backend.where(tmp_path / "target")
    assert main(["ingest", str(dump), *target.cli, "--user", USER, "--quiet"]) == 0
    assert f"{USER}: stored {stored} turns" in capsys.readouterr().out
    mem = target.memory()
    try:
        got = _selections(mem, questions)
        assert list(mem.export_turns(USER)) == [
            {**line, "stored_at": again["stored_at"]} for line, again in zip(lines, mem.export_turns(USER))
        ]
    finally:
        mem.close()
    for (text, provenance, scores), (text2, provenance2, scores2) in zip(expected, got):
        assert provenance2 == provenance
        assert text2 == text
        assert scores2 == pytest.approx(scores, rel=1e-5, abs=1e-6)


def test_export_of_an_unknown_user_names_the_stored_ones(tmp_path, capsys):
    mem = MemCompile(tmp_path / "s", dense=False, records_url="")
    mem.add_turns([{"speaker": "Ann", "text": "Hello there."}], user_id="ann")
    mem.close()
    assert main(["export", "--store", str(tmp_path / "s"), "--records-url", "", "--user", "bob"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds nothing for user 'bob'" in err[0] and "ann" in err[0]


def test_export_pages_through_every_turn_in_dialogue_order(tmp_path):
    mem = MemCompile(None, dense=False)
    turns = [
        {"speaker": "Ann" if i % 2 else "Bo", "text": f"Line number {i}.", "session": 1 + i // 10} for i in range(35)
    ]
    mem.add_turns(turns, user_id="u")
    exported = list(mem.export_turns("u", page=8))
    assert [t["text"] for t in exported] == [t["text"] for t in turns]
    assert [t["session"] for t in exported] == [t["session"] for t in turns]
    again = MemCompile(None, dense=False)
    assert again.add_turns(exported, user_id="u")["stored"] == 35
    assert again.add_turns(exported, user_id="u")["already_stored"] == 35  # an import run twice stores once
    strip = lambda turns: [{k: v for k, v in t.items() if k != "stored_at"} for t in turns]  # noqa: E731
    assert strip(again.export_turns("u")) == strip(exported)


def test_the_docstring_example_runs():
    failures, tried = doctest.testmod(upkeep, extraglobs={"MemCompile": MemCompile}, report=True)[:2]
    assert tried and not failures
