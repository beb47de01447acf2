"""What `compile` returns is typed: SelectedPacket records, whose dict form is the JSON the served query graph outputs
(the same keys in the same order), read back whole by from_dict."""

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph import SelectedPacket
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.query_graph import query_graph

QUESTION = "What kind of dog did Tom adopt and what is its name?"
JSON_KEYS = ["dia_id", "speaker", "session", "time", "score", "packet_id", "rank", "source", "shown"]


def test_compile_returns_records_whose_json_is_the_query_graphs(make_mem):
    mem = make_mem("store", turns=demo_turns(), user_id="demo")
    ctx = mem.compile(QUESTION, user_id="demo")
    assert ctx.packets and all(type(p) is SelectedPacket for p in ctx.packets)
    assert [p.rank for p in ctx.packets] == list(range(1, len(ctx.packets) + 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.packets[0].score = 1.0  # type: ignore[misc]
    state = query_graph.invoke({"query": QUESTION}, context=mem.context("demo"))
    assert json.dumps(ctx.to_dict()["packets"]) == json.dumps(state["packets"])  # byte for byte, key order too
    assert all(list(p) == JSON_KEYS for p in state["packets"])  # nothing here is superseded
    assert ctx.dia_ids == [p.dia_id for p in ctx.packets]


records = st.builds(
    SelectedPacket,
    dia_id=st.text(max_size=8),
    speaker=st.text(max_size=8),
    session=st.integers(0, 10**6),
    time=st.text(max_size=12),
    score=st.floats(allow_nan=False),
    packet_id=st.text(max_size=20),
    rank=st.integers(1, 12),
    source=st.sampled_from(["anchor", "frontier"]),
    shown=st.booleans(),
    superseded_by=st.none() | st.text(max_size=8),
)


@given(records)
def test_the_dict_form_reads_back_whole_and_names_a_mark_only_when_set(p):
    d = p.to_dict()
    assert SelectedPacket.from_dict(d) == p
    assert list(d) == JSON_KEYS + (["superseded_by"] if p.superseded_by is not None else [])
    assert json.loads(json.dumps(d)) == d
