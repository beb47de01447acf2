"""Diminishing-benefit Cell routing: Algorithm 3 with Eq. 5, 22-23 (App. B.3)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from ..config import MemCompileConfig
from ..records import Cell, Intent
from ..text import jaccard, terms
from .cells import CellLayout


@dataclass(frozen=True, slots=True)
class RoutedCell:
    cell_id: str
    base: float  # u(c,q), Eq. 22
    redundancy: float  # R(c, O_t)
    adjusted: float  # u(c,q)(1 - lambda_R R)
    gain: float  # g(c | O_t, q), Eq. 23


@dataclass(frozen=True, slots=True)
class Routing:
    opened: tuple[RoutedCell, ...]
    pool: int  # |V| after admission and the 36-Cell cut
    stop: str  # why opening ended


def cell_relevance(cell: Cell, key_terms: set[str], q_terms: set[str], q_people: set[str], temporal: bool, cfg: MemCompileConfig) -> float:
    """u(c,q), Eq. 22."""
    density = cfg.route_density * math.log(1 + len(cell)) / math.log(1 + cfg.cell_item_capacity)
    return (
        cfg.route_w_keyword * jaccard(q_terms, key_terms)
        + cfg.route_w_person * jaccard(q_people, cell.people)
        + cfg.route_w_title * jaccard(q_terms, set(terms(cell.title)))
        + (cfg.route_temporal if temporal and cell.has_time else 0.0)
        + density
    )


def _reachable(layout: CellLayout, intent: Intent, seed_cells: Iterable[str]) -> set[str]:
    """Cells whose u can reach the admission floor: seeds, metadata overlap, and timed Cells for temporal queries.

    Any other Cell scores only the density term (<= 0.03 < 0.08) and is excluded by admission anyway.
    """
    ids = set(seed_cells)
    for t in intent.terms:
        ids |= layout.route_terms.get(t, set())
    for p in intent.people:
        ids |= layout.route_people.get(p, set())
    if intent.temporal:
        ids |= layout.timed
    return ids


def route(layout: CellLayout, intent: Intent, seed_cells: Iterable[str], cfg: MemCompileConfig) -> Routing:
    q_terms, q_people = set(intent.terms), set(intent.people)
    scored = []
    for cid in _reachable(layout, intent, seed_cells):
        cell = layout.cells[cid]
        u = cell_relevance(cell, layout.key_terms.get(cid, set()), q_terms, q_people, intent.temporal, cfg)
        if u >= cfg.route_admission:
            scored.append((u, cell))
    scored.sort(key=lambda uc: (-uc[0], uc[1].seq))
    pool = scored[: cfg.route_pool_size]
    positive = sum(u for u, _ in pool if u > 0)

    opened: list[RoutedCell] = []
    covered: set[str] = set()
    cumulative, best, stop = 0.0, 0.0, "pool exhausted"
    for u, cell in pool:
        meta = cell.people | cell.keywords
        redundancy = jaccard(meta, covered) if opened else 0.0
        adjusted = u * (1 - cfg.route_lambda * redundancy)
        gain = adjusted - cfg.route_open_cost * (1 + len(opened)) - cfg.route_token_cost * cell.tokens
        if len(opened) >= cfg.route_cells_min:
            if gain < 0:
                stop = "marginal gain < 0"
                break
            if adjusted < cfg.route_relative_floor * best:
                stop = "relative utility < floor"
                break
        opened.append(RoutedCell(cell.cell_id, u, redundancy, adjusted, gain))
        covered |= meta
        cumulative += adjusted
        best = max(best, adjusted)
        if len(opened) >= cfg.route_cells_max:
            stop = "cell cap"
            break
        if positive > 0 and cumulative >= cfg.route_cumulative * positive:
            stop = "cumulative utility"
            break
    return Routing(tuple(opened), len(pool), stop)
