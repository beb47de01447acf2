"""Offline evidence fusion: the packet score the deterministic scheduler and frontier order by.

Not in the paper, which leaves packet selection to an LLM. Without a model, the normalized pool is scored
by a z-score sum of two packet-level signals — BM25 over each packet's claim bundle with its preceding turn,
and the cosine of the enriched query with the packet document — plus support from the adjacent turns of
the same session and a bonus for turns spoken by a person the query names. The closed pool is the
normalization of the address candidates (Eq. 9) joined by the top packet-level BM25 hits and D_q, ordered by
that score and cut to a budget.
"""
from __future__ import annotations

import numpy as np

from ..config import MemCompileConfig
from ..index import UserIndex
from ..records import DenseHit, Intent, PacketScore
from ..address.candidates import lexical_query


def zscore(x: np.ndarray) -> np.ndarray:
    sd = float(x.std()) if len(x) else 0.0
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def neighbor_support(x: np.ndarray, sessions: np.ndarray, prev_w: float, next_w: float) -> np.ndarray:
    """x plus weighted positive scores of the turn before and after, within one session."""
    same = sessions[1:] == sessions[:-1]
    pos = np.maximum(x, 0.0)
    out = x.copy()
    out[1:] += prev_w * np.where(same, pos[:-1], 0.0)
    out[:-1] += next_w * np.where(same, pos[1:], 0.0)
    return out


def fused_scores(index: UserIndex, intent: Intent, query_vector: list[float] | None, cfg: MemCompileConfig) -> tuple[np.ndarray, np.ndarray]:
    """(fused score, packet-level BM25 score) per packet, aligned with index.packet_order."""
    n = len(index.packet_order)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    lexical = index.packet_bm25.scores(lexical_query(intent))
    signal = cfg.fusion_lexical * zscore(lexical)
    if query_vector is not None and len(index.vectors) == n:
        sims = index.vectors.similarities(np.asarray(query_vector, dtype=np.float32))
        rows = np.fromiter((index.vectors.row[p] for p in index.packet_order), dtype=np.int64, count=n)
        signal = signal + cfg.fusion_dense * zscore(sims[rows].astype(np.float64))
    signal = neighbor_support(signal, index.session_array(), cfg.fusion_previous, cfg.fusion_next)
    if intent.people:
        named = index.speaker_mask(intent.people)
        signal = signal + cfg.fusion_speaker * named / len(intent.people)
    return signal, lexical


def fused_pool(
    pool: list[PacketScore], dense: list[DenseHit], fused: np.ndarray, lexical: np.ndarray, index: UserIndex, cfg: MemCompileConfig
) -> list[PacketScore]:
    """U_q joined by lexical and dense proposals, ordered by fused score (ties: address order), cut to the budget."""
    pos = index.packet_position
    address = {p.packet_id: p for p in pool}
    hits = [int(i) for i in np.argsort(-lexical, kind="stable")[: cfg.pool_lexical_top] if lexical[i] > 0]
    proposals = [*(h.packet_id for h in dense if h.packet_id in pos), *(index.packet_order[i] for i in hits)]
    union = list(dict.fromkeys([*address, *proposals]))
    rank = {pid: i for i, pid in enumerate(union)}
    union.sort(key=lambda pid: (-fused[pos[pid]], rank[pid]))
    out = []
    for pid in union[: cfg.pool_budget]:
        base = address.get(pid)
        rep = base.representative if base else index.by_packet[pid][0].descriptor_id
        out.append(
            PacketScore(
                packet_id=pid,
                score=float(fused[pos[pid]]),
                representative=rep,
                first_position=base.first_position if base else len(pool) + rank[pid],
                support=base.support if base else 0.0,
                cells=base.cells if base else (),
            )
        )
    return out
