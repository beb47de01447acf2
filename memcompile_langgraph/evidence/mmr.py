"""Deterministic packet scheduler: the diagnostic dialogue-level MMR of App. B.3 over the closed pool."""

from __future__ import annotations

import math

from ..address.intent import addressed_speakers
from ..config import MemCompileConfig
from ..text.terms import jaccard
from .frontier import complement_order, fusion_order
from .scheduler import ScheduleInput
from .spread import session_round_robin, spans_history, speaker_first


def mmr_select(inp: ScheduleInput, k: int, cfg: MemCompileConfig) -> list[str]:
    """Greedy MMR: rel + 0.10 log(1 + support) - 0.58 max overlap - 0.08 per selected same-Cell representative."""
    index = inp.index
    items = []
    for p in inp.pool:
        pos = index.position[p.representative]
        rel = p.score + cfg.mmr_support * math.log1p(p.support)
        terms = frozenset(index.claim_terms[pos])
        items.append((p.packet_id, rel, terms, index.layout.of_descriptor.get(p.representative)))
    chosen: list[tuple[str, float, frozenset, str | None]] = []
    remaining = items
    while remaining and len(chosen) < k:
        best, best_score = 0, -math.inf
        for i, (_, rel, toks, cell) in enumerate(remaining):
            overlap = max((jaccard(toks, c[2]) for c in chosen), default=0.0)
            same_cell = sum(1 for c in chosen if cell is not None and c[3] == cell)
            s = rel - cfg.mmr_duplicate * overlap - cfg.mmr_same_cell * same_cell
            if s > best_score:
                best, best_score = i, s
        chosen.append(remaining.pop(best))
    return [c[0] for c in chosen]


def offline_anchors(inp: ScheduleInput, k: int, cfg: MemCompileConfig) -> list[str]:
    """Deterministic A_0 (offline, A2/A3, and the LLM scheduler's fill): with fusion the fused pool's top-K0 (it is
    in score order; a question about the whole history takes them round-robin over sessions, evidence/spread.py);
    without, the App. B.3 MMR Top-K0 that Table 2 uses for A2/A3."""
    if cfg.fusion:
        ranked = [p.packet_id for p in inp.pool]
        if cfg.spread_depth and spans_history(inp.query):
            packets = inp.index.packets
            if cfg.spread_speaker:
                who = addressed_speakers(inp.query, cfg.self_speaker, cfg.assistant_speaker)
                ranked = speaker_first(ranked, [packets[p].speaker for p in ranked], who)
            sessions = [packets[p].session for p in ranked[: cfg.spread_depth]]
            # some of the frontier's K_Delta slots go to the spread (its order would fill them from one session)
            spread_k = k + min(cfg.spread_frontier_slots, cfg.frontier_append_cap)
            return session_round_robin(ranked, sessions, spread_k, cfg.spread_depth)
        return ranked[:k]
    return mmr_select(inp, k, cfg)


class DeterministicScheduler:
    """The offline default: no model, same closed-pool contract as the LLM scheduler."""

    def __init__(self, cfg: MemCompileConfig):
        self.cfg = cfg

    def schedule(self, inp: ScheduleInput, k: int) -> list[str]:
        return offline_anchors(inp, k, self.cfg)

    def frontier(self, inp: ScheduleInput, anchors: list[str], window: list[str]) -> list[str]:
        if not self.cfg.offline_frontier:  # the paper's LLM-free path (A2): the anchors alone, nothing admitted
            return list(anchors)
        if self.cfg.fusion and inp.scores:
            return complement_order(anchors, window, inp.scores)
        return fusion_order(anchors, inp.dense, window)  # engineering: reciprocal-rank fusion, no paper counterpart
