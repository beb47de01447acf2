"""Lexical channel and multi-channel candidate union: Eq. 6-7 with the BM25 mapping of App. B.3."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..config import MemCompileConfig
from ..index.user import UserIndex
from ..model import Candidate, Intent
from ..text.terms import jaccard, terms
from .routing import Routing


def lexical_query(intent: Intent) -> list[str]:
    """Query terms augmented by the intent's people (App. A.1: intent fields augment the lexical query)."""
    extra = [t for p in intent.people for t in terms(p) if t not in intent.terms]
    return list(intent.terms) + extra


def bm25_top(index: UserIndex, intent: Intent, cfg: MemCompileConfig) -> list[tuple[int, float]]:
    """BM25(q): the top 96 descriptors by raw BM25Okapi score, as (position, score)."""
    return index.bm25.top(lexical_query(intent), cfg.bm25_top)


def normalized_bm25(hits: list[tuple[int, float]]) -> dict[int, float]:
    """b_i = 2 log(1+s_i) / log(1+s_max), App. B.3."""
    if not hits:
        return {}
    top = math.log1p(max(s for _, s in hits))
    return {pos: (2 * math.log1p(s) / top if top > 0 else 0.0) for pos, s in hits}


def candidate_scorer(index: UserIndex, intent: Intent, cfg: MemCompileConfig) -> Callable[[int, float], float]:
    """r_i, Eq. 7, as a function of (descriptor position, b_i); the query's term and people sets are made once."""
    q_terms, q_people = set(intent.terms), set(intent.people)

    def score(pos: int, b: float) -> float:
        d = index.descriptors[pos]
        temporal = 1.0 if intent.temporal and d.event_time else 0.0
        return (
            cfg.alpha_f * jaccard(q_terms, index.claim_terms[pos])
            + cfg.alpha_k * jaccard(q_terms, index.key_terms[pos])
            + cfg.alpha_p * (jaccard(q_people, set(d.people)) if q_people else 0.0)
            + cfg.alpha_t * temporal
            + cfg.alpha_b * b
        )

    return score


def candidate_union(
    index: UserIndex, intent: Intent, hits: list[tuple[int, float]], routing: Routing, cfg: MemCompileConfig
) -> list[Candidate]:
    """K_q = claims of opened Cells U BM25(q) (Eq. 6), reordered by r_i; channel identities kept."""
    b = normalized_bm25(hits)
    channels: dict[int, list[str]] = {}
    for pos, _ in hits:
        channels.setdefault(pos, []).append("bm25")
    for rc in routing.opened:
        for did in index.layout.cells[rc.cell_id].descriptor_ids:
            channels.setdefault(index.position[did], []).append(f"cell:{rc.cell_id}")
    out, score = [], candidate_scorer(index, intent, cfg)
    for position, (pos, chans) in enumerate(channels.items()):
        d = index.descriptors[pos]
        bi = b.get(pos, 0.0)
        out.append(Candidate(d.descriptor_id, d.packet_id, score(pos, bi), bi, tuple(chans), position))
    out.sort(key=lambda c: (-c.score, c.position))
    return out
