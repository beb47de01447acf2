import pytest

from memcompile_langgraph.text.timeparse import normalize_event_time, parse_session_time

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
