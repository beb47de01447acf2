"""Family 5: no silent loss by deduplication. A turn without a dia_id is identified by its place (its session as
given, and which of the equal turns of that session it is in the call): a re-sent file is a no-op, two equal
replies are two turns; a speaker cut to the stored length is counted and does not change identity."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.add_turns import INGEST_BATCH
from memcompile_langgraph.ingest.build import MAX_SPEAKER

from .strategies import examples

_users = itertools.count()


# few distinct values, so equal turns (the case deduplication used to merge) are frequent
plain_turn = st.fixed_dictionaries(
    {"speaker": st.sampled_from(["Tom", "Ann"]), "text": st.sampled_from(["Yes", "No", "Yes!", "ok then"])},
    optional={
        "session": st.sampled_from([1, 2, "morning call"]),
        "time": st.sampled_from(["2024-03-01T10:00", "2024-03-02T10:00"]),
    },
)


@examples(25)
@given(turns=st.lists(plain_turn, min_size=1, max_size=30))
def test_every_turn_kept_and_a_resend_is_a_no_op(make_mem, turns):
    mem = make_mem(dense=False)
    user = f"i{next(_users)}"
    first = mem.add_turns(turns, user_id=user)
    assert first["stored"] == len(turns), first  # equal replies are separate turns
    again = mem.add_turns(turns, user_id=user)
    assert again["stored"] == 0 and again["already_stored"] == len(turns), again
    assert len(mem.index(user).packets) == len(turns)


def test_equal_replies_across_ingest_batches(make_mem):
    """Positions count across the whole call: a reply in the second batch is not taken for one in the first."""
    mem = make_mem(dense=False)
    turns = [{"speaker": "Tom", "text": "Yes"}] * (INGEST_BATCH + 44)
    user = f"i{next(_users)}"
    assert mem.add_turns(turns, user_id=user)["stored"] == len(turns)
    assert mem.add_turns(turns, user_id=user)["already_stored"] == len(turns)


def test_a_later_call_appends(make_mem):
    """New turns sent later (an appended file) are stored; the ones sent before stay known."""
    mem = make_mem(dense=False)
    user = f"i{next(_users)}"
    day1 = [{"speaker": "Tom", "text": "Did you call?"}, {"speaker": "Ann", "text": "Yes"}]
    day2 = day1 + [{"speaker": "Tom", "text": "And the dentist?"}, {"speaker": "Ann", "text": "Yes"}]
    assert mem.add_turns(day1, user_id=user)["stored"] == 2
    counts = mem.add_turns(day2, user_id=user)
    assert counts["stored"] == 2 and counts["already_stored"] == 2


@examples(15)
@given(
    prefix=st.builds(lambda c, s: c * MAX_SPEAKER + s, st.characters(), st.text(max_size=5)),
    tails=st.lists(st.text(min_size=1, max_size=5), min_size=2, max_size=4, unique=True),
)
def test_speaker_cut_is_counted_and_keeps_identity(make_mem, prefix, tails):
    """Speakers equal in their first 200 characters stay different turns, and each cut is counted."""
    mem = make_mem(dense=False)
    from memcompile_langgraph.text.terms import clean_text

    speakers = list(dict.fromkeys(clean_text(prefix + "x" + t) for t in tails))
    turns = [{"speaker": s, "text": "I said the same thing", "dia_id": f"D1:{i}"} for i, s in enumerate(speakers)]
    user = f"i{next(_users)}"
    counts = mem.add_turns(turns, user_id=user)
    long_ones = sum(len(s) > MAX_SPEAKER for s in speakers)
    stored = counts["stored"]
    assert stored + sum(v for k, v in counts.items() if k.startswith("skipped_")) == len(turns)
    assert counts.get("trimmed_speaker", 0) == min(long_ones, stored)
    assert mem.add_turns(turns, user_id=user)["stored"] == 0  # a re-send is still known
    assert all(len(p.speaker) <= MAX_SPEAKER for p in mem.index(user).packets.values())


@examples(25)
@given(turns=st.lists(plain_turn, min_size=1, max_size=20), extra=plain_turn, at=st.integers(0, 20))
def test_a_resend_with_an_inserted_turn_stores_only_that_turn(make_mem, turns, extra, at):
    mem = make_mem(dense=False)
    user = f"i{next(_users)}"
    mem.add_turns(turns, user_id=user)
    edited = turns[:at] + [{**extra, "text": "a turn inserted later"}] + turns[at:]
    counts = mem.add_turns(edited, user_id=user)
    assert counts["stored"] == 1 and counts["already_stored"] == len(turns), counts


def test_one_turn_sent_again_alone_is_known(make_mem):
    mem = make_mem(dense=False)
    user = f"i{next(_users)}"
    turns = [{"speaker": "Tom", "text": "Yes", "time": "2024-03-01T10:00"}, {"speaker": "Ann", "text": "Great"}]
    mem.add_turns(turns, user_id=user)
    assert mem.add_turns([turns[1]], user_id=user)["already_stored"] == 1


def test_speaker_cut_without_dia_id(make_mem):
    mem = make_mem(dense=False)
    speakers = ["N" * MAX_SPEAKER + "-one", "N" * MAX_SPEAKER + "-two"]
    turns = [{"speaker": s, "text": "Yes", "session": 1} for s in speakers]
    user = f"i{next(_users)}"
    counts = mem.add_turns(turns, user_id=user)
    assert counts["stored"] == 2 and counts["trimmed_speaker"] == 2
