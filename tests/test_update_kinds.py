"""Knowledge updates by the kind of value the question asks for (a date, a duration, money, a share, a size)."""

from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.evidence.updates import answer_values, supersessions, typed_supersessions
from memcompile_langgraph.model import SourcePacket


def packet(pid, speaker, seq, text):
    return SourcePacket(
        pid, "u", f"D1:{seq}", speaker, 1, "batch 1", "2024-03-15T00:00:00", "", text, seq, content_hash=pid
    )


def marks(texts, query, speakers=None, cosine=0.9):
    ps = [packet(str(i), (speakers or ["User"] * len(texts))[i], i, t) for i, t in enumerate(texts)]
    claims = {p.packet_id: [p.text] for p in ps}
    return typed_supersessions(ps, claims.__getitem__, query, lambda a, b: cosine)


def test_values_of_the_asked_kind_are_found_whatever_the_words():
    assert answer_values("What is the project budget now?", "It was raised to $55,000 after review.") == {"55000"}
    assert answer_values("When is the launch now?", "The launch moved to June 23.") == {"june 23"}
    assert answer_values("How long does the suite take?", "The suite takes 14 minutes, 3 jobs.") == {"14 minutes"}
    assert answer_values("What is the cache hit rate?", "The cache hits 71% of lookups.") == {"71%"}
    assert answer_values("How big is the database?", "The database takes up 12 GB.") == {"12 gb"}
    assert answer_values("What car do I have?", "I got a Toyota RAV4.") is None  # no kind asked: no rule


def test_a_later_value_of_the_asked_kind_on_the_subject_supersedes_the_earlier():
    q = "How much is the redesign budget now?"
    found = marks(["We set $70,000 aside for the redesign.", "The redesign budget was cut to $55,000."], q)
    assert set(found) == {"0"} and found["0"].new == "1"
    assert found["0"].old_values == ("70000",) and found["0"].new_values == ("55000",)


def test_no_mark_for_another_speaker_another_subject_the_same_value_or_another_kind():
    q = "How much is the redesign budget now?"
    assert not marks(["The redesign costs $70,000.", "The redesign costs $55,000."], q, ["User", "Assistant"])
    assert not marks(["The redesign costs $70,000.", "My bike cost $300."], q)
    assert not marks(["The redesign costs $70,000.", "Still $70,000 for the redesign."], q)
    assert not marks(["The redesign takes 3 weeks.", "The redesign now takes 5 weeks."], q)
    # packets whose vectors are apart are about different things even when they share the question's words
    assert not marks(["We set $70,000 aside for the redesign.", "The redesign budget: $55,000."], q, cosine=0.3)


def test_the_kind_is_read_from_the_question_head_and_past_tense_questions_ask_none():
    claim = "The launch moved to June 23 and the suite takes 14 minutes."
    assert answer_values("When is the launch?", claim) == {"june 23"}
    assert answer_values("When did I say the launch would be?", claim) is None
    assert answer_values("How many days passed between when I planned the launch and today?", claim) is None


def test_the_kind_rule_adds_to_the_attribute_rule_only_with_vectors():
    ps = [
        packet("a", "User", 1, "We set $70,000 aside for the redesign."),
        packet("b", "User", 2, "Redesign: $55,000."),
    ]
    claims = {p.packet_id: [p.text] for p in ps}
    q = "What is the redesign budget?"
    found = supersessions(ps, claims.__getitem__, q, lambda t: 1.0, lambda a, b: 0.8)
    assert set(found) == {"a"} and found["a"].new == "b"
    assert not supersessions(ps, claims.__getitem__, q, lambda t: 1.0)  # no vectors: the attribute rule alone


@given(st.text(max_size=80), st.text(max_size=200))
def test_any_question_and_claim_give_values_or_none(query, claim):
    found = answer_values(query, claim)
    assert found is None or all(isinstance(v, str) and v == v.lower() for v in found)
