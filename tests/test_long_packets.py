"""Signals for long user-assistant chats: passage-level lexical score, pronoun-addressed speakers, update marks."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.address.intent import addressed_speakers
from memcompile_langgraph.evidence.fusion import best_claim_scores
from memcompile_langgraph.evidence.render import superseded_note
from memcompile_langgraph.evidence.updates import (
    quantities,
    restated,
    statement,
    supersessions,
    values,
)
from memcompile_langgraph.model import SourcePacket


def packet(pid, speaker, seq, text, time="2024-03-15T00:00:00"):
    return SourcePacket(pid, "u", f"D1:{seq}", speaker, 1, "batch 1", time, "", text, seq, content_hash=pid)


def test_best_claim_scores_take_each_packets_best_claim():
    out = best_claim_scores(np.array([0.5, 2.0, 0.1, 0.0]), np.array([0, 0, 2, 2]), 3)
    assert out.tolist() == [2.0, 0.0, 0.1]
    assert best_claim_scores(np.zeros(0), np.zeros(0, dtype=np.int64), 2).tolist() == [0.0, 0.0]


@given(st.lists(st.tuples(st.floats(0, 50), st.integers(0, 5)), max_size=30))
def test_best_claim_scores_never_exceed_the_best_claim(pairs):
    scores = np.array([s for s, _ in pairs]) if pairs else np.zeros(0)
    owners = np.array([p for _, p in pairs], dtype=np.int64) if pairs else np.zeros(0, dtype=np.int64)
    out = best_claim_scores(scores, owners, 6)
    for p in range(6):
        mine = scores[owners == p] if pairs else np.zeros(0)
        assert out[p] == (mine.max() if len(mine) else 0.0)


def test_pronouns_point_at_the_asker_and_the_assistant():
    assert addressed_speakers("When does my first sprint end?", "User", "Assistant") == ("User",)
    assert addressed_speakers("How did you recommend caching?", "User", "Assistant") == ("Assistant",)
    assert addressed_speakers("What did you tell me about I/O?", "User", "Assistant") == ("User", "Assistant")
    assert addressed_speakers("When did Caroline go to the support group?", "User", "Assistant") == ()
    assert addressed_speakers("Is this mine?", "User", "Assistant") == ("User",)
    # a request to the assistant is not a question about what it said
    assert addressed_speakers("Can you list the order in which I brought it up?", "User", "Assistant") == ("User",)
    assert addressed_speakers("Do you remember what my goal was?", "User", "Assistant") == ("User",)
    assert addressed_speakers("Could you remind me what you suggested?", "User", "Assistant") == ("User", "Assistant")


def flat_idf(term):
    return 0.6


def test_a_restated_value_is_found_and_unrelated_or_unchanged_statements_are_not():
    q = frozenset({"dashboard", "api", "cat"})
    old, new = (
        statement(s, q)
        for s in (
            "The dashboard API responds in 400ms on average.",
            "The dashboard API now responds in 250ms on average.",
        )
    )
    assert restated(old, new, q, flat_idf) == (frozenset({"400"}), frozenset({"250"}))
    assert restated(old, old, q, flat_idf) is None  # same value: nothing changed
    assert restated(old, statement("My cat weighs 4kg.", q), q, flat_idf) is None  # another topic
    assert statement("The dashboard API is fast.", q) is None  # no value stated
    assert statement("My cat eats 2 cans a day.", frozenset({"api"})) is None  # not what the question is about
    assert restated(old, new, q, lambda t: 0.1) is None  # shared terms too common to name one fact
    assert values("It went from 1,200 calls to 4:30 pm and 78% in v1.0.0") == {"1200", "4:30", "78"}  # v: a label
    # a number right after a word names which one ("sprint 2"), it is no value of it; a month's day is one
    assert quantities("Sprint 2 is due on April 20 and has 12 tasks") == {"april": {"20"}, "task": {"12"}}
    assert statement("Steps 1, 2, 3 and 4 of the 5 steps.", frozenset({"step"})) is None  # a list, not one value


def test_supersessions_mark_the_older_packet_of_the_same_speaker_with_both_dates():
    ps = [
        packet("a", "User", 2, "The dashboard API responds in 400ms on average."),
        packet("b", "Assistant", 3, "The dashboard API should respond in 100ms on average."),
        packet("c", "User", 8, "The dashboard API now responds in 250ms on average.", "2024-04-05T00:00:00"),
    ]
    claims = {p.packet_id: [p.text] for p in ps}
    found = supersessions(list(reversed(ps)), claims.__getitem__, "What is the dashboard API response time?", flat_idf)
    assert set(found) == {"a"} and found["a"].new == "c"  # the assistant's turn is another speaker's statement
    note = superseded_note(found["a"], ps[0], ps[2])
    assert note == "- [superseded on 2024-04-05 by [D1:8]: 250 replaces 400 stated here on 2024-03-15]"


def test_history_questions_are_recognised_and_others_are_not():
    from memcompile_langgraph.evidence.spread import spans_history

    assert spans_history("Can you list the order in which I brought up different aspects of my project?")
    assert spans_history("How did my goals evolve throughout our conversations?")
    assert spans_history("How many columns did I want to add across my requests?")
    assert not spans_history("What did Jon say about Gina's progress with her store?")
    assert not spans_history("What did Audrey stumble across during a hike?")
    assert not spans_history("Why did she move in order to study?")


def test_session_round_robin_takes_one_per_session_per_round():
    from memcompile_langgraph.evidence.spread import session_round_robin

    ranked = ["a1", "a2", "a3", "b1", "c1", "b2", "x"]
    sessions = [1, 1, 1, 2, 3, 2]
    assert session_round_robin(ranked, sessions, 5, 6) == ["a1", "b1", "c1", "a2", "b2"]
    assert session_round_robin(ranked, sessions[:2], 4, 2) == ["a1", "a2", "a3", "b1"]  # beyond the depth: score order
    assert session_round_robin(ranked, sessions, 20, 6) == ["a1", "b1", "c1", "a2", "b2", "a3", "x"]


def test_a_date_or_a_time_is_one_value_so_dated_statements_are_not_lists():
    from memcompile_langgraph.evidence.updates import value_count

    assert value_count("I secured 3 interviews between April 25 and May 1, 2024.") == 3
    assert value_count("The call moved to April 22 at 11 AM, then to 4:30 pm on the 3rd of May 2024.") == 4
    assert value_count("Steps 1, 2, 3 and 4.") == 4
    q = frozenset({"interview", "secur"})
    old = statement("I only secured 3 interviews for producer roles between April 25 and May 1, 2024.", q)
    new = statement("I secured 5 interviews for producer roles between April 25 and May 1, 2024.", q)
    assert restated(old, new, q, flat_idf) == (frozenset({"3"}), frozenset({"5"}))


def test_only_values_of_what_the_question_names_or_dates_times_and_shares_count():
    q = frozenset({"card", "galleri"})
    old = statement("My gallery shows 8 cards; project 1 uses step 2.", q)
    assert set(old.quantities) == {"card"}  # "project 1", "step 2": numbering the question does not ask about
    changed = statement("My gallery shows 8 cards; project 3 uses step 4.", q)
    assert restated(old, changed, q, flat_idf) is None  # the cards did not change
    assert restated(old, statement("My gallery now shows 10 cards.", q), q, flat_idf) == (
        frozenset({"8"}),
        frozenset({"10"}),
    )
    dated = statement("The gallery deadline is April 1, 2024.", q)
    assert set(dated.quantities) == {"april"}  # a date counts though the question does not name the month
    assert set(statement("Gallery coverage is 65%.", q).quantities) == {"%"}


@given(st.text(max_size=200), st.text(max_size=60))
def test_any_claim_and_question_give_a_statement_or_none(claim, query):
    from memcompile_langgraph.evidence.updates import UPDATE_MAX_VALUES, topic_terms, value_count

    s = statement(claim, topic_terms(query))
    assert s is None or (s.quantities and value_count(claim) <= UPDATE_MAX_VALUES)
    assert s is None or any(c.isdigit() for c in claim)  # every value is a number
    assert value_count(claim) >= 0


def test_a_history_question_addressing_one_speaker_spreads_over_that_speakers_turns_first():
    from memcompile_langgraph.evidence.spread import speaker_first

    ranked, speakers = ["a1", "u1", "a2", "u2"], ["Assistant", "User", "Assistant", "User"]
    assert speaker_first(ranked, speakers, ("User",)) == ["u1", "u2", "a1", "a2"]
    assert speaker_first(ranked, speakers, ("User", "Assistant")) == ranked
    assert speaker_first(ranked, speakers, ()) == ranked


def test_one_changed_value_belongs_to_the_claims_question_topics():
    q = frozenset({"commit", "merg"})
    old = statement("I pushed release v1.0.0 on April 20 with 150 commits and 12 branches merged.", q)
    new = statement("The commits merged into the main branch have now reached 165.", q)
    assert restated(old, new, q, flat_idf) == (frozenset({"150"}), frozenset({"165"}))
    unchanged = statement("The commits merged into the main branch are 165.", q)  # no change word: no attribute
    assert unchanged is None


def test_the_assistants_examples_are_never_marked_superseded(tmp_path):
    from memcompile_langgraph import MemCompile
    from memcompile_langgraph.evidence.render import update_marks

    mem = MemCompile(tmp_path / "m", embeddings=None)
    turns = [
        {"speaker": "User", "text": "My weekly writing target is 1,200 words for the novel draft.", "session": 1},
        {"speaker": "Assistant", "text": "For example, aim for 300 words per day on the novel draft.", "session": 1},
        {"speaker": "Assistant", "text": "Now aim for 500 words per day on the novel draft instead.", "session": 2},
        {"speaker": "User", "text": "My weekly writing target for the novel draft is now 1,500 words.", "session": 2},
    ]
    other = ["hiking trip to the lake", "new espresso machine", "sister's wedding plans", "garden tomatoes"]
    fillers = [{"speaker": "User", "text": f"Let me tell you about my {x}.", "session": 1} for x in other * 2]
    mem.add_turns(fillers + turns, user_id="u")
    index = mem.index("u")
    marks = update_marks(
        index, list(index.packet_order), "How many words is my weekly writing target for the novel draft?"
    )
    assert [index.packets[p].speaker for p in marks] == ["User"]
    mem.close()


def test_the_thing_a_question_counts_is_one_subject_even_when_its_terms_are_common():
    from memcompile_langgraph.evidence.updates import counted

    question = "How many project cards are in my gallery?"
    assert counted(question) == {"card"} and counted("How many new columns did I add?") == {"column"}
    assert counted("How many days passed between the two?") == {"pass"} and counted("What did I add?") == frozenset()
    q = frozenset({"project", "card", "galleri"})
    old = statement("User is building the project gallery with 8 cards and modal popups.", q)
    new = statement("User has added two new projects, so now User has a total of 10 cards.", q)
    common = lambda t: 0.3  # noqa: E731  (the question's own topic runs through the whole chat)
    assert restated(old, new, q, common, counted(question)) == (frozenset({"8"}), frozenset({"10"}))
    assert restated(old, new, q, common) is None  # counted nothing: the shared terms are too common
    unchanged = statement("User has a total of 10 cards for the project gallery.", q)  # no change word
    assert restated(old, unchanged, q, common, counted(question)) is None


@pytest.mark.parametrize(
    "setting",
    [{"spread_depth": 60}, {"pool_reader": None}],  # set by hand beside the reader; or the fused order's own depth
    ids=["set", "fused-order"],
)
def test_a_history_question_spreads_over_one_frontier_slot_and_the_selection_stays_k0_plus_k_delta(
    tmp_path, embeddings, setting
):
    from memcompile_langgraph import MemCompile, MemCompileConfig

    cfg = MemCompileConfig(k0=3, frontier_append_cap=2, spread_frontier_slots=1, **setting)
    mem = MemCompile(tmp_path / "m", embeddings=embeddings, config=cfg)
    assert mem.config.spread_depth == 60
    topics = ["budget tracker", "expense categories", "savings goal", "monthly report", "bank import"]
    turns = [
        {"speaker": "User", "text": f"Today I worked on the {t} of my budget app, part {n}.", "session": s + 1}
        for s, t in enumerate(topics)
        for n in range(3)
    ]
    mem.add_turns(turns, user_id="u")
    history = mem.compile("In what order did I bring up the parts of my budget app?", user_id="u", max_tokens=None)
    anchors = [p for p in history.packets if p.source == "anchor"]
    assert len(anchors) == 4 and len({p.session for p in anchors}) == 4  # K0 + 1, one per session
    assert len(history.packets) <= 5  # never more than K0 + K_Delta
    plain = mem.compile("What did I do on the savings goal of my budget app?", user_id="u", max_tokens=None)
    assert len([p for p in plain.packets if p.source == "anchor"]) == 3 and len(plain.packets) <= 5
    mem.close()


def test_a_model_is_offered_every_pair_the_heuristic_marks():
    from memcompile_langgraph.evidence.updates import candidates

    ps = [
        packet("a", "User", 2, "User is building the project gallery with 8 cards and modal popups."),
        packet("b", "Assistant", 3, "The project gallery could hold 12 cards."),
        packet("c", "User", 8, "User has added two new projects, so now User has a total of 10 cards."),
        packet("d", "User", 9, "User likes hiking on weekends."),
    ]
    claims = {p.packet_id: [p.text] for p in ps}
    question = "How many project cards are in my gallery?"
    common = lambda t: 0.3  # noqa: E731
    marked = supersessions(ps, claims.__getitem__, question, common)
    offered = candidates(ps, claims.__getitem__, question, common, 8)
    assert set(marked) == {"a"} and [(c.old, c.new) for c in offered] == [("a", "c")]  # one speaker, one subject
    assert candidates(ps, claims.__getitem__, question, common, 0) == []
