"""The tolerant ranking comparison the tests use where two reads of one memory may differ in the last bits."""

import pytest
from support.ranking import assert_same_context, assert_same_ranking

A = [("D1:1", 3.0), ("D1:2", 2.00001), ("D1:3", 2.0), ("D1:4", 1.0)]


def test_near_equal_scores_may_swap_and_be_cut_off():
    assert_same_ranking(A, [("D1:1", 3.0), ("D1:3", 2.0), ("D1:2", 2.00001), ("D1:4", 1.0)])
    assert_same_ranking(A[:2], [("D1:1", 3.0), ("D1:3", 2.0)])  # a near-tie at the cut-off


@pytest.mark.parametrize(
    "b",
    [
        [("D1:2", 2.00001), ("D1:1", 3.0), ("D1:3", 2.0), ("D1:4", 1.0)],  # scores a full point apart swapped
        [("D1:1", 3.01), ("D1:2", 2.00001), ("D1:3", 2.0), ("D1:4", 1.0)],  # a score moved
        [("D1:1", 3.0), ("D1:2", 2.00001), ("D1:3", 2.0), ("D1:9", 0.5)],  # another packet at the cut-off, not a tie
    ],
)
def test_real_differences_fail(b):
    with pytest.raises(AssertionError):
        assert_same_ranking(A, b)


def test_the_text_must_match_when_the_order_does():
    packets = [{"dia_id": d, "score": s} for d, s in A]
    assert_same_context(packets, "x", packets[:1] + packets[2:0:-1] + packets[3:], "y")  # order differs: text free
    with pytest.raises(AssertionError):
        assert_same_context(packets, "x", packets, "y")
