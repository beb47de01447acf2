"""What held then: a query `as_of` a date answers from what had been said by then, with the facts current then (by
the statements' own times, not the order they were stored in); nothing stored changes. Through compile, the
retriever, the tool, MCP `recall` and the CLI."""

from __future__ import annotations

import json
import os
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.generated_sets import FILLER
from support.paths import ROOT

from memcompile_langgraph.cli import main
from memcompile_langgraph.text.timeparse import said_by_time, validate_as_of

# stored newest first: the move, then the older statement backfilled after it
TURNS = [
    {"speaker": "Ana", "text": "I moved from Berlin to Lisbon.", "time": "2024-06-10", "session": 3, "dia_id": "D3:1"},
    *({"speaker": "Ana", "text": t, "time": "2024-05-01", "session": 2} for t in FILLER[:5]),
    {"speaker": "Ana", "text": "I live in Berlin.", "time": "2024-03-01", "session": 1, "dia_id": "D1:1"},
]
QUESTION = "Where do I live?"


def ids(packets) -> list[str]:
    return [p["dia_id"] if isinstance(p, dict) else p.dia_id for p in packets]


def test_compile_as_of_answers_from_what_was_said_by_then_and_rewrites_nothing(make_mem):
    mem = make_mem(turns=TURNS, user_id="ana")
    now = mem.compile(QUESTION, user_id="ana")
    assert ids(now.packets)[0] == "D3:1" and "superseded" in now.text
    for when in ("2024-04-01", date(2024, 4, 1), datetime(2024, 4, 1, 12, 0), "2024-03-01"):  # a date: its whole day
        then = mem.compile(QUESTION, user_id="ana", as_of=when)
        assert "D3:1" not in ids(then.packets) and "Lisbon" not in then.text
        assert ids(then.packets)[0] == "D1:1" and "superseded" not in then.text  # Berlin was current then
        assert not [p for p in then.packets if p.time > "2024-03-01T23:59:59"]
    assert mem.compile(QUESTION, user_id="ana", as_of="2024-02-28").packets == []  # nothing said yet
    assert ids(mem.compile(QUESTION, user_id="ana", as_of="2024-06-10").packets)[0] == "D3:1"
    assert mem.compile(QUESTION, user_id="ana").text == now.text  # nothing was rewritten
    assert mem.stats("ana")["packets"] == len(TURNS)


def test_the_retriever_and_the_tool_take_as_of(make_mem):
    mem = make_mem(turns=TURNS, user_id="ana")
    docs = mem.as_retriever("ana", as_of="2024-04-01").invoke(QUESTION)
    assert docs and "D3:1" not in [d.metadata["dia_id"] for d in docs]
    assert mem.as_retriever("ana").invoke(QUESTION)[0].metadata["dia_id"] == "D3:1"
    tool = mem.as_tool(user_id="ana")
    assert "Lisbon" not in tool.invoke({"query": QUESTION, "as_of": "2024-04-01"})
    assert "Lisbon" in tool.invoke({"query": QUESTION})
    assert tool.invoke({"query": QUESTION, "as_of": "last spring"}).startswith("as_of must be a date")
    with pytest.raises(ValueError, match="as_of must be a date"):
        mem.as_retriever("ana", as_of="yesterday")


@given(st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.none()))
def test_as_of_is_an_iso_time_or_a_one_line_error(value):
    try:
        out = validate_as_of(value)
    except ValueError as exc:
        assert "\n" not in str(exc) and "as_of" in str(exc)
        return
    assert out is None if value is None else datetime.fromisoformat(out)


_OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
_MOMENTS = st.datetimes(datetime(2000, 1, 1), datetime(2040, 1, 1), timezones=_OFFSETS).map(
    lambda t: t.replace(microsecond=0)
)


@given(_MOMENTS, _MOMENTS, st.booleans())
def test_as_of_with_an_offset_counts_what_was_said_by_that_moment(said, as_of, as_text):
    """A stored time with an offset meets an as_of with one (a datetime, or a string as MCP and the CLI give it) as
    a moment; without an offset on either side, as clock readings (the test above)."""
    given_as_of = as_of.isoformat() if as_text else as_of
    counts = said_by_time(validate_as_of(given_as_of))
    assert counts(said.isoformat(timespec="seconds")) == (said <= as_of)
    plain = said.replace(tzinfo=None).isoformat(timespec="seconds")  # no offset stored: its clock against as_of's
    assert counts(plain) == (said.replace(tzinfo=None) <= as_of.replace(tzinfo=None))


def test_compile_as_of_a_moment_in_another_zone(make_mem):
    # said at 05:00 UTC and 08:00 UTC; the second's clock reads earlier than the first's
    turns = [
        {"speaker": "Ana", "text": "I live in Berlin.", "time": "2024-04-05T10:00:00+05:00", "dia_id": "D1:1"},
        {"speaker": "Ana", "text": "I moved to Lisbon.", "time": "2024-04-05T08:00:00+00:00", "dia_id": "D2:1"},
    ]
    mem = make_mem(turns=turns, user_id="ana")
    for as_of, said in (
        ("2024-04-05T06:00:00Z", {"D1:1"}),
        (datetime(2024, 4, 5, 9, 0, tzinfo=timezone(timedelta(hours=2))), {"D1:1"}),  # 07:00 UTC
        ("2024-04-05T13:30:00+05:00", {"D1:1", "D2:1"}),  # 08:30 UTC
        ("2024-04-05T04:59:00+00:00", set()),
    ):
        assert set(ids(mem.compile(QUESTION, user_id="ana", as_of=as_of).packets)) == said


def test_the_cli_query_takes_as_of(make_mem, tmp_path, capsys):
    make_mem("store", turns=TURNS, user_id="ana").close()
    store = str(tmp_path / "store")
    assert main(["query", QUESTION, "--store", store, "--user", "ana", "--as-of", "2024-04-01", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "D3:1" not in ids(out["packets"]) and ids(out["packets"])[0] == "D1:1"
    assert main(["query", QUESTION, "--store", store, "--user", "ana", "--as-of", "April"]) != 0
    err = capsys.readouterr().err.strip()
    assert "as_of must be a date" in err and len(err.splitlines()) == 1


async def test_mcp_recall_takes_as_of(make_mem, tmp_path):
    make_mem("store", turns=TURNS, user_id="ana").close()
    cli = ["-c", "import sys; from memcompile_langgraph.cli import main; sys.exit(main())"]
    params = StdioServerParameters(
        command=os.sys.executable,
        args=[*cli, "mcp", "--store", str(tmp_path / "store")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"},
        cwd=str(tmp_path),
    )
    with open(tmp_path / "stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            then = await session.call_tool("recall", {"query": QUESTION, "user_id": "ana", "as_of": "2024-04-01"})
            now = await session.call_tool("recall", {"query": QUESTION, "user_id": "ana"})
    then_ids = ids(json.loads(then.content[0].text)["packets"])
    assert "D3:1" not in then_ids and then_ids[0] == "D1:1"
    assert ids(json.loads(now.content[0].text)["packets"])[0] == "D3:1"
