"""Context budget in tokens (evidence/budget.py): tokens go to the units of highest value (a packet's lead, then its
query-bearing lines, weighted by rank), never over the budget, monotone in the budget, one marker line of its own."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_eval_data import LOCOMO_MINI

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.eval.locomo import load_locomo
from memcompile_langgraph.eval.metrics import answer_coverage
from memcompile_langgraph.evidence.budget import MARKER_RESERVE, Block, fit, validate_max_tokens
from memcompile_langgraph.evidence.render import fit_context
from memcompile_langgraph.integrations.retriever import packet_documents
from memcompile_langgraph.text.terms import count_tokens

LONG = Block(
    "[D1:1] Assistant | 2024-03-15 | session 1",
    tuple(f"- Step {i}: configure module {i} with its blueprint and tests." for i in range(40))
    + ("- The PostgreSQL pool should hold 20 connections for the dashboard API.",),
)
SHORT = Block("[D1:0] User | 2024-03-15 | session 1", ("- User is building a budget tracker with Flask.",))
MARKER = re.compile(r"^\[\.\.\. .* to fit the token budget\]$")
FRAGMENT_END = re.compile(r" \[\.\.\. \d+ more characters\]")


def test_contexts_that_fit_are_unchanged():
    whole = (LONG.text(), SHORT.text())
    for budget in (None, 10_000):
        kept = fit([LONG, SHORT], "pool connections", budget, count_tokens)
        assert kept.blocks == whole and kept.shown == (True, True) and kept.cut == (False, False)
        assert kept.text() == "\n\n".join(whole)


def test_a_lower_packets_best_line_comes_before_a_higher_packets_filler():
    kept = fit([LONG, SHORT], "How many connections should the PostgreSQL pool hold?", 120, count_tokens)
    assert kept.shown == (True, True) and kept.cut == (True, False)  # the short packet whole, the long one cut
    top = kept.blocks[0].split("\n")
    assert top[0] == LONG.header and "- The PostgreSQL pool should hold 20 connections for the dashboard API." in top
    assert top[1:] == [x for x in LONG.lines if x in top[1:]]  # the packet's own order
    assert kept.blocks[1] == SHORT.text()
    text = kept.text()
    assert text.endswith("\n\n[... 1 packet cut short to fit the token budget]")  # a line of its own, no bullet
    assert count_tokens(text) <= 120


def test_the_claim_that_selected_a_packet_is_kept_first():
    lead = Block(LONG.header, LONG.lines, lead=7)
    out = fit([lead], "PostgreSQL pool", 70, count_tokens).blocks[0].split("\n")
    assert LONG.lines[7] in out and LONG.lines[-1] in out
    assert LONG.lines[7] not in fit([LONG], "PostgreSQL pool", 70, count_tokens).blocks[0].split("\n")


def test_a_line_repeating_what_the_context_holds_comes_after_a_new_one():
    said = "- Assistant said: the pool holds 20 connections for the dashboard API, the nightly report workers and the admin console."
    new = "- Assistant said: backups of the ledger run every night and are kept for a month."
    block = Block(LONG.header, (said, said.replace("said:", "added:"), new))
    room = count_tokens("\n".join([block.header, block.lines[0], block.lines[2]])) + MARKER_RESERVE
    assert count_tokens(block.lines[1]) >= count_tokens(block.lines[2])  # the repeat would fit wherever the new did
    out = fit([block], "", room, count_tokens).blocks[0].split("\n")
    assert out == [block.header, block.lines[0], block.lines[2]]


def test_a_one_line_packet_is_cut_to_sentences_and_a_long_sentence_to_its_start():
    raw = Block(
        "[D1:1] Assistant | 2024-03-15 | session 1",
        ("- " + " ".join(f"Sentence {i} is about topic {i}." for i in range(60)) + " The pool holds 20 connections.",),
    )
    kept = fit([raw], "pool connections", 60, count_tokens)
    out = kept.blocks[0].split("\n")
    assert out[1].startswith("- ") and "The pool holds 20 connections." in out[1]
    assert kept.text().endswith("[... 1 packet cut short to fit the token budget]")
    prose = Block(SHORT.header, ("- " + " ".join(f"word{i}" for i in range(300)),))
    cut = fit([prose, SHORT], "word7", 80, count_tokens)
    assert cut.shown == (True, False) and cut.blocks[0].split("\n")[1].startswith("- word0 word1 word2 ")
    assert re.search(r"word\d+ \[\.\.\. \d+ more characters\]$", cut.blocks[0].split("\n")[1])  # cut at a word
    assert count_tokens(cut.text()) <= 80


body = st.text(alphabet="abc xyz0123", max_size=60)


@st.composite
def contexts(draw):
    """Blocks whose every unit (a line, or a sentence of a one-line block) starts with its own tag "tRxK"."""
    out = []
    for r in range(draw(st.integers(1, 12))):
        n = draw(st.integers(0, 10))
        units = [f"t{r}x{k} {draw(body)}".strip() for k in range(n)]
        if draw(st.booleans()) and n:  # one line of sentences
            lines: tuple[str, ...] = ("- " + " ".join(u + "." for u in units),)
        else:
            lines = tuple("- " + u for u in units)
        notes = draw(st.lists(st.just("- [superseded on t by [D2:1]: 3 replaces 2 stated here on t]"), max_size=1))
        lead = draw(st.one_of(st.none(), st.integers(0, 11)))
        out.append(Block(f"[D1:{r}] A | t | session 1", lines, tuple(notes), lead))
    return out


TAG = re.compile(r"\bt(\d+)x(\d+)\b")


def kept_units(block: Block, shown: str | None) -> tuple[set[int], set[int]]:
    """(units kept whole, units kept as a start) of a block as the budget showed it."""
    if shown is None:
        return set(), set()
    lines = shown.split("\n")
    body = "\n".join(lines[1 : len(lines) - len(block.notes)])
    tags = list(TAG.finditer(body))
    whole, start = set(), set()
    for m, after in zip(tags, [*tags[1:], None]):
        piece = body[m.start() : after.start() if after else len(body)]
        (start if FRAGMENT_END.search(piece) else whole).add(int(m.group(2)))
    return whole, start


def lead_of(block: Block) -> int | None:
    return block.lead if len(block.lines) > 1 and block.lead is not None and block.lead < len(block.lines) else None


@settings(max_examples=300, deadline=None)
@given(bs=contexts(), budget=st.integers(1, 600), more=st.integers(1, 300), query=st.text("abct0x1 ", max_size=30))
def test_any_context_is_spent_by_value_within_the_budget_and_monotone(bs, budget, more, query):
    whole = "\n\n".join(b.text() for b in bs)
    kept = fit(bs, query, budget, count_tokens)
    if count_tokens(whole) <= budget:
        assert kept.text() == whole and all(kept.shown)
        return
    text = kept.text()
    assert count_tokens(text) <= budget
    n = sum(kept.shown)
    assert kept.shown == (True,) * n + (False,) * (len(bs) - n)  # the packets shown are the first ones
    parts = text.split("\n\n") if text else []
    assert parts[:n] == list(kept.blocks[:n]) and (not n or MARKER.match(parts[-1]))  # then the marker, alone
    assert not any(MARKER.match(x) for p in parts[:-1] for x in p.split("\n"))
    units = [kept_units(b, s) for b, s in zip(bs, kept.blocks)]
    for i, (b, shown) in enumerate(zip(bs, kept.blocks)):
        if shown is None:
            continue
        assert shown.split("\n")[0] == b.header and shown.endswith("\n".join(("", *b.notes)))
        assert kept.cut[i] == (units[i][0] != set(range(len(b.units))))
        lead = lead_of(b)
        if lead is not None and lead not in units[i][0]:  # the lead is cut: no lower packet keeps a non-lead unit
            for j in range(i + 1, len(bs)):
                assert len(units[j][0] | units[j][1]) <= 1 and (
                    lead_of(bs[j]) is None or units[j][0] <= {lead_of(bs[j])}
                )
    larger = fit(bs, query, budget + more, count_tokens)
    for (w, s), (lw, ls) in zip(units, (kept_units(b, x) for b, x in zip(bs, larger.blocks))):
        assert w <= lw and s <= lw | ls  # a larger budget keeps no less of any packet


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
    shown_before = 0
    for budget in (100, 150, 200, 300, 400):
        ctx = demo.compile(query, user_id="demo", max_tokens=budget)
        assert "a beagle named Biscuit." in ctx.text and count_tokens(ctx.text) <= budget
        assert ("to fit the token budget]" in ctx.text) == (count_tokens(full.text) > budget)
        assert ctx.dia_ids == full.dia_ids
        shown = [p for p in ctx.packets if p.shown]
        assert shown == ctx.packets[: len(shown)] and len(shown) >= shown_before  # a larger budget shows no fewer
        shown_before = len(shown)
        docs = packet_documents(demo, "demo", ctx)  # the retriever's documents: the blocks the budget kept
        kept = ctx.text.rpartition("\n\n[... ")[0] if "to fit the token budget]" in ctx.text else ctx.text
        assert "\n\n".join(d.page_content for d in docs) == kept
        assert [d.metadata["dia_id"] for d in docs] == [p.dia_id for p in shown]


def test_the_result_marks_the_packets_the_text_shows(demo):
    """At a small budget the packets the budget left out are not marked shown; the marker is a line of its own."""
    ctx = demo.compile("What kind of dog did Tom adopt?", user_id="demo", max_tokens=60)
    headers = {line.split("]")[0][1:] for line in ctx.text.split("\n") if line.startswith("[D")}
    assert [p.shown for p in ctx.packets] == [p.dia_id in headers for p in ctx.packets]
    assert not all(p.shown for p in ctx.packets) and ctx.packets[0].shown
    last = ctx.text.split("\n\n")[-1]
    assert MARKER.match(last) and "\n" not in last and not last.startswith("- ")
    whole = demo.compile("What kind of dog did Tom adopt?", user_id="demo", max_tokens=None)
    assert all(p.shown for p in whole.packets) and not MARKER.match(whole.text.split("\n")[-1])


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
                assert ctx.text == fit_context(index, pids).text()  # no budget at all
                small = mem.compile(q.question, user_id=d.user_id, max_tokens=30)
                assert [p.dia_id for p in small.packets] == ctx.dia_ids  # the selection stays whole
        with pytest.raises(ValueError, match="max_tokens"):
            mem.compile("Where does Priya work?", user_id="mini-1", max_tokens=0)
    finally:
        mem.close()


def test_coverage_counts_the_answer_terms_the_gold_turns_hold():
    """The budget's measure: of the answer's terms, those the gold turns' own text holds (what a context can carry)."""
    answer, context = "a beagle named Biscuit, in May", "Tom has a beagle."
    assert answer_coverage(answer, context) == pytest.approx(1 / 4)  # "may" is in no turn
    assert answer_coverage(answer, context, held="Tom adopted a beagle named Biscuit.") == pytest.approx(1 / 3)
    assert answer_coverage(answer, context, held="Tom adopted a dog.") is None


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
