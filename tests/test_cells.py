import math
import random

import pytest

from memcompile_langgraph.address.cells import CellLayout, add_to_cell, feasible, new_cell_score, placement_terms
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.model import Cell, Descriptor

CFG = MemCompileConfig()


def desc(i, keywords=(), people=(), session=1, dia=None, n=10, negated=False):
    return Descriptor(
        descriptor_id=f"d{i}",
        packet_id=f"p{i}",
        claim=f"claim {i}",
        dia_id=dia or f"D{session}:{i}",
        speaker="S",
        session=session,
        session_time=None,
        people=tuple(people),
        keywords=tuple(keywords),
        event_time="",
        interaction_time="",
        n_tokens=n,
        seq=i,
        negated=negated,
    )


def cell_with(*ds):
    c = Cell("c0", 0)
    for d in ds:
        add_to_cell(c, d, CFG)
    return c


def test_placement_terms_hand_computed():
    d1 = desc(1, ["pottery class"], ["Tom"], session=2, dia="D2:1", n=10)
    d2 = desc(2, ["pottery class", "mug"], ["Tom"], session=2, dia="D2:3", n=8)
    t = placement_terms(cell_with(d1), d2, [d1], CFG)
    assert t.locality == pytest.approx(math.log(3))
    assert t.coherence == pytest.approx(0.45 * 0.5 + 0.35 * 1 + 0.20 * 1)
    assert t.inconsistency == 0
    h_new = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert t.pressure == pytest.approx(8 / 350 + 0.4 * h_new)
    assert t.score == pytest.approx(math.log(3) + 1.4 * 0.775 - 0.45 * (8 / 350 + 0.4 * h_new))


def test_new_cell_score_and_time_term():
    assert new_cell_score(desc(1, n=8), CFG) == pytest.approx(1.4 * 0.55 - 0.45 * (0.65 + 8 / 360))
    d1 = desc(1, ["a"], ["X"], session=1)
    far = desc(2, ["a"], ["X"], session=5)
    near = desc(3, ["a"], ["X"], session=2)  # j_max + 1 is still inside, Eq. 17
    c = cell_with(d1)
    assert placement_terms(c, near, [d1], CFG).coherence - placement_terms(
        c, far, [d1], CFG
    ).coherence == pytest.approx(0.2 * 0.75)


def test_inconsistency_needs_shared_person_and_keyword_and_one_negation():
    d1 = desc(1, ["wine"], ["Ann"])
    c = cell_with(d1)
    assert placement_terms(c, desc(2, ["wine"], ["Ann"], negated=True), [d1], CFG).inconsistency == 0.45
    assert placement_terms(c, desc(3, ["wine"], ["Bob"], negated=True), [d1], CFG).inconsistency == 0
    assert placement_terms(c, desc(4, ["wine"], ["Ann"]), [d1], CFG).inconsistency == 0


def test_fill_and_entropy_pressure_terms():
    members = [desc(i, [f"k{i}"], [f"P{i}"], session=i, dia="D1:1") for i in range(1, 7)]
    c = cell_with(*members)
    d = desc(9, ["z"], ["Q"], session=6)
    t = placement_terms(c, d, members, CFG)
    h = math.log(6) + math.log(6) + 0.2 * math.log(1 + 5) + 5 / 6
    h_new = math.log(7) + math.log(7) + 0.2 * math.log(1 + 5) + 5 / 7
    coh = 0.20
    expected = 10 / (360 - 60) + 0.4 * (h_new - h) + 0.25 * max(0, 7 / 12 - coh) + 0.25 * (h - 1.8)
    assert t.pressure == pytest.approx(expected)


def test_feasibility_caps():
    full = cell_with(*[desc(i, n=1) for i in range(12)])
    assert not feasible(full, desc(99, n=1), CFG)
    heavy = cell_with(desc(1, n=355))
    assert not feasible(heavy, desc(2, n=6), CFG)
    assert feasible(heavy, desc(3, n=5), CFG)


def test_related_descriptor_joins_unrelated_one_opens_a_cell():
    layout = CellLayout(CFG)
    a = layout.place(desc(1, ["pottery class"], ["Tom"]))
    assert layout.place(desc(2, ["pottery class", "mug"], ["Tom"])) == a
    assert layout.place(desc(3, ["marathon"], ["Priya"])) != a
    assert len(layout) == 2


def test_no_overlap_bound_holds():
    rng = random.Random(5)
    for i in range(300):
        members = [
            desc(
                j, [f"k{rng.randint(0, 9)}"], [f"P{rng.randint(0, 3)}"], session=rng.randint(1, 9), n=rng.randint(1, 30)
            )
            for j in range(rng.randint(1, 11))
        ]
        c = cell_with(*members)
        d = desc(1000 + i, ["other"], ["Nobody"], session=rng.randint(1, 9), n=rng.randint(1, 40))
        if feasible(c, d, CFG):
            assert placement_terms(c, d, members, CFG).score < new_cell_score(d, CFG)


class DirectScan(CellLayout):
    def candidates(self, d):
        return sorted(self.cells.values(), key=lambda c: c.seq)


def test_indexed_placement_equals_direct_scan():
    rng = random.Random(11)
    fast, slow = CellLayout(CFG), DirectScan(CFG)
    for i in range(1500):
        session = 1 + i // 60
        d = desc(
            i,
            keywords=rng.sample([f"k{x}" for x in range(40)], rng.randint(0, 4)),
            people=rng.sample(["Ann", "Bob", "Cy", "Dee", "Eve"], rng.randint(0, 2)),
            session=session,
            dia=f"D{session}:{i % 7}",
            n=rng.randint(3, 60),
            negated=rng.random() < 0.1,
        )
        assert fast.place(d) == slow.place(d)
    assert len(fast) == len(slow) > 10
