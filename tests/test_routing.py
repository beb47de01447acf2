import math
import random
from dataclasses import replace

import pytest

from memcompile_langgraph.address.cells import CellLayout
from memcompile_langgraph.address.routing import admitted_pool, route
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.model import Intent
from memcompile_langgraph.text.terms import jaccard, terms
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
    layout = layout_of(
        [("c1", ["pottery"], ["Tom"]), ("c2", ["pottery", "mug"], ["Tom"]), ("c3", ["marathon"], ["Priya"])]
    )
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
    layout.place(replace(desc(9, ["x"], []), event_time="2024-05-01"), "c1")
    assert route(layout, temporal, [], CFG).pool == 2


def direct_pool(layout, intent, seeds, cfg):
    """Reference: Eq. 22 scored Cell by Cell with set Jaccard, reachable + admitted, sorted, cut to the pool."""
    q_terms, q_people = set(intent.terms), set(intent.people)
    scored = []
    for cell in layout.cells.values():
        key_terms = {t for d in layout.members[cell.cell_id] for k in d.keywords for t in terms(k)}
        density = cfg.route_density * math.log(1 + len(cell)) / math.log(1 + cfg.cell_item_capacity)
        u = (
            cfg.route_w_keyword * jaccard(q_terms, key_terms)
            + cfg.route_w_person * jaccard(q_people, cell.people)
            + cfg.route_w_title * jaccard(q_terms, set(terms(cell.title)))
            + (cfg.route_temporal if intent.temporal and cell.has_time else 0.0)
            + density
        )
        reach = (
            cell.cell_id in seeds
            or key_terms & q_terms
            or cell.people & q_people
            or (intent.temporal and cell.has_time)
        )
        if reach and u >= cfg.route_admission:
            scored.append((u, cell.cell_id))
    scored.sort(key=lambda uc: (-uc[0], layout.cells[uc[1]].seq))
    return scored[: cfg.route_pool_size]


def _pools_equal_direct_scan(layout, cfg, vocab, names, rng, queries=200):
    cells = list(layout.cells)
    for _ in range(queries):
        words = rng.sample(vocab, rng.randint(0, 4))
        q = Intent(
            query="q",
            people=tuple(rng.sample(names, rng.randint(0, 2))),
            terms=tuple(t for w in words for t in terms(w)),
            temporal=rng.random() < 0.4,
        )
        seeds = rng.sample(cells, rng.randint(0, 8))
        fast = [(u, c.cell_id) for u, c in admitted_pool(layout, q, seeds, cfg)]
        assert fast == direct_pool(layout, q, seeds, cfg)  # same Cells, same order, bit-identical u


@pytest.mark.parametrize("forks", [(), (300,), (300, 600)])
@pytest.mark.parametrize("cfg", [CFG, CFG.with_overrides(route_admission=0.0, route_w_title=1.3, cell_item_capacity=5)])
def test_vectorized_pool_equals_direct_scan(cfg, forks):
    """Also across forks (and a fork of a fork): a fork extends shared posting maps and cached arrays copy-on-write,
    and every layout forked from (read before and after) keeps answering for its own Cells."""
    rng, queries = random.Random(3), random.Random(4)
    layout, parents = CellLayout(cfg), []
    vocab = [f"word{i}" for i in range(60)] + ["pottery class", "mugs", "mug"]
    names = ["Ann", "Bob", "Cy", "Dee", "Eve", "Fay"]
    for i in range(900):
        if i in forks:
            _pools_equal_direct_scan(layout, cfg, vocab, names, queries, 50)  # fills the caches the fork shares
            parents.append(layout)
            layout = layout.fork()
        d = desc(
            i,
            rng.sample(vocab, rng.randint(0, 4)),
            rng.sample(names, rng.randint(0, 2)),
            session=1 + i // 40,
            n=rng.randint(3, 50),
        )
        layout.place(replace(d, event_time="2024-01-02" if rng.random() < 0.2 else ""))
    _pools_equal_direct_scan(layout, cfg, vocab, names, queries)
    for parent in parents:
        assert len(parent.route) == len(parent.cells) < len(layout.cells)
        _pools_equal_direct_scan(parent, cfg, vocab, names, queries, 50)
