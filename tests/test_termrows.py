"""TermRows: a descriptor's term set is a run of codes into one table, read back as the tuple it was given; forks
share it and never see each other's rows; a snapshot file's rows load as they were."""

import threading
import tracemalloc

import numpy as np
import pytest

from memcompile_langgraph.index.termrows import TermRows

ROWS = [("trip", "kayak"), (), ("dog",), ("trip", "dog", "paint")]


def test_rows_read_back_as_the_tuples_given():
    rows = TermRows()
    rows.extend(ROWS[:2])
    rows.extend(ROWS[2:])
    assert len(rows) == 4 and list(rows) == ROWS and rows == ROWS
    assert rows[0] == ("trip", "kayak") and rows[1] == () and rows[-1] == ROWS[-1]
    assert rows[1:3] == ROWS[1:3]
    assert rows.table.strings == ["trip", "kayak", "dog", "paint"]  # one entry per distinct term
    with pytest.raises(IndexError):
        rows[4]


def test_a_fork_and_its_source_grow_apart():
    source = TermRows()
    source.extend(ROWS[:2])
    left, right = source.fork(), source.fork()
    left.extend([("left", "trip")])
    right.extend([("right",), ("dog",)])
    assert list(source) == ROWS[:2]
    assert list(left) == [*ROWS[:2], ("left", "trip")]
    assert list(right) == [*ROWS[:2], ("right",), ("dog",)]
    source.extend([("source",)])  # the snapshot's own appends do not show in a fork that wrote further
    assert list(source) == [*ROWS[:2], ("source",)] and list(right)[2:] == [("right",), ("dog",)]


def test_forks_writing_at_once_keep_their_own_rows():
    source = TermRows()
    forks = [source.fork() for _ in range(4)]

    def write(k: int) -> None:
        forks[k].extend([(f"t{k}-{i}", "shared") for i in range(300)])

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, fork in enumerate(forks):
        assert list(fork) == [(f"t{k}-{i}", "shared") for i in range(300)]
    assert len(source) == 0


def test_loaded_rows_keep_only_the_terms_they_name():
    strings = ["speaker", "trip", "2022-05-01", "dog", "kayak"]
    codes = np.array([1, 4, 3, 1, 3], dtype=np.int32)
    rows = TermRows.of(strings, codes, np.array([0, 2, 2, 3, 5]))
    assert list(rows) == [("trip", "kayak"), (), ("dog",), ("trip", "dog")]
    assert sorted(rows.table.strings) == ["dog", "kayak", "trip"]
    grown = rows.fork()
    grown.extend([("kayak", "new")])
    assert grown[-1] == ("kayak", "new") and len(rows) == 4
    assert rows.flat()[0] == ["trip", "kayak", "dog", "trip", "dog"]


def test_a_row_costs_its_codes_not_a_tuple():
    rows = [tuple(f"term{(i * 7 + k) % 500}" for k in range(6)) for i in range(20000)]
    column = TermRows()
    column.extend(rows[:10])  # the table's terms and the arrays' first blocks
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    column.extend(rows[10:])
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert column == rows
    assert held / len(rows) < 60  # 6 codes and an offset, with the arrays' spare room; tuples took ~100 bytes
