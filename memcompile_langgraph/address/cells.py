"""Bounded Cell placement: Algorithm 2 with Eq. 3, 17-21 (App. B.2).

Only Cells that share a person or keyword with the descriptor are scored. Any other feasible Cell has
L=0, J_K=J_P=0, so C <= 0.20 and E >= n/r_c >= n/B_C; its score is at most
1.4*0.20 - 0.45*n/B_C = 0.28 - 0.45n/B_C, strictly below the new-Cell score
1.4*0.55 - 0.45*(0.65 + n/B_C) = 0.4775 - 0.45n/B_C. It can never win, so skipping it leaves the
argmax of the direct scan unchanged (tests compare both).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from itertools import repeat

import numpy as np

from ..config import MemCompileConfig
from ..index.payload import FormatError, Reader, Writer, inverse, pick, strings_column
from ..index.persistent import Forkable
from ..model import Cell, Descriptor, from_columns
from ..text.terms import jaccard
from .routing import RouteIndex

COUNTED = ("keyword_counts", "person_counts", "dia_counts")  # Cell Counters, stored as ragged keys and counts


@dataclass(frozen=True, slots=True)
class PlacementTerms:
    locality: float  # L, Eq. 19
    coherence: float  # C, Eq. 18
    inconsistency: float  # X
    pressure: float  # E, Eq. 21
    score: float


def entropy(counts: Counter) -> float:
    total = sum(counts.values())
    if total <= 0:
        return 0.0
    return -sum((v / total) * math.log(v / total) for v in counts.values() if v > 0)


def cell_entropy(
    keywords: Counter,
    people: Counter,
    smin: int | None,
    smax: int | None,
    dias: Counter,
    size: int,
    cfg: MemCompileConfig,
) -> float:
    """H(c), Eq. 20."""
    if size == 0:
        return 0.0
    span = cfg.span_penalty * math.log(1 + (smax - smin)) if smin is not None and smax is not None else 0.0
    repeated = sum(max(0, n - 1) for n in dias.values()) / size
    return entropy(keywords) + entropy(people) + span + repeated


def _entropy_with(cell: Cell, d: Descriptor, cfg: MemCompileConfig) -> float:
    keywords = cell.keyword_counts + Counter(d.keywords)
    people = cell.person_counts + Counter(d.people)
    dias = cell.dia_counts + Counter([d.dia_id])
    smin = d.session if cell.session_min is None else min(cell.session_min, d.session)
    smax = d.session if cell.session_max is None else max(cell.session_max, d.session)
    return cell_entropy(keywords, people, smin, smax, dias, len(cell) + 1, cfg)


def feasible(cell: Cell, d: Descriptor, cfg: MemCompileConfig) -> bool:
    """Eq. 3."""
    return cell.tokens + d.n_tokens <= cfg.cell_token_capacity and len(cell) < cfg.cell_item_capacity


def coherence(cell: Cell, d: Descriptor, cfg: MemCompileConfig) -> float:
    """C(i,c), Eq. 17-18."""
    in_range = (
        cell.session_min is not None
        and cell.session_max is not None
        and cell.session_min <= d.session <= cell.session_max + 1
    )
    t = 1.0 if in_range else cfg.time_outside_session
    return (
        cfg.coherence_keyword * jaccard(set(d.keywords), cell.keywords)
        + cfg.coherence_person * jaccard(set(d.people), cell.people)
        + cfg.coherence_time * t
    )


def inconsistency(cell: Cell, d: Descriptor, members: Iterable[Descriptor], cfg: MemCompileConfig) -> float:
    """X(i,c): a member shares a person and a keyword but only one side is negated."""
    people, keywords = set(d.people), set(d.keywords)
    for m in members:
        if m.negated != d.negated and people.intersection(m.people) and keywords.intersection(m.keywords):
            return cfg.inconsistency_penalty
    return 0.0


def placement_terms(cell: Cell, d: Descriptor, members: Iterable[Descriptor], cfg: MemCompileConfig) -> PlacementTerms:
    """S_place(i,c) = L + beta C - gamma X - eta E, Eq. 4 and 19-21."""
    shared = len(set(d.keywords) & cell.keywords) + len(set(d.people) & cell.people)
    loc = math.log(1 + shared)
    coh = coherence(cell, d, cfg)
    x = inconsistency(cell, d, members, cfg)
    h = cell_entropy(
        cell.keyword_counts, cell.person_counts, cell.session_min, cell.session_max, cell.dia_counts, len(cell), cfg
    )
    delta_h = max(0.0, _entropy_with(cell, d, cfg) - h)
    remaining = max(1, cfg.cell_token_capacity - cell.tokens)
    e = (
        d.n_tokens / remaining
        + cfg.pressure_entropy * delta_h
        + cfg.pressure_fill * max(0.0, (len(cell) + 1) / cfg.cell_item_capacity - coh)
        + cfg.pressure_over_entropy * max(0.0, h - cfg.entropy_threshold)
    )
    score = loc + cfg.place_beta * coh - cfg.place_gamma * x - cfg.place_eta * e
    return PlacementTerms(loc, coh, x, e, score)


def new_cell_score(d: Descriptor, cfg: MemCompileConfig) -> float:
    """Algorithm 2 line 8: L=0, C=0.55, X=0, E=0.65 + n/B_C."""
    return cfg.place_beta * cfg.new_cell_coherence - cfg.place_eta * (
        cfg.new_cell_pressure + d.n_tokens / cfg.cell_token_capacity
    )


def add_to_cell(cell: Cell, d: Descriptor, cfg: MemCompileConfig) -> None:
    """Algorithm 2 line 11: append and recompute tokens, people, keywords, sessions and title."""
    cell.descriptor_ids.append(d.descriptor_id)
    cell.tokens += d.n_tokens
    cell.keyword_counts.update(d.keywords)
    cell.person_counts.update(d.people)
    cell.dia_counts[d.dia_id] += 1
    cell.session_min = d.session if cell.session_min is None else min(cell.session_min, d.session)
    cell.session_max = d.session if cell.session_max is None else max(cell.session_max, d.session)
    cell.has_time = cell.has_time or bool(d.event_time)
    top = sorted(cell.keyword_counts.items(), key=lambda kv: (-kv[1], kv[0]))[: cfg.cell_title_keywords]
    cell.title = ", ".join(k for k, _ in top)


def _copy_cell(cell: Cell) -> Cell:
    return replace(
        cell,
        descriptor_ids=list(cell.descriptor_ids),
        keyword_counts=Counter(cell.keyword_counts),
        person_counts=Counter(cell.person_counts),
        dia_counts=Counter(cell.dia_counts),
    )


class CellLayout(Forkable):
    """The Cells of one user, with a person/keyword index over Cells that still have room. A fork shares the tables
    (persistent maps) and copies a Cell, its member list or an index set the first time it changes it."""

    SHARED = ("cells", "members", "of_descriptor", "_by_key", "_by_person")
    CHILDREN = ("route",)
    OWN = {"cells": _copy_cell, "members": list, "_by_key": set, "_by_person": set}

    def __init__(self, cfg: MemCompileConfig):
        self.cfg = cfg
        self.cells: dict[str, Cell] = {}
        self.members: dict[str, list[Descriptor]] = {}
        self.of_descriptor: dict[str, str] = {}
        self._by_key: dict[str, set[str]] = {}
        self._by_person: dict[str, set[str]] = {}
        self.route = RouteIndex()  # routing reads every Cell, full or not (Algorithm 3)
        self._next = 0

    def __len__(self) -> int:
        return len(self.cells)

    def _index(self, cell: Cell, d: Descriptor) -> None:
        cid = cell.cell_id
        for k in d.keywords:
            self._own("_by_key", k, set).add(cid)
        for p in d.people:
            self._own("_by_person", p, set).add(cid)
        self.route.add(cell, d)

    def _unindex_if_full(self, cell: Cell) -> None:
        # A Cell at item capacity can never be feasible again (Eq. 3); token room may still fit short claims.
        if len(cell) >= self.cfg.cell_item_capacity:
            for k in cell.keyword_counts:
                if k in self._by_key:
                    self._own("_by_key", k).discard(cell.cell_id)
            for p in cell.person_counts:
                if p in self._by_person:
                    self._own("_by_person", p).discard(cell.cell_id)

    def candidates(self, d: Descriptor) -> list[Cell]:
        ids: set[str] = set()
        for k in d.keywords:
            ids |= self._by_key.get(k, set())
        for p in d.people:
            ids |= self._by_person.get(p, set())
        return sorted((self.cells[i] for i in ids), key=lambda c: c.seq)

    def best(self, d: Descriptor, cells: Iterable[Cell]) -> tuple[Cell | None, float]:
        """argmax over feasible Cells and the new-Cell candidate; ties go to the earliest candidate."""
        best_cell, best_score = None, -math.inf
        for cell in cells:
            if not feasible(cell, d, self.cfg):
                continue
            s = placement_terms(cell, d, self.members[cell.cell_id], self.cfg).score
            if s > best_score:
                best_cell, best_score = cell, s
        fresh = new_cell_score(d, self.cfg)
        return (None, fresh) if fresh > best_score else (best_cell, best_score)

    def place(self, d: Descriptor, cell_id: str | None = None) -> str:
        """Place by Algorithm 2, or replay a stored placement when cell_id is given."""
        if cell_id is None:
            cell, _ = self.best(d, self.candidates(d))
        else:
            cell = self.cells.get(cell_id)
        if cell is None:
            while cell_id is None or cell_id in self.cells:
                cell_id = f"c{self._next:06d}"
                self._next += 1
            if cell_id[1:].isdigit():
                self._next = max(self._next, int(cell_id[1:]) + 1)
            cell = Cell(cell_id=cell_id, seq=len(self.cells))
            for name, value in (("cells", cell), ("members", [])):
                self._put(name, cell_id, value)
                self._adopt(name, cell_id)
        else:
            cell = self._own("cells", cell.cell_id)
        add_to_cell(cell, d, self.cfg)
        self._own("members", cell.cell_id).append(d)
        self._put("of_descriptor", d.descriptor_id, cell.cell_id)
        self._index(cell, d)
        self._unindex_if_full(cell)
        return cell.cell_id

    def encode(self, w: Writer, position: Mapping[str, int]) -> None:
        """Into a payload: the Cells as columns (members by descriptor position) and their routing."""
        cells = sorted(self.cells.values(), key=lambda c: c.seq)  # a persistent map iterates in hash order
        w.doc["layout"] = {
            "cell_id": [c.cell_id for c in cells],
            "title": [c.title for c in cells],
            "session_min": [c.session_min for c in cells],
            "session_max": [c.session_max for c in cells],
            "next": self._next,
        }
        w.ragged(
            "cells.descriptors",
            [c.descriptor_ids for c in cells],
            lambda ids: np.fromiter(map(position.__getitem__, ids), np.int32, len(ids)),
        )
        w.arrays["cells.tokens"] = np.fromiter((c.tokens for c in cells), np.int64, len(cells))
        w.arrays["cells.has_time"] = np.fromiter((c.has_time for c in cells), np.bool_, len(cells))
        for name in COUNTED:
            counters = [getattr(c, name) for c in cells]
            w.ragged(f"cells.{name}", [list(c) for c in counters], w.code)
            w.arrays[f"cells.{name}.counts"] = np.fromiter((v for c in counters for v in c.values()), np.int64)
        self.route.encode(w)  # its Cell numbers are the Cells' seq, the order of the Cells here

    @classmethod
    def decode(cls, r: Reader, cfg: MemCompileConfig, descriptors: list[Descriptor], ids: list[str]) -> CellLayout:
        """The layout `encode` wrote, over the descriptors (in position order, with their ids); else FormatError."""
        doc = r.value("layout", dict)
        cids = strings_column(doc, "cell_id", None)
        k, m = len(cids), len(descriptors)
        titles = strings_column(doc, "title", k)
        bounds = [doc.get(f"session_{e}") for e in ("min", "max")]
        if not all(isinstance(b, list) and len(b) == k and set(map(type, b)) <= {int, type(None)} for b in bounds):
            raise FormatError("session bounds")
        placed = r.array("cells.descriptors", np.int32, (None,), 0, m)
        if placed.size and np.bincount(placed).max() > 1:
            raise FormatError("a descriptor in two Cells")
        placed_list = placed.tolist()
        members = r.ragged("cells.descriptors", k, pick(descriptors, placed_list), list)
        descriptor_ids = r.ragged("cells.descriptors", k, pick(ids, placed_list), list)
        counters: dict[str, list[Counter[str]]] = {}
        for name in COUNTED:
            keys = r.texts(f"cells.{name}", None)
            counts = r.array(f"cells.{name}.counts", np.int64, (len(keys),), 1).tolist()
            dicts = list(map(dict, map(zip, r.ragged(f"cells.{name}", k, keys), r.ragged(f"cells.{name}", k, counts))))
            if sum(map(len, dicts)) != len(keys):
                raise FormatError(f"{name}: a key twice in one Cell")
            counters[name] = _counters(dicts)
        tokens = r.array("cells.tokens", np.int64, (k,), 0)
        has_time = r.array("cells.has_time", np.bool_, (k,))
        columns = {
            "cell_id": cids,
            "seq": list(range(k)),
            "descriptor_ids": descriptor_ids,
            "tokens": tokens.tolist(),
            "session_min": bounds[0],
            "session_max": bounds[1],
            "has_time": has_time.tolist(),
            "title": titles,
            **counters,
        }
        cells = from_columns(Cell, tuple(columns[f.name] for f in fields(Cell)))

        layout = cls(cfg)
        layout.cells = dict(zip(cids, cells))
        if len(layout.cells) != k:
            raise FormatError("duplicate Cell ids")
        layout.members = dict(zip(cids, members))
        sizes = np.diff(r.offsets("cells.descriptors", k, len(placed)))
        cell_of = np.full(m, -1, dtype=np.int64)
        cell_of[placed] = np.repeat(np.arange(k), sizes)
        held = np.flatnonzero(cell_of >= 0)
        layout.of_descriptor = dict(zip(pick(ids, held.tolist()), pick(cids, cell_of[held].tolist())))
        room = sizes < cfg.cell_item_capacity  # a full Cell leaves the candidate index (_unindex_if_full)
        layout._by_key = inverse(r, "cells.keyword_counts", k, cids, room)
        layout._by_person = inverse(r, "cells.person_counts", k, cids, room)
        layout._next = doc.get("next")
        if type(layout._next) is not int:
            raise FormatError("next Cell number")

        people = list(map(len, counters["person_counts"]))
        layout.route = RouteIndex.decode(r, cids, people, sizes, has_time)
        return layout


def _counters(dicts: list[dict]) -> list[Counter]:
    """Counters filled in C: Counter(d) runs Python code per Counter, and a large user has many Cells."""
    counters = list(map(dict.__new__, repeat(Counter, len(dicts))))
    deque(map(dict.update, counters, dicts), maxlen=0)
    return counters
