"""Coverage for questions whose evidence is spread (evidence/spread.py): counting questions, listed items."""

from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.evidence.spread import cover_items, listed_items, spans_history


def test_a_count_of_things_spans_the_history_only_when_counts_are_on_and_a_duration_never_does():
    for q in ("How many times has John injured his ankle?", "How many turtles does Nate have?"):
        assert spans_history(q, counts=True) and not spans_history(q)
    for q in ("How many weeks passed between the two trips?", "How much did my accuracy improve?"):
        assert not spans_history(q, counts=True)
    assert spans_history("In what order did I bring up the parts of my app?", counts=False)


def test_listed_items_are_the_parts_of_the_questions_list():
    assert listed_items("Considering my form validation, lazy loading setup, and bounce rate monitoring, how?") == [
        "Considering my form validation",
        "lazy loading setup",
        "bounce rate monitoring",
    ]
    assert listed_items("Between my fetch latency and my API response time, which is faster?") == [
        "my fetch latency",
        "my API response time",
    ]
    assert listed_items("What did Caroline and Melanie do at the park?") == []  # two names are not a list
    assert listed_items("Where did she go hiking?") == []


def test_each_items_best_packet_comes_first_in_ranked_order_at_most_half_of_k():
    ranked = [f"p{i}" for i in range(20)]
    assert cover_items(ranked, ["p15", None, "p3"], 6) == ["p3", "p15", "p0", "p1", "p2", "p4"]
    assert cover_items(ranked, ["p19", "p18", "p17", "p16"], 6) == ["p16", "p17", "p18", "p0", "p1", "p2"]
    assert cover_items(ranked, [None], 4) == ranked[:4]


@given(st.lists(st.integers(0, 30), max_size=6), st.integers(1, 12))
def test_cover_items_keeps_k_distinct_packets_of_the_ranking(best, k):
    ranked = [f"p{i}" for i in range(25)]
    out = cover_items(ranked, [f"p{b}" if b < 25 else None for b in best], k)
    assert len(out) == min(k, len(ranked)) == len(set(out)) and set(out) <= set(ranked)


@given(st.text(max_size=200))
def test_any_question_gives_items_that_are_parts_of_it(query):
    items = listed_items(query)
    assert len(items) != 1 and all(item and item in query for item in items)
