from datetime import date

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memcompile_langgraph.text.timeparse import (
    normalize_event_time,
    parse_session_time,
    question_time,
    time_span,
    year_spans,
)

MONDAY = "2023-05-08T13:56:00"  # a Monday
SUNDAY = "2023-05-07T10:00:00"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00"),
        ("10:37 am on 27 June, 2023", "2023-06-27T10:37:00"),
        ("12:05 am on 1 January, 2023", "2023-01-01T00:05:00"),
        ("12:30 pm on 3 July, 2023", "2023-07-03T12:30:00"),
        ("2023-05-08", "2023-05-08T00:00:00"),
        ("2023-05-08T13:56", "2023-05-08T13:56:00"),
        ("2023-05-08T13:56:00Z", "2023-05-08T13:56:00+00:00"),
        ("2023-05-08T13:56:00+02:00", "2023-05-08T13:56:00+02:00"),
        ("8 May 2023", "2023-05-08T00:00:00"),
        ("May 8, 2023", "2023-05-08T00:00:00"),
        ("2023/05/08", "2023-05-08T00:00:00"),
        ("2023/05/20 (Sat) 02:21", "2023-05-20T02:21:00"),
        ("  1:56 pm on 8 May, 2023 ", "2023-05-08T13:56:00"),
    ],
)
def test_parse_session_time(raw, expected):
    assert parse_session_time(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", "garbage", "31 February 2023", "25:61 pm on 8 May, 2023", None])
def test_parse_session_time_unparseable_is_none(raw):
    assert parse_session_time(raw) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I went to a support group yesterday.", "2023-05-07"),
        ("I'm painting today.", "2023-05-08"),
        ("We have a concert tonight.", "2023-05-08"),
        ("I ran 5k this morning.", "2023-05-08"),
        ("The race is tomorrow.", "2023-05-09"),
        ("Last night was amazing!", "2023-05-07"),
        ("the day before yesterday", "2023-05-06"),
        ("I went hiking last Saturday.", "2023-05-06"),
        ("We went camping last weekend.", "2023-05-06"),
        ("Last Fri I took my kids to a pottery workshop.", "2023-05-05"),
        ("The show is this Friday.", "2023-05-12"),
        ("next Monday", "2023-05-15"),
        ("3 days ago", "2023-05-05"),
        ("two weeks ago", "week of 2023-04-24"),
        ("a week ago", "week of 2023-05-01"),
        ("I moved a few months ago.", "2023-02"),
        ("a couple of years ago", "2021"),
        ("Sweden, four years ago.", "2019"),
        ("two weekends ago", "2023-04-29"),
        ("last week", "week of 2023-05-01"),
        ("this week", "week of 2023-05-08"),
        ("next week", "week of 2023-05-15"),
        ("in two weeks", "week of 2023-05-22"),
        ("last month", "2023-04"),
        ("this month", "2023-05"),
        ("next month", "2023-06"),
        ("last year", "2022"),
        ("this year", "2023"),
        ("next year", "2024"),
        ("I graduated in 2022.", "2022"),
        ("We met in May.", "2023-05"),
        ("We met in May 2022.", "2022-05"),
        ("last May", "2022-05"),
        ("I've painted since 2019.", "2019"),
        ("The wedding was on 3 June 2023.", "2023-06-03"),
        ("on May 8, 2023", "2023-05-08"),
        ("last summer", "2022-summer"),
        ("in the summer of 2021", "2021-summer"),
        ("It happened recently.", ""),
        ("the other day", ""),
        ("I recently went there last Saturday.", "2023-05-06"),
        # an ongoing state dates from its start (perfect tense or "now"), at the unit of its duration
        ("I've had them for 3 years now and they bring me joy.", "2020"),
        ("I've been playing for a month, it's tough but fun.", "2023-04"),
        ("I have known her for about four months.", "2023-01"),
        ("She has lived there for the past 5 years.", "2018"),
        ("I’ve been studying for a week now.", "week of 2023-05-01"),
        ("Been playing it for two days now.", "2023-05-06"),
        ("I went to Paris for two weeks.", ""),  # how long, not since when
        ("I have to go for a few days.", ""),  # "have to" is no perfect tense
        ("on December 1,2023", "2023-12-01"),
        ("I may go to the park.", ""),
        ("Nothing temporal here.", ""),
        ("Yesterday I booked a trip for next month.", "2023-05-07"),  # the first expression wins
    ],
)
def test_normalize_event_time_on_a_monday(text, expected):
    assert normalize_event_time(text, MONDAY) == expected


def test_weekday_arithmetic_on_a_sunday():
    assert normalize_event_time("last Saturday", SUNDAY) == "2023-05-06"
    assert normalize_event_time("last weekend", SUNDAY) == "2023-04-29"
    assert normalize_event_time("this weekend", SUNDAY) == "2023-05-06"
    assert normalize_event_time("next Sunday", SUNDAY) == "2023-05-14"


def test_month_and_season_arithmetic_cross_years():
    assert normalize_event_time("last month", "2023-01-15T09:00:00") == "2022-12"
    assert normalize_event_time("3 months ago", "2023-02-01") == "2022-11"
    assert normalize_event_time("last summer", "2023-10-02") == "2023-summer"
    assert normalize_event_time("next winter", "2023-05-08") == "2023-winter"


def test_relative_expressions_need_an_anchor_absolute_ones_do_not():
    assert normalize_event_time("yesterday", None) == ""
    assert normalize_event_time("last week", "") == ""
    assert normalize_event_time("We met in May 2022.", None) == "2022-05"
    assert normalize_event_time("on 3 June 2023", None) == "2023-06-03"
    assert normalize_event_time("since 2019", None) == "2019"
    # a relative expression without anchor does not hide a later absolute one
    assert normalize_event_time("Yesterday I found photos from May 2022.", None) == "2022-05"


def test_anchor_may_be_a_raw_session_time():
    assert normalize_event_time("yesterday", "1:56 pm on 8 May, 2023") == "2023-05-07"


def test_empty_text():
    assert normalize_event_time("", MONDAY) == ""


@pytest.mark.parametrize(
    "question, expected",
    [
        ("What did Nate do in April 2022?", "2022-04"),  # absolute: as normalize_event_time gives it
        ("When did Melanie go camping in June?", "--06"),  # no year named: year-less
        ("How was John feeling on April 10?", "--04-10"),
        ("What happened on 29 February?", "--02-29"),
        ("Where was the picture shared on December 1,2023 taken?", "2023-12-01"),
        # a part of a month, a range of days: an interval of days, year-less without a year
        ("Which country was Tim visiting in the second week of November?", "--11-08/--11-14"),
        ("Where was Jolene during the last week of August 2023?", "2023-08-25/2023-08-31"),
        ("What happened in the last week of February?", "--02-22/--02-28"),
        ("Was the first half of September 2022 good?", "2022-09-01/2022-09-15"),
        ("Where was John between August 11 and August 15 2023?", "2023-08-11/2023-08-15"),
        ("What did she do from 3 May to 9 May?", "--05-03/--05-09"),
        ("What happened between 9 May and 3 May 2023?", "2023-05-03"),  # no range backwards: the first dated day
        ("What did Nate do last May?", ""),  # relative to the time of asking, which a question does not carry
        ("When did James try Cyberpunk 2077?", ""),
        ("What happened on 31 February?", ""),
        ("Where may I go?", ""),
        ("", ""),
    ],
)
def test_question_time(question, expected):
    assert question_time(question) == expected


def test_a_year_less_time_spans_each_year_it_exists_in():
    assert year_spans("--06", [2022, 2023]) == [
        (date(2022, 6, 1), date(2022, 6, 30)),
        (date(2023, 6, 1), date(2023, 6, 30)),
    ]
    assert year_spans("--02-29", [2023, 2024]) == [(date(2024, 2, 29), date(2024, 2, 29))]
    assert year_spans("2023-06", [2020]) == [(date(2023, 6, 1), date(2023, 6, 30))]  # a year of its own: itself
    assert year_spans("--11-08/--11-14", [2023]) == [(date(2023, 11, 8), date(2023, 11, 14))]
    assert year_spans("2023-08-11/2023-08-15", [2020]) == [(date(2023, 8, 11), date(2023, 8, 15))]
    assert year_spans("2023-08-15/2023-08-11", [2023]) == []  # backwards: no span
    assert year_spans("--13", [2023]) == [] and year_spans("soon", [2023]) == [] and year_spans("", [2023]) == []


# the words time expressions are made of, mixed with arbitrary text: every class of input the scan meets
_PIECES = st.sampled_from(
    "for now have has 've been had known ago in on of since last next this the other day recently week "
    "weekend weeks month months year years a few couple 3 12 999 0 31 29 2023 1,2023 , May may June February "
    "December Friday summer yesterday tomorrow about over just under between and to from first second half".split()
)
_TEXTS = st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=12).map(" ".join)


@given(_TEXTS, st.dates(min_value=date(1990, 1, 1), max_value=date(2090, 12, 31)))
@example("999 years ago", date(1990, 1, 1))  # a year before 1000 was written with three digits
@example("I have had it for 999 years", date(1990, 1, 1))
def test_every_event_time_is_empty_or_a_readable_span(text, anchor):
    value = normalize_event_time(text, f"{anchor.isoformat()}T10:00:00")
    assert value == "" or time_span(value) is not None, value


@given(_TEXTS)
def test_every_question_time_is_empty_or_spans_some_year(text):
    value = question_time(text)
    assert value == "" or year_spans(value, [2000]), value  # 2000 is a leap year: "--02-29" exists in it
