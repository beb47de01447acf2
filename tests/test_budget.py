"""Context budget in tokens (evidence/budget.py): whole packets when they fit, long packets cut to their best lines."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_eval_data import LOCOMO_MINI

from memcompile_langgraph import MemCompile
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.eval.locomo import load_locomo
from memcompile_langgraph.evidence.budget import Block, fit_blocks, shares, validate_max_tokens
from memcompile_langgraph.evidence.render import render_context
from memcompile_langgraph.text.terms import count_tokens

LONG = Block(
    "[D1:1] Assistant | 2024-03-15 | session 1",
    tuple(f"- Step {i}: configure module {i} with its blueprint and tests." for i in range(40))
    + ("- The PostgreSQL pool should hold 20 connections for the dashboard API.",),
)
SHORT = Block("[D1:0] User | 2024-03-15 | session 1", ("- User is building a budget tracker with Flask.",))


def test_contexts_that_fit_are_unchanged():
    whole = [LONG.text(), SHORT.text()]
    assert fit_blocks([LONG, SHORT], "pool connections", None, count_tokens) == whole
    assert fit_blocks([LONG, SHORT], "pool connections", 10_000, count_tokens) == whole


def test_a_long_packet_keeps_header_and_best_lines_with_a_marker_and_short_ones_stay_whole():
    out = fit_blocks([LONG, SHORT], "How many connections should the PostgreSQL pool hold?", 120, count_tokens)
    assert out[1] == SHORT.text()
    lines = out[0].split("\n")
    assert lines[0] == LONG.header
    assert "- The PostgreSQL pool should hold 20 connections for the dashboard API." in lines
    assert lines[-1].startswith("- [... ") and lines[-1].endswith("of 41 lines cut to fit the token budget]")
    kept = lines[1:-1]
    assert kept == [x for x in LONG.lines if x in kept]  # the packet's own order
    assert sum(count_tokens(t) for t in out) <= 120


def test_a_one_line_packet_is_cut_to_sentences():
    raw = Block(
        "[D1:1] Assistant | 2024-03-15 | session 1",
        ("- " + " ".join(f"Sentence {i} is about topic {i}." for i in range(60)) + " The pool holds 20 connections.",),
    )
    out = fit_blocks([raw], "pool connections", 40, count_tokens)[0].split("\n")
    assert out[1].startswith("- ") and "The pool holds 20 connections." in out[1]
    assert out[2].endswith("sentences cut to fit the token budget]")


def test_water_filling_shares():
    assert shares([10, 10, 10], 100) == [None, None, None]
    assert shares([10, 500, 600], 300) == [None, 145, 145]
    assert shares([200, 200], 100) == [50, 50]


line = st.text(alphabet="abc xyz.?!0123", min_size=1, max_size=40).map(lambda s: "- " + s)
blocks = st.lists(
    st.builds(Block, st.just("[D1:1] A | t | session 1"), st.lists(line, min_size=1, max_size=12).map(tuple)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(bs=blocks, budget=st.integers(1, 400), query=st.text(max_size=30))
def test_any_budget_keeps_every_header_and_small_blocks_whole(bs, budget, query):
    out = fit_blocks(bs, query, budget, count_tokens)
    assert len(out) == len(bs)
    whole = [b.text() for b in bs]
    fair = budget // len(bs)
    for b, o, w in zip(bs, out, whole):
        assert o.split("\n")[0] == b.header
        if count_tokens(w) <= fair:
            assert o == w  # a block within its fair share is never cut
    if sum(count_tokens(w) for w in whole) <= budget:
        assert out == whole


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "100"])
def test_bad_budgets_are_value_errors(bad):
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        validate_max_tokens(bad)


def test_locomo_contexts_do_not_change_at_the_default_budget(tmp_path):
    assert MemCompileConfig().context_max_tokens == 2000
    bench = load_locomo(LOCOMO_MINI)
    mem = MemCompile(tmp_path, dense=False)
    try:
        for d in bench.dialogues:
            mem.add_turns(d.turns, user_id=d.user_id)
            index = mem.index(d.user_id)
            for q in d.questions:
                ctx = mem.compile(q.question, user_id=d.user_id)
                pids = [p["packet_id"] for p in ctx.packets]
                assert ctx.text == render_context(index, pids)  # no budget at all
                small = mem.compile(q.question, user_id=d.user_id, max_tokens=30)
                assert [p["dia_id"] for p in small.packets] == ctx.dia_ids  # a budget never drops a packet
        with pytest.raises(ValueError, match="max_tokens"):
            mem.compile("Where does Priya work?", user_id="mini-1", max_tokens=0)
    finally:
        mem.close()
