import math

import pytest

from memcompile_langgraph.address.cells import CellLayout
from memcompile_langgraph.address.routing import route
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.records import Intent
from memcompile_langgraph.text import terms
from tests.test_cells import desc

CFG = MemCompileConfig()


def layout_of(spec):
    layout = CellLayout(CFG)
    for i, (cell, kws, people) in enumerate(spec):
        layout.place(desc(i, kws, people, n=10), cell)
    return layout


def intent(q, people=()):
    return Intent(query=q, people=tuple(people), terms=tuple(terms(q)))


def test_relative_floor_stops_a_redundant_second_cell():
    layout = layout_of([("c1", ["pottery"], ["Tom"]), ("c2", ["pottery", "mug"], ["Tom"]), ("c3", ["marathon"], ["Priya"])])
    r = route(layout, intent("pottery", ["Tom"]), [], CFG)
    density = 0.03 * math.log(2) / math.log(13)
    assert [c.cell_id for c in r.opened] == ["c1"]
    assert r.opened[0].base == pytest.approx(2 + 2.2 + 0.7 + density)
    assert r.pool == 2  # c3 scores only density < 0.08 and is not admitted
    assert r.stop == "relative utility < floor"


def test_cumulative_utility_stops_after_covering_ninety_percent():
    layout = layout_of([("c1", ["pottery"], []), ("c2", ["pottery"], []), ("c3", ["pottery"], [])])
    # three equal Cells, identical metadata -> second has R=1: adjusted 0.55u >= 0.68u fails
    r = route(layout, intent("pottery"), [], CFG)
    assert len(r.opened) == 1
    layout = layout_of([("c1", ["pottery"], []), ("c2", ["potteries"], [])])  # same terms, distinct metadata
    r = route(layout, intent("pottery"), [], CFG)
    assert [c.cell_id for c in r.opened] == ["c1", "c2"]
    assert r.stop == "cumulative utility"


def test_six_cell_cap():
    layout = layout_of([(f"c{i}", [f"pottery k{i}"], []) for i in range(9)])
    r = route(layout, intent("pottery"), [], CFG)
    assert len(r.opened) == 6 and r.stop == "cell cap"


def test_negative_marginal_gain_stops():
    cfg = CFG.with_overrides(route_open_cost=2.0)
    layout = layout_of([("c1", ["pottery"], []), ("c2", ["potteries"], [])])
    r = route(layout, intent("pottery"), [], cfg)
    assert len(r.opened) == 1 and r.stop == "marginal gain < 0"


def test_seed_cells_enter_the_pool_and_admission_applies():
    layout = layout_of([("c1", ["x"], []), ("c2", ["pottery"], [])])
    r = route(layout, intent("pottery"), ["c1"], CFG)
    assert r.pool == 1  # the seed Cell has no overlap: u = density < 0.08, not admitted
    temporal = Intent(query="when", terms=tuple(terms("pottery")), temporal=True)
    layout.cells["c1"].has_time = True
    layout.timed.add("c1")
    assert route(layout, temporal, [], CFG).pool == 2
