"""The normalization boundary: Eq. 8-10 with the ordering rules of App. A.2."""

from __future__ import annotations

from ..model import Candidate, PacketScore


def normalize(candidates: list[Candidate], cell_of: dict[str, str] | None = None) -> list[PacketScore]:
    """Collapse hits to packets by source id (Eq. 8-9) with s(p,q) = max r_i (Eq. 10).

    Ties keep the earliest candidate in the given order; packets are ordered by score, then first
    candidate position, then packet id.
    """
    groups: dict[str, list[tuple[int, Candidate]]] = {}
    for i, c in enumerate(candidates):
        groups.setdefault(c.packet_id, []).append((i, c))
    pool = []
    for pid, hits in groups.items():
        first, rep = hits[0]
        for _, c in hits[1:]:
            if c.score > rep.score:
                rep = c
        cells = tuple(
            dict.fromkeys(cell_of[c.descriptor_id] for _, c in hits if cell_of and c.descriptor_id in cell_of)
        )
        pool.append(
            PacketScore(
                packet_id=pid,
                score=rep.score,
                representative=rep.descriptor_id,
                first_position=first,
                support=sum(max(0.0, c.score) for _, c in hits),
                cells=cells,
            )
        )
    pool.sort(key=lambda p: (-p.score, p.first_position, p.packet_id))
    return pool
