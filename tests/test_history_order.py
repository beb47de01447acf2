"""A question about the whole history reads its packets in the order they were said; the budget still spends by rank."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.evidence.budget import Fitted

# The user's garden over four sessions; the last session names the question's words most often, so it ranks first.
TURNS = [
    ("1 March 2024", "User", "I started planning a vegetable garden behind the house."),
    ("1 March 2024", "Assistant", "Start with a sketch of the beds and where the sun falls."),
    ("9 March 2024", "User", "For the garden I built two raised beds from cedar boards."),
    ("9 March 2024", "Assistant", "Cedar lasts; line the beds with cardboard first."),
    ("20 March 2024", "User", "I ordered tomato and basil seeds for the garden beds."),
    ("20 March 2024", "Assistant", "Sow the basil indoors until the nights are warm."),
    ("2 April 2024", "User", "My garden progress: the garden beds are planted and the garden watering is set up."),
    ("2 April 2024", "Assistant", "Water in the morning so the leaves dry by night."),
]
HISTORY = "In what order did I bring up the parts of my garden throughout our conversations?"
PLAIN = "What did I do for my garden beds?"


def remember(config: MemCompileConfig | None = None, backfill: bool = False) -> MemCompile:
    """The garden chat; with backfill, its last two sessions were stored first and the older two imported after."""
    mem = MemCompile(None, config=config, dense=False)
    sessions = {t: i for i, t in enumerate(dict.fromkeys(t for t, _, _ in TURNS), 1)}
    turns = [{"speaker": s, "text": x, "time": t, "session": sessions[t]} for t, s, x in TURNS]
    for part in (turns[4:], turns[:4]) if backfill else (turns,):
        mem.add_turns(part, user_id="u")
    return mem


def shown_ids(text: str) -> list[str]:
    return re.findall(r"^\[(D\d+:\d+)\]", text, re.M)


def said_order(ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda d: tuple(int(x) for x in d[1:].split(":")))


@pytest.fixture(scope="module")
def mem():
    m = remember()
    yield m
    m.close()


def test_a_history_question_shows_its_packets_as_they_were_said(mem):
    got = mem.compile(HISTORY, user_id="u")
    ranked = [p["dia_id"] for p in got.to_dict()["packets"]]
    assert ranked != said_order(ranked)  # the schedule's order is not the dialogue's: the test can tell them apart
    assert shown_ids(got.text) == said_order(ranked)
    assert [p["rank"] for p in got.to_dict()["packets"]] == list(range(1, len(ranked) + 1))  # ranks stay


def test_a_history_imported_after_its_later_sessions_is_shown_as_it_was_said():
    m = remember(backfill=True)
    try:
        got = m.compile(HISTORY, user_id="u")
    finally:
        m.close()
    shown = shown_ids(got.text)
    assert {d[:2] for d in shown} & {"D1", "D2"} and {d[:2] for d in shown} & {"D3", "D4"}  # old and new sessions
    assert shown == said_order(shown)


def test_another_question_keeps_the_schedule_order(mem):
    got = mem.compile(PLAIN, user_id="u")
    assert shown_ids(got.text) == [p["dia_id"] for p in got.to_dict()["packets"]]


def test_the_paper_profile_keeps_the_schedule_order():
    m = remember(MemCompileConfig().with_overrides(history_in_time_order=False))
    try:
        got = m.compile(HISTORY, user_id="u")
    finally:
        m.close()
    assert shown_ids(got.text) == [p["dia_id"] for p in got.to_dict()["packets"]]


def test_a_budget_keeps_the_same_lines_in_either_order(mem):
    """Time order changes where a block stands, not what the budget kept of it."""
    m = remember(MemCompileConfig().with_overrides(history_in_time_order=False))
    try:
        for budget in (90, 120, 150):
            timed = mem.compile(HISTORY, user_id="u", max_tokens=budget)
            ranked = m.compile(HISTORY, user_id="u", max_tokens=budget)
            assert sorted(timed.text.split("\n\n")) == sorted(ranked.text.split("\n\n"))
            assert timed.text.split("\n\n")[-1] == ranked.text.split("\n\n")[-1]  # the cut marker stays last
            assert shown_ids(timed.text) == said_order(shown_ids(ranked.text))
    finally:
        m.close()


@given(st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=8)), max_size=8), st.data())
def test_any_order_of_the_blocks_shows_the_same_blocks(blocks, data):
    fitted = Fitted(tuple(blocks), (False,) * len(blocks), "[marker]")
    order = data.draw(st.permutations(range(len(blocks))))
    text = fitted.in_order(order).text()
    assert text == "\n\n".join([*(blocks[i] for i in order if blocks[i] is not None), "[marker]"])


@given(st.integers(0, 6), st.lists(st.integers(-2, 8), max_size=8))
def test_what_is_not_an_order_of_the_blocks_is_refused_in_one_line(n, order):
    fitted = Fitted(("x",) * n, (False,) * n)
    if sorted(order) == list(range(n)):
        assert fitted.in_order(order).order == tuple(order)
    else:
        with pytest.raises(ValueError, match="not an order of") as e:
            fitted.in_order(order)
        assert "\n" not in str(e.value)
