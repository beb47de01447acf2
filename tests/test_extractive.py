"""The offline extractive reader: which claim answers a question, read from rendered context blocks."""

from hypothesis import given
from hypothesis import strategies as st
from test_demos import DEMO_ANSWERS

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import QUESTIONS, demo_turns
from memcompile_langgraph.integrations.extractive import Claim, answer, parse_claims, statement


def test_demo_questions_are_answered_from_the_turns_that_say_it(embeddings):
    mem = MemCompile(None, embeddings=embeddings)
    mem.add_turns(demo_turns(), user_id="demo")
    for question in QUESTIONS:
        ctx = mem.compile(question, user_id="demo")
        found = answer(question, parse_claims(ctx.text), embeddings)
        dia_id, words = DEMO_ANSWERS[question]
        assert found is not None and found.dia_ids == (dia_id,) and words in found.text, (question, found)
        assert found.render().startswith(f"From memory [{dia_id}], quoted by the offline reader: ")


def test_headers_with_an_empty_or_missing_time_still_give_their_claims():
    text = (
        "[D1:2] Bob |  | session 1\n- Bob owns a kayak.\n\n[D1:3] Ann | session 2\n- Ann sold it.\n\n"
        "[D2:1] Cy | 2024-05-03 11:05 | session 3\n- Cy moved to Oslo.\n- Cy asked: is it cold?"
    )
    assert parse_claims(text) == [
        Claim("D1:2", "", "Bob owns a kayak."),
        Claim("D1:3", "", "Ann sold it."),
        Claim("D2:1", "2024-05-03", "Cy moved to Oslo."),
        Claim("D2:1", "2024-05-03", "Cy asked: is it cold?"),
    ]


def test_questions_and_restatements_are_no_answers_but_mark_the_turn():
    claims = [
        Claim("D1:1", "2024-01-01", "Ann asked: why is Bob selling the kayak?"),
        Claim("D1:2", "2024-01-01", "Bob is selling the kayak."),
        Claim("D1:2", "2024-01-01", "Bob said: It leaks since the storm."),
        Claim("D1:3", "2024-01-01", "Bob said: Selling things online is easy."),
    ]
    found = answer("Why is Bob selling the kayak?", claims)
    assert found is not None and found.dia_ids == ("D1:2",) and "leaks" in found.text
    assert statement("Ann, answering Bob's question 'where to', said: Oslo.") == "Oslo."
    assert statement(claims[0].text) is None
    assert answer("Why is Bob selling the kayak?", claims[:2]) is None  # nothing beyond the question itself
    assert answer("anything?", []) is None


@given(st.text(alphabet=st.sampled_from(list("[]|-: \nD1:2abc session 2024-05-03?'")), max_size=300))
def test_any_context_text_parses_without_error_and_only_claims_under_a_header(text):
    claims = parse_claims(text)
    assert all(c.text.strip() and c.dia_id for c in claims)
    found = answer("who is it?", claims)
    assert found is None or found.dia_ids[0] in {c.dia_id for c in claims}
