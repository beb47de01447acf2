"""A header shows the time as it was given: a date alone stays a date, a time of day (midnight too) is shown."""

import pytest

from memcompile_langgraph import MemCompile


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("4 March 2024", "2024-03-04 |"),
        ("March 4, 2024", "2024-03-04 |"),
        ("2024-03-04", "2024-03-04 |"),
        ("2024/03/04", "2024-03-04 |"),
        ("2024-03-04T00:00", "2024-03-04 00:00 |"),
        ("12:00 am on 4 March, 2024", "2024-03-04 00:00 |"),
        ("1:56 pm on 8 May, 2023", "2023-05-08 13:56 |"),
        ("2023/05/20 (Sat) 02:21", "2023-05-20 02:21 |"),
    ],
)
def test_a_date_given_alone_is_shown_alone(raw, shown):
    mem = MemCompile(None, dense=False)
    try:
        mem.add_turns([{"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": raw}], user_id="u")
        header = mem.compile("What is the beagle called?", user_id="u").text.splitlines()[0]
    finally:
        mem.close()
    assert header == f"[D1:1] Tom | {shown} session 1"
