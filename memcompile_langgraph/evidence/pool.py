"""The closed pool the packet scheduler sees (Sec. 3.4.1), as the profile chooses it.

Paper (fusion off): U_q, the complete source-normalized pool in Eq. 10 order, with no score map. Default (fusion
on): U_q joined by D_q and the best fused packets, in fused order, cut to pool_budget, with the fused score of every
packet of that pool and of D_q (what the offline frontier orders by); a pool reader (evidence/reader.py), when one
is loaded, re-scores and reorders that pool and D_q."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..config import MemCompileConfig
from ..index.user import UserIndex
from ..model import Candidate, DenseHit, Intent, PacketScore
from .fusion import fused_pool, fused_scores
from .normalize import normalize
from .reader import PoolReader, read


def closed_pool(
    index: UserIndex,
    intent: Intent,
    candidates: list[Candidate],
    dense: list[DenseHit],
    query_vectors: Sequence[Sequence[float]],
    cfg: MemCompileConfig,
    similarities=None,
    reader: PoolReader | None = None,
    said: Callable[[str], bool] | None = None,
) -> tuple[list[PacketScore], dict[str, float], int]:
    """(pool, fused scores, |U_q|); with a reader, the pool in its order and its scores. `said`: the packets that
    may enter (a query as of a past time: what had been said by then), every packet when None."""
    pool = normalize(candidates, index.layout.of_descriptor)
    if not cfg.fusion:
        return pool, {}, len(pool)
    signals: dict[str, Any] | None = {} if reader is not None else None
    fused = fused_scores(index, intent, pool, list(query_vectors), cfg, similarities, signals)
    if said is not None:  # a later packet never takes a place of the pool, so the pool stays full
        fused = np.where([said(pid) for pid in index.packet_order], fused, -np.inf)
    joined = fused_pool(pool, dense, fused, index, cfg)
    if said is not None:
        joined = [p for p in joined if said(p.packet_id)]
    if reader is not None and signals is not None:
        joined, scores = read(reader, index, intent, joined, dense, fused, pool, signals, cfg)
        return joined, scores, len(pool)
    window = [p.packet_id for p in joined] + [h.packet_id for h in dense if h.packet_id in index.packet_position]
    return joined, {pid: float(fused[index.packet_position[pid]]) for pid in window}, len(pool)
