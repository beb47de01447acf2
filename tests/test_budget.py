"""Context budget in tokens (evidence/budget.py): tokens spent by rank, the answer-bearing lines of a cut packet
first, the packets after it left out, one marker, never over the budget, monotone in the budget."""

import json
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_eval_data import LOCOMO_MINI

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.eval.locomo import load_locomo
from memcompile_langgraph.evidence.budget import Block, fit_blocks, validate_max_tokens
from memcompile_langgraph.evidence.render import render_context
from memcompile_langgraph.integrations.retriever import packet_documents
from memcompile_langgraph.text.terms import count_tokens, term_set

LONG = Block(
    "[D1:1] Assistant | 2024-03-15 | session 1",
    tuple(f"- Step {i}: configure module {i} with its blueprint and tests." for i in range(40))
    + ("- The PostgreSQL pool should hold 20 connections for the dashboard API.",),
)
SHORT = Block("[D1:0] User | 2024-03-15 | session 1", ("- User is building a budget tracker with Flask.",))
MARKER = re.compile(r"^- \[\.\.\. .* cut to fit the token budget\]$")
FRAGMENT_END = re.compile(r" \[\.\.\. \d+ more characters\]")


def kept_lines(block: str) -> list[str]:
    """The lines of a rendered block after its header, the budget's marker left out."""
    return [line for line in block.split("\n")[1:] if not MARKER.match(line)]


def kept_words(block: str) -> Counter:
    return Counter(re.findall(r"\w+", FRAGMENT_END.sub("", "\n".join(kept_lines(block)))))


def test_contexts_that_fit_are_unchanged():
    whole = [LONG.text(), SHORT.text()]
    assert fit_blocks([LONG, SHORT], "pool connections", None, count_tokens) == whole
    assert fit_blocks([LONG, SHORT], "pool connections", 10_000, count_tokens) == whole


def test_the_top_packet_keeps_its_answer_line_and_lower_ranks_go_first():
    out = fit_blocks([LONG, SHORT], "How many connections should the PostgreSQL pool hold?", 120, count_tokens)
    assert len(out) == 1  # the short packet ranks lower: it goes before the long one loses a line it could keep
    lines = out[0].split("\n")
    assert lines[0] == LONG.header
    assert "- The PostgreSQL pool should hold 20 connections for the dashboard API." in lines
    assert re.fullmatch(r"- \[\.\.\. \d+ of 41 lines and 1 more packet cut to fit the token budget\]", lines[-1])
    kept = lines[1:-1]
    assert kept == [x for x in LONG.lines if x in kept]  # the packet's own order
    assert count_tokens("\n\n".join(out)) <= 120


def test_the_claim_that_selected_a_packet_is_kept_first():
    lead = Block(LONG.header, LONG.lines, lead=7)
    out = fit_blocks([lead], "PostgreSQL pool", 80, count_tokens)[0].split("\n")
    assert LONG.lines[7] in out and LONG.lines[-1] in out
    assert LONG.lines[7] not in fit_blocks([LONG], "PostgreSQL pool", 80, count_tokens)[0].split("\n")


def test_a_one_line_packet_is_cut_to_sentences_and_a_long_sentence_to_its_start():
    raw = Block(
        "[D1:1] Assistant | 2024-03-15 | session 1",
        ("- " + " ".join(f"Sentence {i} is about topic {i}." for i in range(60)) + " The pool holds 20 connections.",),
    )
    out = fit_blocks([raw], "pool connections", 60, count_tokens)[0].split("\n")
    assert out[1].startswith("- ") and "The pool holds 20 connections." in out[1]
    assert out[2].endswith("sentences cut to fit the token budget]")
    prose = Block(SHORT.header, ("- " + " ".join(f"word{i}" for i in range(300)),))
    cut = fit_blocks([prose, SHORT], "word7", 80, count_tokens)
    assert len(cut) == 1 and cut[0].split("\n")[1].startswith("- word0 word1 word2 ")
    assert re.search(r"word\d+ \[\.\.\. \d+ more characters\]$", cut[0].split("\n")[1])  # cut at a word
    assert count_tokens(cut[0]) <= 80


line = st.text(alphabet="abc xyz.?!0123", min_size=1, max_size=120).map(lambda s: "- " + s)
block = st.builds(
    Block,
    st.integers(0, 99).map(lambda n: f"[D1:{n}] A | t | session 1"),
    st.lists(line, max_size=12).map(tuple),
    st.lists(st.just("- [superseded on t by [D2:1]: 3 replaces 2 stated here on t]"), max_size=1).map(tuple),
    st.one_of(st.none(), st.integers(0, 11)),
)
context = st.lists(block, min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(bs=context, budget=st.integers(1, 600), more=st.integers(1, 300), query=st.text("abc xyz?", max_size=30))
def test_any_context_is_spent_by_rank_within_the_budget_and_monotone(bs, budget, more, query):
    whole = [b.text() for b in bs]
    out = fit_blocks(bs, query, budget, count_tokens)
    if count_tokens("\n\n".join(whole)) <= budget:
        assert out == whole
        return
    assert count_tokens("\n\n".join(out)) <= budget
    assert len(out) <= len(bs)
    for i, o in enumerate(out):
        assert o.split("\n")[0] == bs[i].header  # a kept packet keeps its header; the left out ones are a suffix
        assert kept_lines(o) or not bs[i].units  # and some of its text
        if any(kept_lines(lower) for lower in out[i + 1 :]):
            assert o == whole[i]  # never shrinks while a lower-ranked packet keeps more than its header
        if len(bs[i].lines) > 1:  # a cut packet keeps its answer-bearing lines first (after the selecting claim)
            kept = [x for j, x in enumerate(bs[i].lines) if x in kept_lines(o) and j != bs[i].lead]
            if any(term_set(x) & term_set(query) for x in bs[i].lines if x not in kept_lines(o)):
                assert all(term_set(x) & term_set(query) for x in kept)
    assert sum(bool(MARKER.match(x)) for o in out for x in o.split("\n")) == (1 if out else 0)  # said once
    larger = fit_blocks(bs, query, budget + more, count_tokens)
    for i, o in enumerate(out):
        assert i < len(larger) and not kept_words(o) - kept_words(larger[i])  # a larger budget keeps no less


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "100"])
def test_bad_budgets_are_value_errors(bad):
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        validate_max_tokens(bad)


@pytest.fixture(scope="module")
def demo(embeddings):
    mem = MemCompile(None, embeddings=embeddings)  # as the docs run it: with the dense channel
    mem.add_turns(demo_turns(), user_id="demo")
    yield mem
    mem.close()


def test_the_docs_example_keeps_the_answer_at_every_budget(demo):
    """docs/configuration.md: compile("What kind of dog did Tom adopt?", max_tokens=150) on the demo data."""
    query = "What kind of dog did Tom adopt?"
    full = demo.compile(query, user_id="demo", max_tokens=None)
    previous = ""
    for budget in (100, 150, 200, 300, 400):
        ctx = demo.compile(query, user_id="demo", max_tokens=budget)
        assert "a beagle named Biscuit." in ctx.text and count_tokens(ctx.text) <= budget
        assert ("cut to fit the token budget]" in ctx.text) == (count_tokens(full.text) > budget)
        assert ctx.dia_ids == full.dia_ids and ctx.text.startswith(previous.rpartition("\n- [...")[0])
        previous = ctx.text
        docs = packet_documents(demo, "demo", ctx)  # the retriever's documents: the blocks the budget kept
        assert "\n\n".join(d.page_content for d in docs) == ctx.text
        assert [d.metadata["dia_id"] for d in docs] == full.dia_ids[: len(docs)]


def test_locomo_contexts_do_not_change_at_the_default_budget(tmp_path):
    assert MemCompileConfig().context_max_tokens == 2000
    bench = load_locomo(LOCOMO_MINI)
    mem = MemCompile(tmp_path, dense=False)
    try:
        for d in bench.dialogues:
            mem.add_turns(d.turns, user_id=d.user_id)
            index = mem.index(d.user_id)
            for q in d.questions:
                ctx = mem.compile(q.question, user_id=d.user_id)
                pids = [p.packet_id for p in ctx.packets]
                assert ctx.text == render_context(index, pids)  # no budget at all
                small = mem.compile(q.question, user_id=d.user_id, max_tokens=30)
                assert [p.dia_id for p in small.packets] == ctx.dia_ids  # the selection stays whole
        with pytest.raises(ValueError, match="max_tokens"):
            mem.compile("Where does Priya work?", user_id="mini-1", max_tokens=0)
    finally:
        mem.close()


def test_the_eval_reports_coverage_along_the_budget_curve(tmp_path, monkeypatch):
    """Each record renders its selection at every budget of the curve; at the run's own budget that is the run's
    context. The report's by_max_tokens agrees with the records."""
    from memcompile_langgraph.cli import main
    from memcompile_langgraph.eval import question

    monkeypatch.setattr(question, "BUDGET_CURVE", (400, 120, 60))  # the mini file's contexts are ~400 tokens
    out = tmp_path / "out"
    assert main(["eval", "locomo", str(LOCOMO_MINI), "--out", str(out), "--max-tokens", "120", "--quiet"]) == 0
    records = [json.loads(x) for x in next(out.glob("results-A0-*.jsonl")).read_text().splitlines()]
    for r in records:
        b = r["budget"]
        assert set(b["by_max_tokens"]) == {"400", "120", "60"}
        assert b["by_max_tokens"]["120"] == {"tokens": b["tokens"], "coverage": b["coverage"]}
        assert b["by_max_tokens"]["60"]["tokens"] <= b["by_max_tokens"]["120"]["tokens"] <= r["tokens"]["bundle"]
    budget = json.loads((out / "report.json").read_text())["overall"]["budget"]
    covered = [r["budget"] for r in records if r["budget"]["coverage"] is not None]
    for b, point in budget["by_max_tokens"].items():
        mean = sum(c["by_max_tokens"][b]["coverage"] for c in covered) / len(covered)
        assert point["answer_coverage"] == pytest.approx(mean, abs=1e-6)
        assert point["coverage_kept"] == pytest.approx(mean / budget["answer_coverage_whole"], abs=1e-5)
    assert budget["by_max_tokens"]["120"]["answer_coverage"] == budget["answer_coverage"]
    assert budget["by_max_tokens"]["60"]["coverage_kept"] < budget["by_max_tokens"]["400"]["coverage_kept"]
    assert "| 120 tokens |" in (out / "report.md").read_text()
