"""Claims of the heuristic extractor read right: never empty of content, never only a frame or a date, verbs agree
with the names "I"/"you" are rewritten to; counted by class over both dev sets (support/claim_faults.py)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.claim_faults import BASE_VERBS, count_faults, dialogue_claims, faults
from support.paths import SHARED
from test_heuristic import turn_window

from memcompile_langgraph.eval.beam import load_beam
from memcompile_langgraph.eval.locomo import load_locomo
from memcompile_langgraph.extract.heuristic import HeuristicExtractor

EX = HeuristicExtractor()
NAMES = ("Caroline", "Melanie")

# pieces a turn is made of: plain clauses, "you"/"I" clauses, asides, dates, markup, code and formula lines
VERBS = sorted(BASE_VERBS - {"are", "were", "am", "have", "do"})
OBJECTS = ["the garden", "a new job", "pottery", "it", "my sister", "your plan", "on weekends"]
SUBJECT_CLAUSE = st.builds(
    lambda lead, subject, verb, obj: f"{lead}{subject} {verb} {obj}",
    st.sampled_from(["", "When ", "I think ", "The people ", "I heard ", "If ", "It's great that "]),
    st.sampled_from(["you", "I"]),
    st.sampled_from(VERBS),
    st.sampled_from(OBJECTS),
)
PIECE = st.one_of(
    SUBJECT_CLAUSE.map(lambda s: s + "."),
    st.sampled_from(
        [
            "(said on 2024-03-04).",
            "(2023-05-07)",
            "\n### Conclusion\n",
            "\n#### Step 2\n",
            "\\[ c^2 = 25 \\]",
            "c = 5.",
            "5x = 80",
            "(async () => {",
            "Thanks!",
            "Haha yes!",
            "Did you go?",
            "What is the name of my dog?",
            "My dog is called Rex.",
            "On 8 May, 2023.",
            "[Date]",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
)
TURN = st.lists(PIECE, min_size=1, max_size=6).map(lambda pieces: " ".join(pieces))


# source lines as a fenced block holds them, and the names they define
CODE_LINES = [
    ("def login(user):", "login"),
    ("    return check(user)", None),
    ("class Session:", "Session"),
    ("const navbar = document.querySelector('.navbar');", "navbar"),
    ("try {", None),
    ("} catch (error) {", None),
    ("  console.error('Error adding class to navbar:', error);", None),
    ("import numpy as np", None),
    (".row { display: flex; }", None),
    ("</select>", None),
    ("function fetchWeather(city) {", "fetchWeather"),
]
FENCED = st.builds(
    lambda lang, lines: (f"```{lang}\n" + "\n".join(line for line, _ in lines) + "\n```", lang, lines),
    st.sampled_from(["", "python", "javascript", "css"]),
    st.lists(st.sampled_from(CODE_LINES), min_size=1, max_size=8),
)
PROSE = st.lists(SUBJECT_CLAUSE.map(lambda s: s + "."), max_size=3).map(" ".join)


def claims_of(text, previous="How are you doing with the garden?"):
    window = turn_window(text, previous=previous)
    return EX.facts(window)


@settings(max_examples=300, deadline=None)
@given(TURN, st.one_of(st.none(), TURN))
def test_no_claim_is_empty_only_a_frame_or_a_date(text, previous):
    for claim in claims_of(text, previous):
        assert claim.strip()
        assert "no_content" not in faults(claim, NAMES), claim
        assert "markup" not in faults(claim, NAMES), claim


@settings(max_examples=200, deadline=None)
@given(PROSE, FENCED, PROSE)
def test_a_code_block_becomes_one_claim_naming_what_it_defines(before, block, after):
    code, lang, lines = block
    claims = claims_of(f"{before}\n{code}\n{after}", None)
    defined = list(dict.fromkeys(name for _, name in lines if name))[:5]
    shared = [c for c in claims if c.startswith("Caroline shared")]
    assert not any("code" in faults(c, NAMES) for c in claims), claims
    assert claims_of(f"{before}\n{after}", None) == [c for c in claims if c not in shared]
    if lang or defined:
        assert len(shared) == 1 and (lang in shared[0]) and all(name in shared[0] for name in defined), shared
    else:
        assert not shared


def test_display_math_is_left_out_and_an_unclosed_fence_ends_the_text():
    text = "I solved it.\n\\[ c^2 = a^2 + b^2 \\]\nThe answer is five.\n```python\ndef area(r):\n    return r * r"
    claims = claims_of(text, None)
    assert claims == [
        "Caroline solved it.",
        "Caroline said: The answer is five.",
        "Caroline shared python code defining area.",
    ]


@settings(max_examples=300, deadline=None)
@given(SUBJECT_CLAUSE)
def test_a_rewritten_subject_agrees_with_its_verb(clause):
    for claim in claims_of(clause + "."):
        assert "agreement" not in faults(claim, NAMES), claim


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I heard you work as a marine biologist.", "Caroline heard Melanie works as a marine biologist."),
        ("Can't wait to see what you come up with!", "Can't wait to see what Melanie comes up with!"),
        ("It's great that you care so much about your pets!", "It's great that Melanie cares so much"),
        ("I remember you saying that.", "Caroline remembers Melanie saying that."),
        ("You overcame those challenges.", "Melanie overcame those challenges."),
        ("That makes you accountable for it.", "That makes Melanie accountable for it."),
        ("Send them a thank-you note after the interview.", "Send them a thank-you note after the interview."),
    ],
)
def test_named_agreement_examples(text, expected):
    assert any(expected in c for c in claims_of(text)), claims_of(text)


def test_a_date_aside_stays_with_its_sentence():
    reply = "From memory [m-1], quoted by the offline reader: User's dog is called Rex. (said on 2024-03-04)"
    claims = EX.facts(
        turn_window(reply, speaker="Assistant", previous="What is my dog called?", previous_speaker="User")
    )
    assert claims and all("(said on 2024-03-04)" not in c or "Rex" in c for c in claims)
    assert not any(c.startswith("Assistant said: (said") for c in claims)


def test_markup_and_formula_lines():
    claims = claims_of("### Conclusion\nThe area is \\( 24 \\) square metres.\nc = 5\nI finished the course.", None)
    assert "Caroline said: Conclusion." in claims
    assert "Caroline said: The area is 24 square metres." in claims
    assert not any("c = 5" in c or "#" in c or "\\(" in c for c in claims)


@pytest.mark.parametrize(
    "claim, found",
    [
        ("Assistant said: (said on 2024-03-04).", {"no_content"}),
        ("Alice work as a marine biologist.", {"agreement"}),
        ("Alice works as a marine biologist.", set()),
        ("Bob asked Alice: does Alice like it?", set()),
        ("Assistant said: ### Conclusion.", {"markup"}),
        ("Assistant said: (async () => {.", {"code"}),
        ("Assistant said: Def login().", {"code"}),
        ("Assistant said: From numpy import array.", {"code"}),
        ("Assistant said: Return to the gym tomorrow.", set()),
        ("Assistant said: Print the report: it helps.", set()),
        ("Assistant shared python code defining login, create_app.", set()),
    ],
)
def test_the_checker_classifies(claim, found):
    assert faults(claim, ("Alice", "Bob", "Assistant")) == found


def test_dev_sets_have_no_empty_or_markup_claims_and_few_agreement_or_code_claims():
    for bench in (load_locomo(SHARED / "data/locomo/locomo10-dev.json"), load_beam(SHARED / "data/beam/100K")):
        counts = count_faults(pair for d in bench.dialogues for pair in dialogue_claims(d.turns, d.user_id))
        assert counts["claims"] > 10_000
        assert counts["no_content"] == 0
        assert counts["markup"] <= counts["claims"] // 10_000
        assert counts["agreement"] <= counts["claims"] // 2_000
        assert counts["code"] <= counts["claims"] // 50  # formulas written inline in a sentence remain
