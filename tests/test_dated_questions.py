"""A question naming a time ("on 1 May, 2022", "in April 2022") lifts the turns said within it or telling of it:
time spans of the normalized times (text/timeparse.py) and the date feature of evidence fusion, end to end."""

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile
from memcompile_langgraph.address.intent import enriched_query, offline_intent
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.integrations.base_store import MemCompileStore
from memcompile_langgraph.text.timeparse import normalize_event_time, spans_overlap, time_span

DAYS = st.dates(min_value=date(1990, 1, 1), max_value=date(2090, 12, 31))


@given(DAYS)
def test_a_day_lies_in_its_week_month_year_and_season(day):
    one = time_span(day.isoformat())
    assert one == (day, day)
    for value in (
        f"week of {(day - timedelta(days=day.weekday())).isoformat()}",
        f"{day.year:04d}-{day.month:02d}",
        f"{day.year:04d}",
    ):
        span = time_span(value)
        assert span is not None and span[0] <= day <= span[1] and spans_overlap(one, span)
    season_year = day.year - 1 if day.month <= 2 else day.year
    season = {12: "winter", 1: "winter", 2: "winter"}.get(day.month) or ("spring", "summer", "fall")[
        (day.month - 3) // 3
    ]
    span = time_span(f"{season_year}-{season}")
    assert span is not None and span[0] <= day <= span[1]
    assert not spans_overlap(one, (day + timedelta(days=1), day + timedelta(days=40)))


@given(st.text(max_size=30))
def test_time_span_takes_any_text(value):
    span = time_span(value)
    assert span is None or span[0] <= span[1]


@given(DAYS, st.sampled_from(["yesterday", "last week", "last month", "two days ago", "last weekend"]))
def test_a_relative_time_resolves_to_a_span_before_the_anchor(anchor, phrase):
    value = normalize_event_time(f"I went there {phrase}.", f"{anchor.isoformat()}T10:00:00")
    span = time_span(value)
    assert span is not None and span[0] < anchor


@pytest.mark.parametrize("value", ["", "soon", "2023-13", "week of 2023-02-30", "2022-monsoon"])
def test_unreadable_values_have_no_span(value):
    assert time_span(value) is None


def film_memory(path, date_weight):
    """Twenty sessions nine days apart, each telling of yesterday's film in the same words. No pool reader: the
    fusion's date weight alone decides (the reader reads the date signal with a weight of its own)."""
    mem = MemCompile(path, dense=False, config=MemCompileConfig(fusion_date=date_weight, pool_reader=None))
    turns = []
    for n in range(20):
        day = FIRST + timedelta(days=9 * n)
        when = f"10:00 am on {day.day} {day:%B}, {day.year}"
        turns += [
            {
                "speaker": "Joanna",
                "text": f"I watched a movie yesterday, film number {n}!",
                "time": when,
                "session": n + 1,
            },
            {"speaker": "Nate", "text": "Nice, did you like the ending?", "time": when, "session": n + 1},
        ]
    mem.add_turns(turns, user_id="u")
    return mem


FIRST = date(2022, 3, 1)


@pytest.mark.parametrize("weight, found", [(1.0, True), (0.0, False)])
def test_the_turn_about_the_named_day_is_selected(tmp_path, weight, found):
    watched = FIRST + timedelta(days=9 * 10 - 1)  # the day before session 11
    question = f"What movie did Joanna watch on {watched.day} {watched:%B}, {watched.year}?"
    mem = film_memory(tmp_path / "m", weight)
    try:
        texts = [item.value["text"] for item in MemCompileStore(mem).search(("u",), query=question)]
    finally:
        mem.close()
    assert len(texts) < 40  # a selection, not every turn
    assert any(t.endswith("film number 10!") for t in texts) is found


def test_turns_added_after_a_dated_question_are_found_by_the_next(tmp_path):
    """The spans of packets are read once per packet: the ones a later write adds are read by the next question."""
    mem = film_memory(tmp_path / "m", 1.0)
    try:
        store = MemCompileStore(mem)
        day = FIRST + timedelta(days=9 * 10 - 1)
        store.search(("u",), query=f"What movie did Joanna watch on {day.day} {day:%B}, {day.year}?")
        later = FIRST + timedelta(days=400)
        when = f"10:00 am on {later.day} {later:%B}, {later.year}"
        mem.add_turns(
            [{"speaker": "Joanna", "text": "I watched a movie yesterday, film number 99!", "time": when}], "u"
        )
        day = later - timedelta(days=1)
        question = f"What movie did Joanna watch on {day.day} {day:%B}, {day.year}?"
        texts = [item.value["text"] for item in store.search(("u",), query=question)]
    finally:
        mem.close()
    assert any(t.endswith("film number 99!") for t in texts)


def test_a_month_named_without_a_year_marks_that_month_of_every_year(tmp_path):
    """A question "in June" (question_time "--06") lifts the turns said in June of any year, or telling of a day in one."""
    mem = MemCompile(tmp_path / "m", dense=False)
    said = [date(2022, 6, 10), date(2022, 9, 3), date(2023, 6, 20), date(2023, 7, 2), date(2023, 8, 30)]
    texts = ["I baked bread.", "I baked a pie.", "I baked buns.", "I baked a cake yesterday.", "I baked rolls."]
    texts[3] = "I baked a cake on June 28."  # said in July, about a June day
    try:
        mem.add_turns(
            [
                {"speaker": "Joanna", "text": text, "time": f"10:00 am on {d.day} {d:%B}, {d.year}", "session": n + 1}
                for n, (d, text) in enumerate(zip(said, texts))
            ],
            user_id="u",
        )
        index = mem.index("u")
        marked = index.dated_array("--06").tolist()
        assert index.dated_array("--12").tolist() == [0.0] * 5
        assert index.dated_array("2023-06").tolist() == [0.0, 0.0, 1.0, 1.0, 0.0]
    finally:
        mem.close()
    assert marked == [1.0, 0.0, 1.0, 1.0, 0.0]


def test_a_year_less_time_is_the_intent_time_but_not_part_of_the_enriched_query():
    yearless = offline_intent("When did Melanie go camping in June?", ["Melanie"])
    dated = offline_intent("What did Nate do in April 2022?", ["Nate"])
    assert (yearless.time, dated.time) == ("--06", "2022-04")
    assert "--06" not in enriched_query(yearless)  # "June" is in the question already
    assert enriched_query(dated).endswith("2022-04")
