"""Eval measures against hand-computed values: recall, DBR, token F1, BLEU-1, percentiles and the aggregation."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.eval import metrics
from memcompile_langgraph.eval.aggregate import baseline_figures, budget_curves, by_category, figures
from memcompile_langgraph.eval.metrics import (
    bleu1,
    budget_duplication,
    full_coverage,
    gold_recall,
    percentile,
    token_f1,
)
from memcompile_langgraph.eval.paper import variant_of
from memcompile_langgraph.text.terms import count_tokens


def test_gold_recall_and_full_coverage():
    assert gold_recall(["D1:1", "D2:3"], ["D2:3", "D9:9", "D2:3"]) == 0.5
    assert gold_recall(["D1:1", "D1:1"], ["D1:1"]) == 1.0  # a repeated gold id counts once
    assert full_coverage(["D1:1", "D2:3"], ["D2:3", "D1:1", "D4:4"])
    assert not full_coverage(["D1:1", "D2:3"], ["D2:3"])


def test_budget_duplication_counts_repeated_sources_in_the_first_k_slots():
    assert budget_duplication(["a", "b", "a", "c", "b"], 4) == (4, 3, 0.25)
    assert budget_duplication(["a", "a", "a"], 10) == (3, 1, 2 / 3)
    assert budget_duplication([], 10) == (0, 0, 0.0)


def test_token_f1_uses_token_sets_and_drops_sentence_punctuation():
    # pred {the, cat, sat}, gold {cat, sat, on, the, mat}: P = 3/3, R = 3/5 -> F1 = 0.75
    assert token_f1("The cat sat.", "cat sat on the mat") == pytest.approx(0.75)
    assert token_f1("Biscuit!", "biscuit") == 1.0
    assert token_f1("a dog", "Biscuit") == 0.0
    assert token_f1("", "Biscuit") == 0.0
    assert token_f1("52", 52) == 1.0


def test_bleu1_is_clipped_unigram_precision_times_brevity_penalty():
    # clipped matches: a 1 of 2, cat 1 of 2 -> 2/4; candidate longer than the reference -> no penalty
    assert bleu1("a cat a cat", "a cat sat") == pytest.approx(0.5)
    # one token, all matching, reference of 3: exp(1 - 3/1)
    assert bleu1("cat", "the cat sat") == pytest.approx(math.exp(-2))
    # punctuation marks are tokens: "7 May 2023." has 4 tokens, the reference 3 -> 3/4
    assert bleu1("7 May 2023.", "7 may 2023") == pytest.approx(0.75)
    assert bleu1("dog", "cat") == 0.0
    assert bleu1("", "cat") == 0.0


def test_percentile_interpolates_like_numpy():
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([10, 20, 30], 95) == pytest.approx(29.0)
    assert percentile([], 50) == 0.0


def test_token_counter_falls_back_offline_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: tiktoken would have to download
    name, count = metrics.token_counter()
    assert name.startswith("memcompile.text.count_tokens")
    assert count("Biscuit chewed my shoes.") == count_tokens("Biscuit chewed my shoes.") == 5


def test_variant_names_follow_table_2():
    on = {
        "use_intent": True,
        "use_bm25_candidates": True,
        "use_cells": True,
        "use_scheduler": True,
        "use_frontier": True,
        "dense_only": False,
    }
    assert variant_of(on) == "A0"
    assert variant_of({**on, "use_frontier": False}) == "A1"
    assert variant_of({**on, "use_frontier": False, "use_scheduler": False}) == "A2"
    assert variant_of({**on, "use_scheduler": False}) == "A3"
    assert variant_of({**on, "use_cells": False}) == "A5"
    assert variant_of({**on, "dense_only": True}) == "A7"
    assert variant_of({**on, "use_cells": False, "use_intent": False}) == "custom"


def _stage(slots, unique, gold):
    return {"slots": slots, "unique": unique, "gold": gold}


def _record(category, gold, selected, ms, tokens, k10_unnorm, judge, f1, bleu, baselines=None):
    return {
        "qid": f"x#{ms}",
        "category": category,
        "gold": gold,
        "gold_missing": [],
        "selected": selected,
        "pool_gold": gold,
        "pool_packets": 50,
        "frontier_pool_gold": gold[:1] if len(gold) > 1 else [],
        "frontier_pool_packets": 40,
        "k10": {
            "unnormalized": k10_unnorm,
            "dedup": k10_unnorm,
            "normalized": _stage(10, 10, gold),
            "anchors": _stage(10, 10, gold[:1]),
        },
        "tokens": {"bundle": tokens, "raw": tokens // 2, "claim": tokens // 4},
        "ms": ms,
        "stage_ms": {"intent": ms / 10},
        "judge": judge,
        "f1": f1,
        "bleu1": bleu,
        "baselines": baselines or {"bm25": ["q"] * 12},
        "baseline_tokens": {"bm25": {"10": 100, "12": 120}},
    }


@pytest.fixture
def records():
    return [
        _record(
            "single-hop",
            ["a", "b"],
            ["a", "x", "y"],
            10,
            100,
            _stage(10, 8, ["a"]),
            True,
            0.5,
            0.4,
            {"bm25": ["b", "q", "q", "q", "q", "q", "q", "q", "q", "q", "a", "q"]},
        ),
        _record("multi-hop", ["c"], ["c"], 30, 300, _stage(7, 5, ["c"]), False, 0.2, 0.1, {"bm25": ["c"] + ["q"] * 11}),
        _record("open-domain", [], ["z"], 20, 200, _stage(10, 10, []), True, 0.9, 0.9),
    ]


def test_figures_by_hand(records):
    f = figures(records, "bundle")
    assert f["questions"] == 3 and f["questions_with_gold"] == 2
    assert f["gold_recall"] == pytest.approx(0.75)  # (1/2 + 1/1) / 2; the question without gold is left out
    assert (f["full_coverage"], f["full_coverage_count"]) == (0.5, 1)
    assert f["pool_recall"] == 1.0 and f["frontier_pool_recall"] == pytest.approx(0.25)
    # K=10 diagnostics over questions that filled all 10 slots (the second did not): unique (8 + 10) / 2, DBR (0.2 + 0) / 2
    assert f["unique_sources"] == 9.0 and f["dbr"] == pytest.approx(0.1) and f["k10"]["unnormalized"]["affected"] == 0.5
    assert f["k10"]["unnormalized"]["eligible"] == 2
    assert f["normalized_dbr"] == 0.0 and f["normalized_unique_sources"] == 10.0
    assert f["k10"]["anchors"]["gold_recall"] == pytest.approx(0.75)
    assert f["mean_packets"] == pytest.approx(5 / 3, abs=1e-6)
    assert f["mean_context_tokens"] == 200.0 and f["context_tokens_by_view"] == {
        "bundle": 200.0,
        "raw": 100.0,
        "claim": 50.0,
    }
    assert (f["query_ms_p50"], f["query_ms_p95"]) == (20.0, 29.0)
    assert f["stage_ms"]["intent"] == {"p50": 2.0, "p95": 2.9}
    # Judge over every answer; F1 and BLEU-1 without open-domain
    assert f["judge"] == pytest.approx(2 / 3, abs=1e-6)
    assert f["f1"] == pytest.approx(0.35) and f["bleu1"] == pytest.approx(0.25)


def test_categories_baselines_and_budget_curves(records):
    cats = by_category(
        records, ["single-hop", "multi-hop", "temporal", "open-domain"], lambda rs: figures(rs, "bundle")
    )
    assert list(cats) == ["single-hop", "multi-hop", "temporal", "open-domain"]
    assert cats["single-hop"]["gold_recall"] == 0.5 and cats["temporal"] == {"questions": 0}
    base = baseline_figures(records, ["single-hop", "multi-hop"])
    assert set(base) == {"bm25_top10", "bm25_top12"}
    assert base["bm25_top10"]["gold_recall"] == pytest.approx(0.75)  # b of {a, b}, and c
    assert base["bm25_top12"]["gold_recall"] == pytest.approx(1.0)  # a sits at rank 11
    assert base["bm25_top12"]["mean_context_tokens"] == 120.0
    assert base["bm25_top10"]["by_category"]["single-hop"]["gold_recall"] == 0.5
    curves = budget_curves(records)
    assert curves["k"] == list(range(1, 13))
    assert curves["system"][0] == pytest.approx(0.75) and curves["system"][-1] == pytest.approx(0.75)
    assert curves["bm25"][0] == pytest.approx(0.75) and curves["bm25"][10] == pytest.approx(1.0)


IDS = st.sampled_from([f"D{s}:{t}" for s in (1, 2) for t in range(1, 6)])


@given(gold=st.lists(IDS, min_size=1, max_size=4), found=st.lists(IDS, max_size=8), data=st.data())
def test_gold_recall_properties(gold, found, data):
    r = gold_recall(gold, found)
    assert 0 <= r <= 1
    assert r == gold_recall(gold, data.draw(st.permutations(found)))  # the order of the packets does not count
    assert r == gold_recall(list(reversed(gold)), found + found)  # nor repeats
    assert full_coverage(gold, found) == (r == 1)
    assert gold_recall(gold, found + gold) == 1
    missed = [g for g in gold if g not in found]
    if missed:
        assert gold_recall(gold, [*found, data.draw(st.sampled_from(missed))]) > r  # one more gold turn counts
    assert gold_recall(gold, [*found, "D9:9"]) == r  # a turn outside the gold does not


@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["single-hop", "temporal"]), st.lists(IDS, max_size=3), st.lists(IDS, max_size=6)),
        min_size=1,
        max_size=8,
    )
)
def test_recall_is_a_mean_over_questions_with_gold_and_baselines_score_it_the_same(rows):
    from memcompile_langgraph.eval.aggregate import recall_figures

    records = [
        {"category": c, "gold": gold, "selected": found, "baselines": {"bm25": found}} for c, gold, found in rows
    ]
    scored = [gold_recall(g, f) for _, g, f in rows if g]
    got = recall_figures(records, lambda r: r["selected"])
    assert got["questions_with_gold"] == len(scored)  # a question without gold is counted, not scored 0 or 1
    assert got["gold_recall"] == pytest.approx(sum(scored) / len(scored) if scored else 0.0, abs=1e-6)
    assert recall_figures(records, lambda r: r["baselines"]["bm25"]) == got
