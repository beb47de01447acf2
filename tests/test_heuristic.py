import re

import pytest

from memcompile_langgraph.extract.base import Metadata, TurnWindow
from memcompile_langgraph.extract.heuristic import HeuristicExtractor, split_sentences
from memcompile_langgraph.extract.sentences import has_negation
from memcompile_langgraph.model import SourcePacket
from memcompile_langgraph.text.terms import STOPWORDS, terms

PEOPLE = ("Caroline", "Melanie")
TIME_WORDS = {"yesterday", "last", "week", "weekend", "may", "2023", "today", "ago", "years"}


def packet(speaker, text, seq=1, caption="", query="", session_time="2023-05-08T13:56:00"):
    return SourcePacket(
        packet_id=f"p{seq}",
        user_id="u",
        dia_id=f"D1:{seq}",
        speaker=speaker,
        session=1,
        session_label="session_1",
        session_time=session_time,
        session_time_raw="1:56 pm on 8 May, 2023",
        text=text,
        seq=seq,
        image_caption=caption,
        image_query=query,
        content_hash="h",
    )


def turn_window(text, speaker="Caroline", previous=None, previous_speaker="Melanie", people=PEOPLE, **kw):
    prev = packet(previous_speaker, previous, seq=0) if previous is not None else None
    return TurnWindow(packet=packet(speaker, text, **kw), previous=prev, known_people=people)


@pytest.fixture
def ex():
    return HeuristicExtractor()


# --- facts ---


@pytest.mark.parametrize(
    "text",
    [
        "Hey Mel! Good to see you! How have you been?",
        "Thanks! Wow, that's great! Haha. Take care! See you! Bye!",
        "That's awesome, Melanie! Congrats!",
        "Haha yeah totally! 😂",
        "Wow, that looks amazing! Thank you so much!",
        "",
    ],
)
def test_greetings_acknowledgements_and_filler_are_dropped(ex, text):
    assert ex.facts(turn_window(text, previous="I finished my painting!")) == []


def test_greeting_is_dropped_but_content_kept(ex):
    facts = ex.facts(turn_window("Hey Mel! Good to see you! I went to a LGBTQ support group yesterday."))
    assert facts == ["Caroline went to a LGBTQ support group yesterday."]


def test_first_person_is_rewritten_to_the_speaker(ex):
    facts = ex.facts(turn_window("I'm swamped with the kids & work. I love painting with my kids.", speaker="Melanie"))
    assert facts == ["Melanie is swamped with the kids & work.", "Melanie loves painting with Melanie's kids."]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I've been running a lot.", "Caroline has been running a lot."),
        ("I'll join the choir.", "Caroline will join the choir."),
        ("I'd love to visit Sweden.", "Caroline would love to visit Sweden."),
        ("I don't like horror movies.", "Caroline doesn't like horror movies."),
        ("I really miss my grandma.", "Caroline really misses Caroline's grandma."),
        ("I went hiking by myself.", "Caroline went hiking by themselves."),
        ("I now have 3 cats.", "Caroline now has 3 cats."),
        ("I now live in Lisbon.", "Caroline now lives in Lisbon."),
        ("My sister and I love pottery.", "Caroline's sister and Caroline love pottery."),
    ],
)
def test_first_person_forms(ex, text, expected):
    assert ex.facts(turn_window(text)) == [expected]


@pytest.mark.parametrize(
    "text, expected",
    [
        # "you" as the subject of a clause after a noun or a verb: the verb agrees with the name
        ("It will help the people you work with.", "It will help the people Melanie works with."),
        ("It's great you have people to support you.", "It's great Melanie has people to support Melanie."),
        ("Ensure you have Flask installed.", "Ensure Melanie has Flask installed."),
        ("It's more than you think.", "It's more than Melanie thinks."),
        # "you" as an object: the bare verb after it stays
        ("It makes you feel relaxed.", "It makes Melanie feel relaxed."),
        ("I can't wait to see you play.", "Caroline can't wait to see Melanie play."),
        ("That gives you hope.", "That gives Melanie hope."),
        ("It helps you understand.", "It helps Melanie understand."),
    ],
)
def test_second_person_verbs_agree_only_where_you_is_the_subject(text, expected):
    from memcompile_langgraph.extract.rewrite import rewriter

    assert rewriter("Caroline", "Melanie")(text) == expected


def test_we_and_our_become_speaker_and_others(ex):
    window = turn_window("We went camping with our kids last weekend.", speaker="Melanie", previous_speaker="Caroline")
    facts = ex.facts(window)
    assert facts == ["Melanie and others went camping with Melanie's kids last weekend."]


def test_second_person_is_the_previous_speaker(ex):
    window = turn_window("Your painting is beautiful, and you are so talented.", previous="Here's my new painting.")
    facts = ex.facts(window)
    assert facts == ["Melanie's painting is beautiful, and Melanie is so talented."]


def test_second_person_is_left_without_another_previous_speaker(ex):
    assert ex.facts(turn_window("Your painting is beautiful.")) == ["Caroline said: Your painting is beautiful."]
    same_speaker = turn_window("Your painting is beautiful.", previous="Look at this.", previous_speaker="Caroline")
    assert ex.facts(same_speaker) == ["Caroline said: Your painting is beautiful."]


def test_reply_carries_the_previous_question(ex):
    facts = ex.facts(turn_window("Sweden, four years ago.", previous="Where did you move from?"))
    assert facts == [
        "Caroline, answering Melanie's question 'where did Caroline move from', said: Sweden, four years ago."
    ]


@pytest.mark.parametrize(
    "previous, text",
    [
        ("That sounds fun! Did you go to the pride parade?", "Yes, last week!"),
        ("Did you go to the pride parade?", "Yes! I went with my friends from the support group."),
        ("Wow! Did you go to the pride parade, Caroline?", "Hey Mel! Just a few months ago."),
        ("What did you think of the pride parade?", "Loved it."),
    ],
)
def test_reply_contains_the_question_content_words(ex, previous, text):
    facts = ex.facts(turn_window(text, previous=previous))
    assert facts, "a reply must produce a claim"
    claim_terms = set(terms(facts[0]))
    assert {"pride", "parad"} <= claim_terms
    assert facts[0].startswith("Caroline, answering Melanie's question")


def test_reply_to_small_talk_does_not_carry_it(ex):
    facts = ex.facts(turn_window("I adopted a puppy!", previous="Hey! How have you been?"))
    assert facts == ["Caroline adopted a puppy!"]


def test_long_reply_without_yes_no_is_not_tied_to_the_question(ex):
    text = (
        "I spent the whole afternoon at the museum looking at the new impressionist exhibition "
        "with my two cousins from Ohio."
    )
    facts = ex.facts(turn_window(text, previous="Did you do anything fun?"))
    assert len(facts) == 1 and "answering" not in facts[0]


def test_content_question_is_kept_and_short_one_dropped(ex):
    text = "Have you tried pottery classes at the community center? How have you been?"
    facts = ex.facts(turn_window(text, previous="Hi."))
    assert facts == ["Caroline asked: has Melanie tried pottery classes at the community center?"]


def test_question_names_the_addressee_when_it_does_not_mention_them(ex):
    facts = ex.facts(turn_window("Any plans for the summer holidays?", previous="Work is finally over."))
    assert facts == ["Caroline asked Melanie: any plans for the summer holidays?"]


def test_image_claim(ex):
    window = turn_window(
        "Look at this!",
        caption="a photo of a dog walking past a wall with a painting of a woman",
        query="transgender pride flag mural",
    )
    assert ex.facts(window) == [
        "Caroline shared a photo: a dog walking past a wall with a painting of a woman (transgender pride flag mural)."
    ]


def test_image_claim_without_query(ex):
    window = turn_window("", caption="a photography of a lake at sunset")
    assert ex.facts(window) == ["Caroline shared a photo: a lake at sunset."]


def test_compound_sentences_are_split(ex):
    facts = ex.facts(turn_window("I'm lucky to have my husband and kids; they keep me motivated.", speaker="Melanie"))
    assert facts == ["Melanie is lucky to have Melanie's husband and kids.", "They keep Melanie motivated."]


def test_sentence_split_handles_abbreviations_emoji_and_ellipsis():
    assert split_sentences("I met Mr. Smith at the store. He was nice!") == (
        "I met Mr. Smith at the store.",
        "He was nice!",
    )
    assert split_sentences("I adopted a puppy 🐶 His name is Oscar") == ("I adopted a puppy", "His name is Oscar")
    assert split_sentences("Well... I guess so?! Maybe.") == ("Well...", "I guess so?!", "Maybe.")


def test_claims_are_clean_unique_and_nonempty(ex):
    facts = ex.facts(turn_window("  I adopted a puppy.   I adopted a puppy.\n\nI love it!  I named him Oscar  "))
    assert facts == ["Caroline adopted a puppy.", "Caroline named him Oscar."]
    assert all(f == f.strip() and f for f in facts)


def test_extraction_is_deterministic(ex):
    window = turn_window(
        "Yes! I went with my friends. It was so much fun; we danced all night.", previous="Did you go out?"
    )
    assert ex.facts(window) == ex.facts(window) == HeuristicExtractor().facts(window)


# --- metadata ---


def test_metadata_fields(ex):
    window = turn_window("I went to a LGBTQ support group yesterday and it was so powerful.")
    (fact,) = ex.facts(window)
    meta = ex.metadata(fact, window)
    assert isinstance(meta, Metadata)
    assert meta.people == ("Caroline",)
    assert "lgbtq support group" in meta.keywords
    assert meta.event_time == "2023-05-07"
    assert meta.interaction_time == "2023-05-08T13:56:00"


def test_interaction_time_falls_back_to_the_raw_session_time(ex):
    window = turn_window("I went to the park yesterday.", session_time=None)
    meta = ex.metadata("Caroline went to the park yesterday.", window)
    assert meta.interaction_time == "1:56 pm on 8 May, 2023"
    assert meta.event_time == "2023-05-07"


def test_keywords_are_bounded_and_free_of_names_stopwords_and_time_words(ex):
    fact = (
        "Last week Caroline and Melanie visited the Van Gogh museum in Amsterdam, bought watercolor paint sets, "
        "took pottery classes, joined a community choir and adopted a rescue puppy named Oscar yesterday."
    )
    meta = ex.metadata(fact, turn_window("x"))
    assert 1 <= len(meta.keywords) <= 5
    for phrase in meta.keywords:
        assert phrase == phrase.lower()
        assert 1 <= len(phrase.split()) <= 3
        for word in phrase.split():
            assert word not in STOPWORDS
            assert word not in TIME_WORDS
            assert word not in {"caroline", "melanie", "thing", "stuff", "lot", "time", "great", "really", "good"}
    positions = [fact.lower().index(k.split()[0]) for k in meta.keywords]
    assert positions == sorted(positions), "keywords come in order of appearance"


def test_keywords_respect_max_keywords():
    narrow = HeuristicExtractor(max_keywords=2)
    meta = narrow.metadata("Caroline bought paint, brushes, canvases, an easel and a sketchbook.", turn_window("x"))
    assert len(meta.keywords) == 2


def test_keyword_salience_prefers_longer_phrases():
    fact = "Caroline loves jazz and modern abstract painting."
    meta = HeuristicExtractor(max_keywords=1).metadata(fact, turn_window("x"))
    assert meta.keywords == ("modern abstract painting",)


def test_people_are_canonical_in_order_of_appearance(ex):
    people = ("Caroline", "Melanie", "John Smith")
    window = turn_window("x", people=people)
    assert ex.metadata("Caroline met John and Mel at the park.", window).people == ("Caroline", "John Smith", "Melanie")
    assert ex.metadata("caroline met john smith.", window).people == ("Caroline", "John Smith")
    assert ex.metadata("Caroline's friend Melanie.", window).people == ("Caroline", "Melanie")


def test_ambiguous_nickname_and_word_like_names_are_not_people(ex):
    window = turn_window("x", speaker="Melissa", people=("Melanie", "Melissa", "Will"))
    assert ex.metadata("Melissa called Mel about the car.", window).people == ("Melissa",)
    assert ex.metadata("Melissa will paint.", window).people == ("Melissa",)
    assert ex.metadata("Melissa met Will.", window).people == ("Melissa", "Will")


@pytest.mark.parametrize(
    "fact, negated",
    [
        ("Caroline didn't go to the concert.", True),
        ("Caroline has never tried pottery.", True),
        ("Melanie is not a fan of crowds.", True),
        ("Caroline has no siblings.", True),
        ("Nobody came to the party.", True),
        ("Caroline won't move.", True),
        ("Caroline can't swim.", True),
        ("Caroline went to the concert.", False),
        ("Melanie knows a lot about nothingness.", False),
    ],
)
def test_negation_marker(fact, negated):
    assert has_negation(fact) is negated


def test_reply_claim_metadata_names_both_people_and_the_question_topic(ex):
    window = turn_window("Yes, last week!", previous="Did you go to the pride parade?")
    (fact,) = ex.facts(window)
    meta = ex.metadata(fact, window)
    assert meta.people == ("Caroline", "Melanie")
    assert meta.keywords == ("pride parade",)
    assert meta.event_time == "week of 2023-05-01"


def test_output_has_no_unicode_controls(ex):
    # bidi overrides go; zero-width characters a script needs (joiners, Thai/Khmer word breaks) stay
    facts = ex.facts(
        turn_window("I love\u200b jazz\u202e music with my \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 friends.")
    )
    assert facts and not re.search("[\u202a-\u202e\u2066-\u2069]", facts[0]) and "\u200c" in facts[0]


def test_numbered_list_items_stay_whole_and_markup_is_dropped():
    text = "Here are some ideas:\n1. **Fushimi Inari**: famous gates.\n2. Kinkaku-ji."
    assert split_sentences(text) == ("Here are some ideas:", "1. Fushimi Inari: famous gates.", "2. Kinkaku-ji.")
