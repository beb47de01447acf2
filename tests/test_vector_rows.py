"""The vector row of each packet is kept as packets and vectors arrive, in any order and across forks: it always
equals what a full pass over the packets would make, and a fork's writes never show in the snapshot it came from."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.index.user import UserIndex
from memcompile_langgraph.model import SourcePacket

DIM = 4


def packet(k: int) -> SourcePacket:
    return SourcePacket(f"p{k}", "u", f"D1:{k}", "Ann", 1, "session 1", None, "", f"turn {k}", k)


def expected(index: UserIndex) -> list[int]:
    return [index.vectors.row.get(p, -1) for p in index.packet_order]


# a step: add packets, set vectors of some packets (held or not yet held, new or made again), or fork
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 5)),
        st.tuples(st.just("vectors"), st.lists(st.integers(0, 30), min_size=1, max_size=6)),
        st.tuples(st.just("fork"), st.just(0)),
        st.tuples(st.just("clear"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(STEPS)
def test_vector_rows_equal_a_full_pass_after_any_steps(steps):
    index = UserIndex("u", MemCompileConfig())
    added = 0
    published: list[tuple[UserIndex, list[int], bytes]] = []
    for kind, arg in steps:
        if kind == "add":
            for _ in range(arg):
                index.add_packet(packet(added))
                added += 1
        elif kind == "vectors":
            ids = [f"p{k}" for k in arg]
            index.set_vectors(ids, np.arange(len(ids) * DIM, dtype=np.float32).reshape(len(ids), DIM))
        elif kind == "clear":
            index.clear_vectors()
        else:
            published.append((index, expected(index), index.vector_rows().tobytes()))
            index = index.fork()
        assert index.vector_rows().tolist() == expected(index)
    for snapshot, rows, raw in published:  # what was published before a fork is as it was
        assert snapshot.vector_rows().tolist() == rows
        assert snapshot.vector_rows().tobytes() == raw


def test_a_vector_set_before_its_packet_is_held_gets_its_row_when_the_packet_comes():
    index = UserIndex("u", MemCompileConfig())
    index.set_vectors(["p0"], np.ones((1, DIM), dtype=np.float32))
    assert index.vector_rows().tolist() == []
    index.add_packet(packet(0))
    assert index.vector_rows().tolist() == [0]
