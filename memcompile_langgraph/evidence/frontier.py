"""Anchor-preserving bounded frontier: Eq. 12-14."""

from __future__ import annotations

from ..model import DenseHit


def frontier_window(anchors: list[str], dense: list[DenseHit]) -> list[str]:
    """W_q = A_0 U D_q (Eq. 12), anchors first, then dense proposals in similarity order."""
    return list(dict.fromkeys([*anchors, *(h.packet_id for h in dense)]))


def admit(anchors: list[str], order: list[str], rank_cutoff: int, append_cap: int) -> list[str]:
    """Delta = First_{K_delta}(sigma[1:K_R] minus A_0) (Eq. 13); E_q = A_0 followed by Delta (Eq. 14)."""
    anchor_set = set(anchors)
    delta = [p for p in dict.fromkeys(order[:rank_cutoff]) if p not in anchor_set][:append_cap]
    return [*anchors, *delta]


def fusion_order(anchors: list[str], dense: list[DenseHit], window: list[str], k: int = 60) -> list[str]:
    """Offline sigma_q with fusion off (engineering, not in the paper, whose LLM-free path has no frontier):
    reciprocal-rank fusion of the anchor order and the dense order; ties keep window order."""
    score = {p: 0.0 for p in window}
    for rank, p in enumerate(anchors):
        score[p] += 1.0 / (k + rank + 1)
    for rank, h in enumerate(dense):
        if h.packet_id in score:
            score[h.packet_id] += 1.0 / (k + rank + 1)
    position = {p: i for i, p in enumerate(window)}
    return sorted(window, key=lambda p: (-score[p], position[p]))


def complement_order(anchors: list[str], window: list[str], scores: dict[str, float]) -> list[str]:
    """Offline sigma_q over fused scores: what the anchors miss first (best first), the anchors last."""
    anchor_set = set(anchors)
    position = {p: i for i, p in enumerate(window)}
    fresh = sorted(
        (p for p in window if p not in anchor_set), key=lambda p: (-scores.get(p, float("-inf")), position[p])
    )
    return [*fresh, *anchors]
