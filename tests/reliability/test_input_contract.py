"""Family 7: the input contract. Session labels are accepted (a stable number per label and user); remember_node
stores every message not stored yet; stats counts stored vectors without an embedding model."""

from __future__ import annotations

import itertools
import re

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.memory_nodes import turn_dia_id

from .strategies import any_unicode, examples

_users = itertools.count()
NUMBERED = re.compile(r"^(?:session[ _-]?)?(\d{1,9})$", re.I)


labels = st.one_of(
    st.sampled_from(["session_3", "2024-03-04 call", "Morning chat", "s\u00e9ance 2", "3", "session 7"]), any_unicode
)


@examples(20)
@given(first=st.lists(labels, min_size=1, max_size=8), second=st.lists(labels, min_size=1, max_size=8))
def test_session_labels_get_stable_numbers(make_mem, first, second):
    mem = make_mem(dense=False)
    user = f"s{next(_users)}"
    numbers: dict[str, int] = {}
    for call, batch in enumerate((first, second)):  # two calls: a label keeps its number across them
        turns = [
            {"speaker": "Ann", "text": f"turn {call}.{i} in {label!r}", "session": label}
            for i, label in enumerate(batch)
        ]
        counts = mem.add_turns(turns, user_id=user)
        skipped = counts.get("skipped_bad_session", 0)
        assert counts["stored"] + skipped == len(batch)
        index = mem.index(user)
        for p in index.packets.values():
            numbers.setdefault(p.session_label, p.session)
            assert numbers[p.session_label] == p.session  # one number per label
    free = {label: n for label, n in numbers.items() if not NUMBERED.match(label)}
    assert len(set(free.values())) == len(free)  # different labels, different sessions
    for label, n in numbers.items():
        if m := NUMBERED.match(label):
            assert n == int(m.group(1))  # "session_3" and "3" are session 3


def test_reported_labels(make_mem):
    mem = make_mem(dense=False)
    turns = [
        {"speaker": "Ann", "text": "we met in Lisbon", "session": "session_3"},
        {"speaker": "Bob", "text": "the call went well", "session": "2024-03-04 call"},
        {"speaker": "Ann", "text": "the call again", "session": "2024-03-04 call"},
    ]
    counts = mem.add_turns(turns, user_id="labels")
    assert counts["stored"] == 3 and not any(k.startswith("skipped") for k in counts)
    sessions = {p.text: p.session for p in mem.index("labels").packets.values()}
    assert sessions["we met in Lisbon"] == 3 and sessions["the call went well"] == sessions["the call again"] == 4


def _messages(n: int) -> list:
    kinds = (HumanMessage, AIMessage)
    return [kinds[i % 2](f"message {i} about kayak number {i}", id=f"m{i}") for i in range(n)]


@examples(20)
@given(n=st.integers(1, 10), data=st.data())
def test_remember_stores_every_message_not_stored_yet(make_mem, n, data):
    mem = make_mem(dense=False)
    messages = _messages(n)
    stored_before = data.draw(st.sets(st.integers(0, n - 1)))
    user = f"r{next(_users)}"
    config = {"configurable": {"user_id": user}}
    if stored_before:
        earlier = [
            {"speaker": "x", "text": messages[i].text, "dia_id": turn_dia_id(messages[i], i)} for i in stored_before
        ]
        mem.add_turns(earlier, user_id=user)
    mem.remember_node({"messages": messages}, config)
    if not any(isinstance(m, HumanMessage) for m in messages):
        return
    by_dia = mem.index(user).by_dia
    assert all(turn_dia_id(m, i) in by_dia for i, m in enumerate(messages))
    assert len(by_dia) == n  # and nothing twice


def test_stats_counts_vectors_without_an_embedding_model(tmp_path, embeddings):
    writer = MemCompile(tmp_path / "store", embeddings=embeddings)
    writer.add_turns([{"speaker": "Ann", "text": f"kayak note {i}"} for i in range(5)], user_id="v")
    writer.close()
    reader = MemCompile(tmp_path / "store", dense=False)
    stats = reader.stats("v")
    assert stats["packets"] == 5 and stats["vectors"] == 5
    reader.close()
