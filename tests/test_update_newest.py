"""The newest statement of the question's subject is called into the selection (evidence/updates.py)."""

from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.evidence.updates import asks_one_value, newest_statements
from memcompile_langgraph.model import SourcePacket

Q = "How long does the test suite take now?"


def run(texts, selected, query=Q, speakers=None, close=None, min_cosine=0.5):
    """texts: packet id -> text, ids "0", "1", ... in dialogue order; close: pairs of ids whose vectors are close."""
    return run_claims(texts, {}, selected, query, speakers, close, min_cosine)


def run_claims(texts, packet_claims, selected, query=Q, speakers=None, close=None, min_cosine=0.5):
    """run() with some packets' claims given (packet id -> claims; the others' claim is their text)."""
    ps = {
        pid: SourcePacket(pid, "u", f"D1:{pid}", (speakers or {}).get(pid, "User"), 1, "", None, "", t, int(pid))
        for pid, t in texts.items()
    }
    near = {frozenset(p) for p in close or ()}

    def before(pid):  # the same speaker's previous turn
        earlier = [p for p in ps if int(p) < int(pid) and ps[p].speaker == ps[pid].speaker]
        return max(earlier, key=int) if earlier else None

    return newest_statements(
        query,
        selected,
        list(texts),
        ps.__getitem__,
        lambda pid: packet_claims.get(pid, [ps[pid].text]),
        before,
        lambda a, b: 0.9 if frozenset((a, b)) in near else 0.1,
        min_cosine,
        "Assistant",
    )


TEXTS = {
    "0": "The test suite takes 9 minutes.",
    "1": "Can you help with a date parser?",
    "2": "Re the test suite:",
    "3": "That changed, a run is 21 minutes these days.",
    "4": "Another filler.",
    "7": "More filler.",
}


def test_the_later_value_after_a_turn_that_names_the_subject_comes_in_after_its_statement():
    out, found = run(TEXTS, ["0", "1", "4", "7"], close=[("0", "2")])
    assert out == ["0", "3", "1", "4"] and set(found) == {"0"}
    assert (found["0"].new, found["0"].old_values, found["0"].new_values) == ("3", ("9 minutes",), ("21 minutes",))
    assert run(TEXTS, ["0", "1", "4"], close=[("0", "2")])[0] == ["0", "1", "4"]  # only seeds: none leaves


def test_nothing_comes_in_without_a_close_vector_or_a_shared_word():
    assert run(TEXTS, ["0", "1", "4", "7"])[0] == ["0", "1", "4", "7"]  # no close vector
    texts = {**TEXTS, "2": "Re the build:"}  # close, but no word of the statement or the question
    assert run(texts, ["0", "1", "4", "7"], close=[("0", "2")])[0] == ["0", "1", "4", "7"]


def test_a_value_told_again_as_history_is_no_update_and_the_newest_update_wins():
    texts = {
        **TEXTS,
        "5": "Back when the test suite took 9 minutes, we merged less.",
        "6": "The test suite takes 30 minutes.",
    }
    out, found = run(texts, ["0", "1", "4", "7"], close=[("0", "2"), ("0", "5"), ("0", "6")])
    assert {a: f.new for a, f in found.items()} == {"0": "6"} and out == ["0", "6", "1", "4"]


def test_another_speaker_another_attribute_or_an_event_question_calls_nothing_in():
    speakers = {"3": "Assistant", "2": "Assistant"}
    sel = ["0", "1", "4", "7"]
    assert run(TEXTS, sel, speakers=speakers, close=[("0", "2"), ("0", "3")])[0] == sel
    texts = {**TEXTS, "3": "That changed, the suite has 21 cases these days."}  # cases: not what is asked
    assert run(texts, sel, close=[("0", "2")])[0] == sel
    assert run(TEXTS, sel, close=[("0", "2")])[0] != sel  # the same with the asked attribute calls it in
    for q in (
        "How long did the test suite take in May?",
        "Did the test suite get faster?",
        "How many minutes passed between the two runs of the test suite?",
    ):
        assert run(TEXTS, sel, query=q, close=[("0", "2")])[0] == sel


def test_questions_asking_for_one_current_value():
    assert asks_one_value("What is the project budget now?")
    assert asks_one_value("How many sources are in my Zotero library?")
    assert not asks_one_value("Have I ever missed a writing session?")
    assert not asks_one_value("When did I say I met Laura?")
    assert not asks_one_value("How many days are there between the deadline and the call?")
    assert not asks_one_value("Can you list the order in which I brought up these topics?")


@given(
    st.lists(st.sampled_from(sorted(TEXTS)), unique=True, min_size=0, max_size=5),
    st.sets(st.tuples(st.sampled_from(sorted(TEXTS)), st.sampled_from(sorted(TEXTS)))),
    st.floats(0.0, 1.0),
)
def test_the_selection_keeps_its_length_and_its_seeds_and_holds_no_duplicate(selected, close, min_cosine):
    out, found = run(TEXTS, selected, close=close, min_cosine=min_cosine)
    assert len(out) == len(selected) and len(set(out)) == len(out)
    assert set(out) <= set(TEXTS)
    assert set(selected[:3]) <= set(out)  # the seeds stay
    assert all(a in out and f.new in out and int(f.new) > int(a) for a, f in found.items())


def test_a_schedule_over_several_claims_is_a_list_not_an_update():
    texts = {
        **TEXTS,
        "3": "That changed.",
        "5": "Standup takes 15 minutes.",
        "6": "Review takes 30 minutes.",
        "8": "Planning takes 45 minutes.",
        "9": "Retro takes 50 minutes.",
        "10": "Demo takes 20 minutes.",
    }
    ps_claims = {"3": [texts[k] for k in ("5", "6", "8", "9", "10")]}  # one packet, one claim a line
    out, found = run_claims(texts, ps_claims, ["0", "1", "4", "7"], close=[("0", "2")])
    assert out == ["0", "1", "4", "7"] and not found
    ps_claims = {"3": [texts[k] for k in ("5", "6")]}  # two values: one statement may carry them
    assert run_claims(texts, ps_claims, ["0", "1", "4", "7"], close=[("0", "2")])[0] == ["0", "3", "1", "4"]


def test_the_query_graph_calls_the_update_in_and_marks_the_older_statement(make_mem):
    """End to end with the local model: the update names its subject only in the turn before it, so without the rule
    the older statement and fillers about the test suite fill the selection."""
    turns = []

    def say(session, text, who="User"):
        turns.append({"speaker": who, "text": text, "session": session})

    say(1, "Our CI test suite takes 9 minutes to finish.")
    say(1, "Nice, that is quick.", "Assistant")
    for s in range(1, 4):
        for n, f in enumerate(
            (
                "Can you help me write a unit test for the date parser?",
                "How should I name feature branches?",
                "What should go into a good README?",
                "Any tips for keeping a reading habit going?",
                "How do I make a pie chart in matplotlib?",
                "What's a quick healthy lunch to prep?",
            )
        ):
            say(s, f)
            # each reply its own (copies of one would take one slot): fillers that share the question's words
            say(s, f"Sure, here is how I would go about the test suite question {s}.{n}: keep it simple.", "Assistant")
    say(4, "Quick note about the CI test suite.")
    say(4, "Go on.", "Assistant")
    say(4, "That changed, a run is 21 minutes these days.")
    say(4, "Understood.", "Assistant")
    question = "How long does the CI test suite take?"
    # the fused order alone: the shipped reader finds this update by itself (its words are new to the chat)
    fused = MemCompileConfig().with_overrides(pool_reader=None)
    off = make_mem(turns=turns, config=fused.with_overrides(update_newest_cosine=0.0))
    assert "D4:3" not in [p.dia_id for p in off.compile(question, user_id="u").packets]
    for config in (fused, MemCompileConfig()):  # the rule calls it in; with the reader too
        ctx = make_mem(turns=turns, config=config).compile(question, user_id="u")
        packets = ctx.packets
        assert "by [D4:3]: 21 minutes replaces 9 minutes" in ctx.text
        ids = [p.dia_id for p in packets]
        assert ids.index("D4:3") == ids.index("D1:1") - 1 and len(ids) == 12  # the current statement first
        assert {p.dia_id: p.superseded_by for p in packets}["D1:1"] == "D4:3"
