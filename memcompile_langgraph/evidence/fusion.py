"""Offline evidence fusion: the packet score the deterministic scheduler and frontier order by.

Not in the paper, which leaves packet selection to an LLM. Without a model, the normalized pool is scored
by a z-score sum of packet-level signals — BM25 over each packet's claim bundle with its adjacent turns, the
cosine of the enriched query (and of the bare question) with the packet document, and the address plane's
normalized score s(p,q) of Eq. 10 — plus support from the adjacent turns of
the same session, a bonus for turns spoken by a person the query names, and one for dated claims when the
query asks about time; last, a second lexical pass with terms the best packets share (pseudo-relevance
feedback: what the question leaves unsaid, e.g. the activity a "camping" question's answer calls "campfire"). The
closed pool is the
normalization of the address candidates (Eq. 9) joined by D_q and the best packets by this score, ordered by
it and cut to a budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..address.candidates import lexical_query
from ..address.dense import QuerySimilarities, top_positions
from ..address.intent import addressed_speakers
from ..config import MemCompileConfig
from ..index.user import UserIndex
from ..model import DenseHit, Intent, PacketScore
from ..text.timeparse import spans_overlap, time_span


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


def best_claim_scores(claim_scores: np.ndarray, claim_packets: np.ndarray, n: int) -> np.ndarray:
    """Per packet, the best score of one of its claims: a passage-level lexical score a long reply's many other
    sentences neither dilute (length normalization) nor inflate (many weak matches)."""
    out = np.zeros(n)
    if len(claim_scores):
        np.maximum.at(out, claim_packets[: len(claim_scores)], claim_scores)
    return out


def feedback_terms(index: UserIndex, top: np.ndarray, query: set[str], k: int) -> list[str]:
    """Pseudo-relevance feedback: terms not in the query that the query-matching claims of at least two of the `top`
    packets hold, by (packets holding them) x idf, at most k. Only claims sharing a query term count, so a long
    reply's other topics (code, lists) bring no terms."""
    count: dict[str, int] = {}
    for i in top:
        found: set[str] = set()
        for d in index.by_packet[index.packet_order[int(i)]]:
            claim = index.claim_terms[index.position[d.descriptor_id]]
            if not query.isdisjoint(claim):
                found.update(claim)
        for t in found - query:
            count[t] = count.get(t, 0) + 1
    shared = [t for t, c in count.items() if c >= 2]
    shared.sort(key=lambda t: (-count[t] * index.packet_bm25.idf(t), t))  # by term on ties: sets have no order
    return shared[:k]


def dated_array(index: UserIndex, asked: str) -> np.ndarray:
    """1.0 for packets about the time the question names ("on 1 May, 2022", "in April 2022"): said within it, or
    with a claim whose event time overlaps it ("yesterday" said on 2 May)."""
    out = np.zeros(len(index.packet_order))
    span = time_span(asked)
    if span is None:
        return out
    for i, packet_id in enumerate(index.packet_order):
        said = time_span(index.packets[packet_id].session_time or "")
        if said is not None and spans_overlap(said, span):
            out[i] = 1.0
            continue
        for d in index.by_packet[packet_id]:
            told = time_span(d.event_time) if d.event_time else None
            if told is not None and spans_overlap(told, span):
                out[i] = 1.0
                break
    return out


def fused_scores(
    index: UserIndex,
    intent: Intent,
    address: list[PacketScore],
    query_vectors: Sequence[Sequence[float]],
    cfg: MemCompileConfig,
    similarities: QuerySimilarities | None = None,
) -> np.ndarray:
    """One fused score per packet, aligned with index.packet_order; query_vectors = [e(q+), e(q)] or fewer, whose
    similarity arrays the dense stage already computed (`similarities`, recomputed only if the matrix changed)."""
    n = len(index.packet_order)
    if n == 0:
        return np.zeros(0)
    query = lexical_query(intent)
    signal = cfg.fusion_lexical * zscore(index.packet_bm25.scores(query))
    if cfg.fusion_passage:
        claims = index.claim_packet_array()
        best = best_claim_scores(index.bm25.scores(query), claims, n)
        if cfg.fusion_passage_min_claims:  # long packets only: a short one's best claim is its bundle
            best = np.where(np.bincount(claims, minlength=n)[:n] >= cfg.fusion_passage_min_claims, best, 0.0)
        signal = signal + cfg.fusion_passage * zscore(best)
    if address and cfg.fusion_address:
        s_pq = np.zeros(n)
        for p in address:
            s_pq[index.packet_position[p.packet_id]] = p.score
        signal = signal + cfg.fusion_address * zscore(s_pq)
    if query_vectors and len(index.vectors) == n:
        rows = index.vector_rows()
        arrays = index.vectors.query_similarities(query_vectors, similarities).arrays
        for weight, sims in zip((cfg.fusion_dense, cfg.fusion_dense_question), arrays):
            signal = signal + weight * zscore(sims[rows].astype(np.float64))
    signal = neighbor_support(signal, index.session_array(), cfg.fusion_previous, cfg.fusion_next)
    if cfg.fusion_asking:
        signal = signal - cfg.fusion_asking * index.asking_array()
    if cfg.fusion_recency and n > 1:
        signal = signal + cfg.fusion_recency * np.arange(n) / (n - 1)
    if intent.temporal:
        signal = signal + cfg.fusion_temporal * index.timed_array()
    if intent.time and cfg.fusion_date:
        signal = signal + cfg.fusion_date * dated_array(index, intent.time)
    if intent.people:
        named = index.speaker_mask(intent.people)
        signal = signal + cfg.fusion_speaker * named / len(intent.people)
    addressed = addressed_speakers(intent.query, cfg.self_speaker, cfg.assistant_speaker)
    if not cfg.fusion_addressed:
        addressed = ()
    if addressed:
        signal = signal + cfg.fusion_addressed * index.speaker_mask(addressed) / len(addressed)
    if cfg.fusion_feedback and n >= cfg.feedback_min_packets:  # from the final ranking (the addressed speaker's)
        top = top_positions(signal, cfg.feedback_packets)
        expansion = feedback_terms(index, top, set(query), cfg.feedback_terms)
        if expansion:
            signal = signal + cfg.fusion_feedback * zscore(index.packet_bm25.scores(expansion))
    return signal


def fused_pool(
    pool: list[PacketScore], dense: list[DenseHit], fused: np.ndarray, index: UserIndex, cfg: MemCompileConfig
) -> list[PacketScore]:
    """U_q joined by D_q and the best fused packets, ordered by fused score (ties: address order), cut to the budget."""
    pos = index.packet_position
    address = {p.packet_id: p for p in pool}
    best = top_positions(fused, cfg.pool_proposals)
    proposals = [*(h.packet_id for h in dense if h.packet_id in pos), *(index.packet_order[i] for i in best)]
    union = list(dict.fromkeys([*address, *proposals]))
    rank = {pid: i for i, pid in enumerate(union)}
    union.sort(key=lambda pid: (-fused[pos[pid]], rank[pid]))
    out = []
    for pid in union[: cfg.pool_budget]:
        base = address.get(pid)
        claims = index.by_packet[pid]  # a dense proposal may have none (a factless turn under the paper profile)
        rep = base.representative if base else (claims[0].descriptor_id if claims else "")
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
