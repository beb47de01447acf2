"""Diminishing-benefit Cell routing: Algorithm 3 with Eq. 5, 22-23 (App. B.3).

u(c,q) of Eq. 22 is scored for every reachable Cell at once from per-Cell columns and posting lists
(RouteIndex), so a query costs a few array passes over the Cells instead of a Python loop per Cell.
Each column holds the exact integers the set-based Jaccard terms use and the arithmetic runs in the same
order in float64, so the scores and the pool equal the direct per-Cell computation (tests compare both).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..config import MemCompileConfig
from ..index.payload import FormatError, Reader, Writer, inverse
from ..index.persistent import Forkable
from ..model import Cell, Descriptor, Intent
from ..text.terms import jaccard, terms

if TYPE_CHECKING:
    from .cells import CellLayout

_EMPTY = np.zeros(0, dtype=np.int64)


@lru_cache(maxsize=65536)
def _term_set(text: str) -> frozenset[str]:
    """Terms of a keyword or Cell title; both repeat across descriptors, so they are stemmed once."""
    return frozenset(terms(text))


@lru_cache(maxsize=16)
def _density_table(density: float, capacity: int, rows: int) -> np.ndarray:
    cap = math.log(1 + capacity)
    return np.asarray([density * math.log(1 + n) / cap for n in range(rows)])


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


class _Postings(Forkable):
    """key -> Cell numbers holding it. A fork shares the map (persistent after the first fork, see
    index/persistent.py) and copies a key's set the first time it changes it."""

    SHARED = ("_cells",)
    OWN = {"_cells": set}

    def __init__(self) -> None:
        self._cells: dict[str, set[int]] = {}

    def add(self, key: str, cell_no: int) -> bool:
        """Adds the pair; False when the Cell already held the key (nothing changes, nothing is copied)."""
        cells = self._cells.get(key)
        if cells is not None and cell_no in cells:
            return False
        self._own("_cells", key, set).add(cell_no)
        return True

    def discard(self, key: str, cell_no: int) -> None:
        if key in self._cells:
            self._own("_cells", key).discard(cell_no)

    def get(self, key: str) -> np.ndarray:
        cells = self._cells.get(key)
        return np.fromiter(cells, dtype=np.int64, count=len(cells)) if cells else _EMPTY

    def count(self, keys: Iterable[str], n: int) -> np.ndarray:
        """|keys & features(c)| for every Cell c < n (keys distinct)."""
        out = np.zeros(n, dtype=np.int64)
        for k in keys:
            out[self.get(k)] += 1  # a Cell appears once per posting list
        return out


class RouteIndex(Forkable):
    """What Eq. 22 reads of every Cell, full or not: |key terms|, |people|, |title terms|, size, has_time. A fork
    shares the per-Cell lists (persistent after the first fork) and copies the 5 integers per Cell. A Cell's key
    terms are held once, in the key-term postings (a set per Cell beside them was as large as the postings)."""

    SHARED = ("ids", "_title_terms")
    COPIED = ("_cols",)
    CHILDREN = ("key_post", "people_post", "title_post")

    def __init__(self) -> None:
        self.ids: list[str] = []  # Cell number (= Cell.seq) -> id
        self._cols = np.zeros((5, 64), dtype=np.int64)  # rows: key terms, people, title terms, size, timed
        self._title_terms: list[frozenset[str]] = []
        self.key_post, self.people_post, self.title_post = _Postings(), _Postings(), _Postings()

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, cell: Cell, d: Descriptor) -> None:
        """Record d's features after add_to_cell(cell, d)."""
        no = cell.seq
        if no == len(self.ids):
            self._push("ids", cell.cell_id)
            self._push("_title_terms", frozenset())
            if no == self._cols.shape[1]:
                self._cols = np.concatenate([self._cols, np.zeros_like(self._cols)], axis=1)
        cols = self._cols
        for t in (t for k in d.keywords for t in _term_set(k)):
            cols[0, no] += self.key_post.add(t, no)
        for p in d.people:
            self.people_post.add(p, no)
        title = _term_set(cell.title)
        if title != self._title_terms[no]:
            for t in self._title_terms[no] - title:
                self.title_post.discard(t, no)
            for t in title - self._title_terms[no]:
                self.title_post.add(t, no)
            self._put("_title_terms", no, title)
        cols[1, no], cols[2, no], cols[3, no] = len(cell.person_counts), len(title), len(cell)
        cols[4, no] |= bool(d.event_time)

    def key_terms(self) -> list[set[str]]:
        """Each Cell's key terms (its keywords' terms), by Cell number."""
        out: list[set[str]] = [set() for _ in self.ids]
        for term, cells in self.key_post._cells.items():
            for no in cells:
                out[no].add(term)
        return out

    def encode(self, w: Writer) -> None:
        """Into a payload: each Cell's key terms and title terms (the rest is made again from the Cells)."""
        w.ragged("route.key_terms", [list(s) for s in self.key_terms()], w.code)
        w.ragged("route.title_terms", [list(s) for s in self._title_terms], w.code)

    @classmethod
    def decode(
        cls, r: Reader, cids: list[str], people: list[int], sizes: np.ndarray, has_time: np.ndarray
    ) -> RouteIndex:
        """The routing `encode` wrote for the Cells `cids` (with their number of people, sizes and timed flags)."""
        k = len(cids)
        route = cls()
        route.ids = list(cids)
        route._title_terms = r.ragged("route.title_terms", k, r.texts("route.title_terms", None), frozenset)
        route._cols = np.zeros((5, max(64, k)), dtype=np.int64)  # add() grows it by doubling
        route._cols[:, :k] = np.array(
            [
                np.diff(r.offsets("route.key_terms", k, len(r.codes("route.key_terms", None)))),
                people,
                list(map(len, route._title_terms)),
                sizes,
                has_time,
            ]
        )
        for name, source in (("key_post", "route.key_terms"), ("people_post", "cells.person_counts")):
            getattr(route, name)._cells = inverse(r, source, k)
        if sum(map(len, route.key_post._cells.values())) != route._cols[0, :k].sum():
            raise FormatError("a key term twice in one Cell")
        route.title_post._cells = inverse(r, "route.title_terms", k)
        return route

    def density(self, sizes: np.ndarray, cfg: MemCompileConfig) -> np.ndarray:
        """route_density * log(1+|c|) / log(1+M_C) by table, with math.log as in the scalar form."""
        rows = max(cfg.cell_item_capacity, int(sizes.max(initial=0))) + 1  # a replayed Cell may be fuller
        return _density_table(cfg.route_density, cfg.cell_item_capacity, rows)[sizes]

    def relevance(
        self, q_terms: set[str], q_people: set[str], temporal: bool, cfg: MemCompileConfig
    ) -> tuple[np.ndarray, np.ndarray]:
        """u(c,q) of Eq. 22 for every Cell, and which Cells share a key term or person with q (or are timed)."""
        n = len(self.ids)
        n_key, n_people, n_title, size, timed = self._cols[:, :n]
        inter_k = self.key_post.count(q_terms, n)
        inter_p = self.people_post.count(q_people, n)
        inter_t = self.title_post.count(q_terms, n)
        u = cfg.route_w_keyword * _jaccard(inter_k, len(q_terms), n_key)
        u = u + cfg.route_w_person * _jaccard(inter_p, len(q_people), n_people)
        u = u + cfg.route_w_title * _jaccard(inter_t, len(q_terms), n_title)
        u = u + (np.where(timed > 0, cfg.route_temporal, 0.0) if temporal else 0.0)
        u = u + self.density(size, cfg)
        reach = (inter_k > 0) | (inter_p > 0)
        if temporal:
            reach |= timed > 0
        return u, reach


def _jaccard(inter: np.ndarray, n_q: int, n_c: np.ndarray) -> np.ndarray:
    """|A & B| / |A | B| from counts; 0 without overlap (text.jaccard)."""
    out = np.zeros(len(inter))
    hit = inter > 0
    out[hit] = inter[hit] / (n_q + n_c[hit] - inter[hit])
    return out


def admitted_pool(
    layout: CellLayout, intent: Intent, seed_cells: Iterable[str], cfg: MemCompileConfig
) -> list[tuple[float, Cell]]:
    """V: reachable Cells with u >= the admission floor, best first (ties by Cell order), cut to the pool size.

    Reachable = seeds, Cells sharing a key term or person with q, and timed Cells for temporal queries; any
    other Cell scores only the density term (<= 0.03 < 0.08) and is excluded by admission anyway.
    """
    route = layout.route
    u, reach = route.relevance(set(intent.terms), set(intent.people), intent.temporal, cfg)
    for cid in seed_cells:
        reach[layout.cells[cid].seq] = True
    idx = np.flatnonzero(reach & (u >= cfg.route_admission))
    order = np.lexsort((idx, -u[idx]))[: cfg.route_pool_size]
    return [(float(u[i]), layout.cells[route.ids[i]]) for i in idx[order]]


def route(layout: CellLayout, intent: Intent, seed_cells: Iterable[str], cfg: MemCompileConfig) -> Routing:
    pool = admitted_pool(layout, intent, seed_cells, cfg)
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
