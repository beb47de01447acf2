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
from ..address.dense import QuerySimilarities, query_similarities, top_positions
from ..address.intent import addressed_speakers
from ..config import MemCompileConfig
from ..index.user import UserIndex
from ..model import DenseHit, Intent, PacketScore


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


# The fused score is a model over named signals whose weights are the config fields of these names: a weighted sum
# of the base signals, plus neighbour support from the base sum of the adjacent turns, plus the bonuses, plus the
# feedback pass. A fitted model (evidence/fusion_model.py) is another set of these weights.
BASE_SIGNALS = ("fusion_lexical", "fusion_passage", "fusion_address", "fusion_dense", "fusion_dense_question")
NEIGHBOUR_WEIGHTS = ("fusion_previous", "fusion_next")
BONUS_SIGNALS = (
    "fusion_asking",
    "fusion_recency",
    "fusion_temporal",
    "fusion_date",
    "fusion_speaker",
    "fusion_addressed",
)
FEEDBACK_WEIGHT = "fusion_feedback"
FUSION_WEIGHTS = (*BASE_SIGNALS, *NEIGHBOUR_WEIGHTS, *BONUS_SIGNALS, FEEDBACK_WEIGHT)


def fusion_signals(
    index: UserIndex,
    intent: Intent,
    address: list[PacketScore],
    query_vectors: Sequence[Sequence[float]],
    cfg: MemCompileConfig,
    similarities: QuerySimilarities | None = None,
    every: bool = False,
) -> dict[str, np.ndarray]:
    """Weight name -> the signal it multiplies, one value per packet (index.packet_order), signed so that more is
    better; only the signals with a non-zero weight in cfg are computed (every: all that apply to this query)."""
    n = len(index.packet_order)
    want = lambda name: every or bool(getattr(cfg, name))  # noqa: E731
    query = lexical_query(intent)
    out: dict[str, np.ndarray] = {}
    if want("fusion_lexical"):
        out["fusion_lexical"] = zscore(index.packet_bm25.scores(query))
    if want("fusion_passage"):
        claims = index.claim_packet_array()
        best = best_claim_scores(index.bm25.scores(query), claims, n)
        if cfg.fusion_passage_min_claims:  # long packets only: a short one's best claim is its bundle
            best = np.where(np.bincount(claims, minlength=n)[:n] >= cfg.fusion_passage_min_claims, best, 0.0)
        out["fusion_passage"] = zscore(best)
    if address and want("fusion_address"):
        s_pq = np.zeros(n)
        for p in address:
            s_pq[index.packet_position[p.packet_id]] = p.score
        out["fusion_address"] = zscore(s_pq)
    rows = index.vector_rows()
    if query_vectors and len(index.vectors) == n and (rows >= 0).all():
        arrays = query_similarities(index.vectors, query_vectors, similarities).arrays
        for name, sims in zip(("fusion_dense", "fusion_dense_question"), arrays):
            if want(name):
                out[name] = zscore(sims[rows].astype(np.float64))
    if want("fusion_asking"):
        out["fusion_asking"] = -index.asking_array()  # a penalty: its weight is what is taken off
    if want("fusion_recency") and n > 1:
        out["fusion_recency"] = np.arange(n) / (n - 1)
    if intent.temporal and want("fusion_temporal"):
        out["fusion_temporal"] = index.timed_array()
    if intent.time and want("fusion_date"):
        out["fusion_date"] = index.dated_array(intent.time)
    if intent.people and want("fusion_speaker"):
        out["fusion_speaker"] = index.speaker_mask(intent.people) / len(intent.people)
    addressed = addressed_speakers(intent.query, cfg.self_speaker, cfg.assistant_speaker)
    if addressed and want("fusion_addressed"):
        out["fusion_addressed"] = index.speaker_mask(addressed) / len(addressed)
    return out


def combine(signals: dict[str, np.ndarray], weights: dict[str, float], sessions: np.ndarray) -> np.ndarray:
    """The fused score before feedback: base sum, neighbour support within the session, bonuses."""
    base = np.zeros(len(sessions))
    for name in BASE_SIGNALS:
        if name in signals:
            base = base + weights[name] * signals[name]
    signal = neighbor_support(base, sessions, weights["fusion_previous"], weights["fusion_next"])
    for name in BONUS_SIGNALS:
        if name in signals:
            signal = signal + weights[name] * signals[name]
    return signal


def feedback_signal(index: UserIndex, intent: Intent, signal: np.ndarray, cfg: MemCompileConfig) -> np.ndarray | None:
    """z(BM25 of the feedback terms) taken from the best packets by `signal`; None when feedback does not apply."""
    if len(signal) < cfg.feedback_min_packets:
        return None
    query = lexical_query(intent)
    top = top_positions(signal, cfg.feedback_packets)
    expansion = feedback_terms(index, top, set(query), cfg.feedback_terms)
    return zscore(index.packet_bm25.scores(expansion)) if expansion else None


def weights_of(cfg: MemCompileConfig) -> dict[str, float]:
    return {name: float(getattr(cfg, name)) for name in FUSION_WEIGHTS}


def fused_scores(
    index: UserIndex,
    intent: Intent,
    address: list[PacketScore],
    query_vectors: Sequence[Sequence[float]],
    cfg: MemCompileConfig,
    similarities: QuerySimilarities | None = None,
    keep: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """One fused score per packet, aligned with index.packet_order; query_vectors = [e(q+), e(q)] or fewer, whose
    similarity arrays the dense stage already computed (`similarities`, recomputed only if the matrix changed).
    `keep`: filled with every signal that applies to the query, weighted or not (what the pool reader reads)."""
    n = len(index.packet_order)
    if n == 0:
        return np.zeros(0)
    signals = fusion_signals(index, intent, address, query_vectors, cfg, similarities, every=keep is not None)
    if keep is not None:
        keep.update(signals)
    signal = combine(signals, weights_of(cfg), index.session_array())
    if cfg.fusion_feedback:  # from the final ranking (the addressed speaker's)
        expansion = feedback_signal(index, intent, signal, cfg)
        if expansion is not None:
            signal = signal + cfg.fusion_feedback * expansion
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
