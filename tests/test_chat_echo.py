"""A chat agent's memory holds what was said, not its own echo: the README's chat agent run again and again on one
store keeps the user's fact first, once, with no question above it, and stores no stubs of its own replies."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from langchain_core.messages import AIMessage
from support.paths import ROOT
from test_readme_blocks import readme_blocks

from memcompile_langgraph.evidence.repeats import newest_copies, statements_first
from memcompile_langgraph.integrations.memory_nodes import QUOTED_KEY, SCRIPTED_KEY, is_recall_message, own_words

FACT = "I adopted a beagle named Biscuit."
QUESTION = "What is my dog's name?"


def readme_chat_block() -> str:
    """The README's "Memory nodes for a chat agent" block, as written."""
    blocks = readme_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    return next(b.code for b in blocks if b.lang == "python" and "mem.remember_node" in b.code)


def run_readme_block(code: str) -> list:
    """One run of the block as a script is (its own MemCompile on ./.memcompile), closed after; its last state."""
    namespace: dict = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    namespace["mem"].close()
    return namespace["out"]["messages"]


def stored_turns(user: str = "tom") -> list:
    from memcompile_langgraph import MemCompile

    mem = MemCompile("./.memcompile", dense=False)
    try:
        return [t.packet for t in mem.turns(user)]
    finally:
        mem.close()


def test_ten_runs_of_the_readme_chat_agent_recall_the_fact_once_and_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = readme_chat_block()
    assert FACT in code and QUESTION in code  # the block this test is about
    for _ in range(10):
        messages = run_readme_block(code)
    recalled = next(m for m in messages if is_recall_message(m))
    shown = re.findall(r"^\[([^\]]+)\] ", recalled.text, re.M)  # the blocks' dia_ids, in rank order
    turns = stored_turns()
    said = {p.dia_id: p for p in turns}
    facts = [p.dia_id for p in turns if p.text == FACT]
    assert len(facts) == 10  # every run said it again
    assert [dia for dia in shown if dia in facts] == [facts[-1]]  # once, the newest copy standing for the rest
    assert shown[0] == facts[-1]  # first: no question above it
    assert [said[dia].text for dia in shown].count(QUESTION) <= 1
    # the replies are the agent's words, not stubs: the quoting answers and the acknowledgements stored nothing
    assert [p.speaker for p in turns] == ["Tom"] * 20, [p.text for p in turns if p.speaker != "Tom"]
    assert messages[-1].text.startswith(f"From memory [{facts[-1]}]")


def test_after_delete_turns_nothing_stored_points_at_the_deleted_turn(tmp_path, monkeypatch):
    from memcompile_langgraph import MemCompile

    monkeypatch.chdir(tmp_path)
    code = readme_chat_block()
    for _ in range(2):
        run_readme_block(code)
    facts = [p.dia_id for p in stored_turns() if p.text == FACT]
    mem = MemCompile("./.memcompile", dense=False)
    try:
        assert mem.delete_turns("tom", facts) == 2
    finally:
        mem.close()
    left = stored_turns()
    assert left and not [p.text for p in left if any(dia in p.text for dia in facts)]


def test_a_reply_is_stored_as_its_own_words_and_its_quotes_left_to_their_sources():
    shown = {"m-1a", "D1:3"}
    whole = AIMessage("From memory [m-1a], quoted: Tom adopted a beagle.", response_metadata={QUOTED_KEY: ["m-1a"]})
    assert own_words(whole, shown) == ""
    mixed = AIMessage("Your beagle is Biscuit [m-1a, D1:3]. Shall I remind you of his vet visit? It was [D1:3].")
    assert own_words(mixed, shown) == "Shall I remind you of his vet visit?"
    assert own_words(AIMessage("Noted, I will remember that.", response_metadata={SCRIPTED_KEY: True}), shown) == ""
    own = AIMessage("Congratulations on Biscuit! [D9:9] is new to me.")
    assert own_words(own, shown) == own.text  # an id the model was not shown is its own words


@pytest.mark.parametrize("dense", [False, True])
def test_copies_of_a_turn_take_one_slot_and_questions_come_after_statements(make_mem, dense):
    turns = []
    for run in range(6):
        turns += [
            {"speaker": "Ana", "text": "My cat Miso loves the garden.", "dia_id": f"D{run}:1"},
            {"speaker": "Ana", "text": "What is my cat called?", "dia_id": f"D{run}:2"},
        ]
    turns += [{"speaker": "Ana", "text": f"I planted {n} tulips by the fence.", "dia_id": f"T{n}"} for n in range(3)]
    mem = make_mem(turns=turns, user_id="ana", dense=dense)
    ctx = mem.compile("What is my cat called?", user_id="ana")
    texts = [mem.index("ana").packets[p.packet_id].text for p in ctx.packets]
    assert texts.count("My cat Miso loves the garden.") == 1 and texts.count("What is my cat called?") == 1
    assert "D5:1" in ctx.dia_ids  # the newest copy stands for the rest
    assert texts.index("What is my cat called?") > max(i for i, t in enumerate(texts) if not t.endswith("?"))


def test_newest_copies_and_statements_first(make_mem):
    mem = make_mem(
        turns=[
            {"speaker": "Ana", "text": "I  like tea.", "dia_id": "a"},
            {"speaker": "Bo", "text": "I like tea.", "dia_id": "b"},
            {"speaker": "Ana", "text": "i like TEA.", "dia_id": "c"},
            {"speaker": "Ana", "text": "Do you like tea?", "dia_id": "d"},
        ],
        user_id="ana",
        dense=False,
    )
    index = mem.index("ana")
    pid = {index.packets[p].dia_id: p for p in index.packet_order}
    stands = newest_copies(index, [pid["a"], pid["b"], pid["c"]])
    assert stands == {pid["a"]: pid["c"], pid["b"]: pid["b"], pid["c"]: pid["c"]}  # another speaker's is not a copy
    assert statements_first(index, [pid["d"], pid["a"], pid["b"]]) == [pid["a"], pid["b"], pid["d"]]
