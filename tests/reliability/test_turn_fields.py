"""Family 2: one bad field never sinks a batch. Every field of every turn is validated before any write: a bad turn
is skipped and counted, its neighbours are stored; a bad query is a ValueError or is cleaned."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile
from memcompile_langgraph.text.terms import clean_text

from .harness import memcompile
from .strategies import any_unicode, examples, hostile_text, hostile_turn, json_values

_users = itertools.count()


@pytest.fixture(scope="module")
def disk_memory(tmp_path_factory):
    """A real on-disk store (SQLite commit is where a surrogate used to fail), lexical channels only (fast)."""
    mem = MemCompile(tmp_path_factory.mktemp("fields"), dense=False)
    yield mem
    mem.close()


@pytest.fixture(scope="module")
def dense_memory(embeddings):
    return MemCompile(None, embeddings=embeddings)


def _good(user: str, n: int) -> dict:
    return {
        "speaker": "Ann",
        "text": f"good turn {n} about the red kayak",
        "time": "2024-03-01T10:00:00",
        "dia_id": f"G:{n}",
    }


def _accounted(counts: dict, handed: int) -> None:
    """Every turn handed over is stored, already stored, or skipped with a reason."""
    skipped = sum(v for k, v in counts.items() if k.startswith("skipped_"))
    assert counts["stored"] + counts.get("already_stored", 0) + skipped == handed, counts


def _check_batch(mem: MemCompile, bad) -> str:
    user = f"u{next(_users)}"
    batch = [_good(user, 1), bad, _good(user, 2)]
    counts = mem.add_turns(batch, user_id=user)  # never raises
    _accounted(counts, 3)
    index = mem.index(user)
    for n in (1, 2):
        stored = index.packets[index.by_dia[f"G:{n}"]]
        assert stored.text == _good(user, n)["text"]
    return user


@examples(40)
@given(bad=hostile_turn)
def test_any_value_in_any_field_skips_only_its_turn(disk_memory, bad):
    _check_batch(disk_memory, bad)


@examples(10)
@given(bad=hostile_turn, query=st.one_of(any_unicode, hostile_text))
def test_dense_store_and_any_query(dense_memory, bad, query):
    """With embeddings: the stored turn is embedded (no surrogate reaches the tokenizer), and any query compiles
    or is refused with a ValueError."""
    user = _check_batch(dense_memory, bad)
    try:
        dense_memory.compile(query, user_id=user)
    except ValueError:
        # refused only when nothing is left to search for: no letter or digit
        assert not any(ch.isalnum() for ch in clean_text(query))


@examples(25)
@given(
    date=st.datetimes(),
    minutes=st.integers(-72 * 60, 72 * 60),
    form=st.sampled_from(["{d}{sign}{h:02d}:{m:02d}", "{d}{sign}{h:02d}{m:02d}", "{d} {sign}{h:02d}:{m:02d}"]),
)
def test_any_utc_offset(disk_memory, date, minutes, form):
    """Offsets of 24 h and more (and every other) store the turn; an unreadable time is counted, not fatal."""
    sign, h, m = ("-" if minutes < 0 else "+"), abs(minutes) // 60, abs(minutes) % 60
    time = form.format(d=date.isoformat(), sign=sign, h=h, m=m)
    user = f"u{next(_users)}"
    turns = [_good(user, 1), {"speaker": "Bob", "text": "offset turn", "time": time}]
    counts = disk_memory.add_turns(turns, user_id=user)
    assert counts["stored"] == 2, (time, counts)
    if abs(minutes) >= 24 * 60:
        assert counts.get("unparsed_time") == 1


def test_the_reported_inputs(disk_memory):
    """The red team's cases, each beside good turns: the good ones are stored, the bad one counted."""
    bad = [
        {"speaker": "Bob", "text": "x", "time": "2024-01-01T10:00:00+25:00"},
        *({"speaker": "Bob", "text": "x", f: "\ud800"} for f in ("time", "dia_id", "session_label", "image_caption")),
        {"speaker": "Bob", "text": "x\ud800"},
        {"speaker": "B\ud800", "text": "x"},
    ]
    user = "reported"
    counts = disk_memory.add_turns([_good(user, 1), *bad, _good(user, 2)], user_id=user)
    assert counts["stored"] == 2 + len(bad)
    assert counts["invalid_unicode"] == len(bad) - 1 and counts["unparsed_time"] == 2  # +25:00 and "\ufffd"


def test_bad_query_is_a_clear_value_error(disk_memory):
    disk_memory.add_turns([_good("q", 1)], user_id="q")
    for query in ("", "   ", "\x00\u202e", None, 42, ["kayak"]):
        with pytest.raises(ValueError):
            disk_memory.compile(query, user_id="q")
    assert "kayak" in disk_memory.compile("red ka\ud800yak?", user_id="q").text  # invalid characters replaced


@pytest.mark.slow
def test_cli_ingests_a_file_with_bad_fields(tmp_path):
    """Through the CLI: lone surrogates from valid JSON escapes and an offset of 25 h no longer lose the file."""
    turns = [{"speaker": "Ann", "text": f"note {i} about the kayak", "dia_id": f"D1:{i}"} for i in range(300)]
    turns[10]["text"] = "broken \ud800 text"
    turns[20]["time"] = "2024-01-01T10:00:00+25:00"
    turns[30]["speaker"] = {"name": "Ann"}
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(turns))  # ensure_ascii: the surrogate is the escape "\ud800"
    run = memcompile("ingest", path, "--store", tmp_path / "store", "--quiet")
    assert run.code == 0, run.err
    assert "stored 299 turns" in run.out and "missing_speaker=1" in run.out and "invalid_unicode=1" in run.out


def test_json_values_never_raise_in_validation():
    """The validator alone, over the whole JSON value space: a TurnInput or a BadTurn, nothing else."""
    from memcompile_langgraph.ingest.turn_input import BadTurn, check_turn

    @examples(100)
    @given(raw=st.one_of(hostile_turn, json_values))
    def run(raw):
        try:
            turn = check_turn(raw).turn
        except BadTurn:
            return
        for value in (turn.speaker, turn.text, turn.time, turn.session_label, turn.dia_id, turn.image_caption):
            value.encode("utf-8")  # storable: no lone surrogate left
            assert not any(c in value for c in "\x00\u202e")

    run()
