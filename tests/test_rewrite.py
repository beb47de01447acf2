"""The first-person rewrite as a class: sentences built from adverbs, auxiliaries, contractions, reflexives,
negations and questions read right after "I" becomes the speaker, and a sentence that cannot be rewritten exactly is
not rewritten (the claim keeps the speaker's own words). The expected forms are this test's own tables, not the
rewriter's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_heuristic import turn_window

from memcompile_langgraph.extract.heuristic import HeuristicExtractor
from memcompile_langgraph.extract.rewrite import rewriter

SPEAKER = "Ana"
# bare verb -> its third person
VERBS = {
    "have": "has",
    "live": "lives",
    "love": "loves",
    "go": "goes",
    "study": "studies",
    "play": "plays",
    "watch": "watches",
    "miss": "misses",
    "need": "needs",
    "like": "likes",
    "do": "does",
    "enjoy": "enjoys",
    "fix": "fixes",
    "worry about": "worries about",
    "want": "wants",
}
# forms that are the same after any subject
SAME = ["was", "went", "can", "will", "should", "had", "did", "bought", "could", "would", "might", "must"]
# a negation or auxiliary before a bare verb -> its form after "Ana"
NEGATIONS = {
    "don't": "doesn't",
    "do not": "does not",
    "didn't": "didn't",
    "can't": "can't",
    "won't": "won't",
    "really do": "really does",
}
# after "I'd", a past participle that is no bare verb reads "had"; a bare verb reads "would"
PARTICIPLES = ["left", "bought", "thought", "found", "written", "eaten", "forgotten", "spoken", "finished", "heard"]
ADVERBS = ["", "now ", "still ", "really ", "never ", "always ", "just ", "usually ", "no longer ", "sometimes "]
OBJECTS = {"it": "it", "my dog": "Ana's dog", "pottery": "pottery", "in Lisbon": "in Lisbon", "3 cats": "3 cats"}
LEADS = ["", "Today ", "When ", "Honestly, ", "I think "]


def lead_expected(lead: str) -> str:
    return lead.replace("I think", "Ana thinks")


@st.composite
def statements(draw):
    """(sentence, expected rewrite) of a statement whose subject is "I"."""
    lead, adverb = draw(st.sampled_from(LEADS)), draw(st.sampled_from(ADVERBS))
    obj = draw(st.sampled_from(sorted(OBJECTS)))
    kind = draw(st.sampled_from(["verb", "same", "negation", "contraction", "reflexive"]))
    if kind == "verb":
        verb = draw(st.sampled_from(sorted(VERBS)))
        said, meant = f"I {adverb}{verb} {obj}", f"{SPEAKER} {adverb}{VERBS[verb]} {OBJECTS[obj]}"
    elif kind == "same":
        verb = draw(st.sampled_from(SAME))
        said, meant = f"I {adverb}{verb} {obj}", f"{SPEAKER} {adverb}{verb} {OBJECTS[obj]}"
    elif kind == "negation":
        negation, verb = draw(st.sampled_from(sorted(NEGATIONS))), draw(st.sampled_from(sorted(VERBS)))
        said, meant = f"I {negation} {verb} {obj}", f"{SPEAKER} {NEGATIONS[negation]} {verb} {OBJECTS[obj]}"
    elif kind == "contraction":
        said, meant = draw(
            st.sampled_from(
                [
                    (f"I'm {adverb}happy with {obj}", f"{SPEAKER} is {adverb}happy with {OBJECTS[obj]}"),
                    (f"I'm not sure about {obj}", f"{SPEAKER} is not sure about {OBJECTS[obj]}"),
                    (f"I am {adverb}fond of {obj}", f"{SPEAKER} is {adverb}fond of {OBJECTS[obj]}"),
                    (f"I've {adverb}seen {obj}", f"{SPEAKER} has {adverb}seen {OBJECTS[obj]}"),
                    (f"I haven't seen {obj}", f"{SPEAKER} hasn't seen {OBJECTS[obj]}"),
                    (f"I'll {adverb}miss {obj}", f"{SPEAKER} will {adverb}miss {OBJECTS[obj]}"),
                    (f"I'd {adverb}like {obj}", f"{SPEAKER} would {adverb}like {OBJECTS[obj]}"),
                    (f"I'd never seen {obj}", f"{SPEAKER} had never seen {OBJECTS[obj]}"),
                    (f"I'd been to {obj}", f"{SPEAKER} had been to {OBJECTS[obj]}"),
                    *((f"I'd {adverb}{p} {obj}", f"{SPEAKER} had {adverb}{p} {OBJECTS[obj]}") for p in PARTICIPLES),
                    *(
                        (f"I'd {adverb}{v} {obj}", f"{SPEAKER} would {adverb}{v} {OBJECTS[obj]}")
                        for v in ("need", "love", "go", "put", "read")
                    ),
                ]
            )
        )
    else:
        verb = draw(st.sampled_from(["love", "enjoy", "watch", "fix"]))
        said, meant = f"I {adverb}{verb} myself", f"{SPEAKER} {adverb}{VERBS[verb]} themselves"
    return f"{lead}{said}.", f"{lead_expected(lead)}{meant}."


@st.composite
def questions(draw):
    """(question, expected rewrite) asked with "I" after an auxiliary."""
    wh, adverb = draw(st.sampled_from(["", "Why ", "Where ", "How often "])), draw(st.sampled_from(ADVERBS[:6]))
    verb, obj = draw(st.sampled_from(sorted(VERBS))), draw(st.sampled_from(sorted(OBJECTS)))
    aux, agreed, form = draw(
        st.sampled_from(
            [
                ("do", "does", verb),
                ("did", "did", verb),
                ("can", "can", verb),
                ("should", "should", verb),
                ("don't", "doesn't", verb),
                ("have", "has", "seen"),
                ("was", "was", "seen by"),
            ]
        )
    )
    said = f"{aux} I {adverb}{form} {obj}?"
    meant = f"{agreed} {SPEAKER} {adverb}{form} {OBJECTS[obj]}?"
    if not wh:
        said, meant = said[0].upper() + said[1:], meant[0].upper() + meant[1:]
    return f"{wh}{said}", f"{wh}{meant}"


@settings(max_examples=300, deadline=None)
@given(statements())
def test_statements_with_i_read_right(case):
    sentence, expected = case
    assert rewriter(SPEAKER, None)(sentence) == expected


@settings(max_examples=200, deadline=None)
@given(questions())
def test_questions_with_i_read_right(case):
    sentence, expected = case
    assert rewriter(SPEAKER, None)(sentence) == expected


NOT_KNOWN = st.from_regex(r"[a-z]{4,9}", fullmatch=True).filter(lambda w: not w.endswith(("ly", "s", "ing", "ed")))
AUXILIARY_AFTER = {"have": "has", "do": "does", "am": "is", "was": "was", "can": "can", "don't": "doesn't"}


@settings(max_examples=200, deadline=None)
@given(NOT_KNOWN, st.sampled_from(sorted(AUXILIARY_AFTER)))
def test_a_word_of_unknown_kind_before_a_verb_is_never_made_the_verb(word, aux):
    """ "I now have" once read "now" as the verb ("Ana nows have"): an unknown word before a verb is either an adverb
    (kept, the verb agreeing) or the sentence is not rewritten."""
    out = rewriter(SPEAKER, None)(f"I {word} {aux} it.")
    assert out in (None, f"{SPEAKER} {word} {AUXILIARY_AFTER[aux]} it.", f"{SPEAKER} {word} {aux} it.")
    assert out is None or f"{word}s " not in out and f"{word}es " not in out


@pytest.mark.parametrize(
    "sentence",
    [
        "I, too, love pottery.",
        "I so want a cat.",
        "I myself think so.",
        "My wife and myself went home.",
        "I loving it.",
        "I 2 have cats.",
    ],
)
def test_a_sentence_without_an_exact_rewrite_is_not_rewritten(sentence):
    assert rewriter(SPEAKER, None)(sentence) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I now have 3 cats.", "Caroline now has 3 cats."),
        ("I now live in Lisbon.", "Caroline now lives in Lisbon."),
        ("I want to embrace myself.", "Caroline wants to embrace themselves."),
        ("I so want a cat.", 'Caroline: "I so want a cat."'),
        (
            "Was I wrong about my sister's new job?",
            "Caroline asked Melanie: was Caroline wrong about Caroline's sister's new job?",
        ),
        ("Why do I always forget my keys?", "Caroline asked Melanie: why does Caroline always forget Caroline's keys?"),
    ],
)
def test_claims_read_right_or_keep_the_speakers_words(text, expected):
    assert HeuristicExtractor().facts(turn_window(text, previous="Hi there, how are things?")) == [expected]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(VERBS)),
    st.sampled_from(ADVERBS),
    st.sampled_from(["it", "pottery", "in Lisbon", "3 cats"]),
    st.sampled_from([str.upper, str.title]),
)
def test_the_verb_keeps_the_case_it_was_written_in(verb, adverb, obj, case):
    """ "I LOVE IT" once became "Ana LOVEs IT" and "I TRY" "Ana TRies": the agreed form is written in the case of
    the word it replaces."""
    out = rewriter(SPEAKER, None)("I " + case(f"{adverb}{verb} {obj}") + ".")
    assert out == f"{SPEAKER} " + case(f"{adverb}{VERBS[verb]} {obj}") + "."


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["co", "re", "e", "double", "x", "pre", "self"]),
    st.sampled_from(sorted(VERBS)),
    st.sampled_from(ADVERBS),
)
def test_a_hyphenated_verb_agrees_on_its_last_part(prefix, verb, adverb):
    """ "I co-own" once became "Ana coes-own" and "I e-mail" "Ana es-mail": the -s went on the first part."""
    out = rewriter(SPEAKER, None)(f"I {adverb}{prefix}-{verb} it.")
    assert out == f"{SPEAKER} {adverb}{prefix}-{VERBS[verb]} it."


@settings(max_examples=200, deadline=None)
@given(statements(), st.sampled_from([('"', '"'), ("\u201c", "\u201d")]))
def test_a_quote_is_left_as_it_was_said(case, marks):
    """'She said "I love it"' once became 'She said "Ana loves it"': the "I" of a quote is whoever is quoted."""
    quote = f"{marks[0]}{case[0].rstrip('.')}{marks[1]}"
    out = rewriter(SPEAKER, "Bob")(f"My friend told you {quote} but I agree.")
    assert out == f"{SPEAKER}'s friend told Bob {quote} but {SPEAKER} agrees."


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("I/O is slow on my laptop.", "I/O is slow on Ana's laptop."),
        ("I fixed the I/O bug.", "Ana fixed the I/O bug."),
        ("The R/I ratio is high, I think.", "The R/I ratio is high, Ana thinks."),
    ],
)
def test_an_i_joined_by_a_slash_is_no_pronoun(sentence, expected):
    """ "I/O is slow" once became "Ana/O is slow"."""
    assert rewriter(SPEAKER, None)(sentence) == expected
