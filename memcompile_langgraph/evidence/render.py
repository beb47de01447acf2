"""Reader-view compilation: claim bundles per packet in schedule order (Eq. 15-16, App. C.3)."""
from __future__ import annotations

import re

from ..index import UserIndex
from ..records import SourcePacket

VIEWS = ("bundle", "raw", "claim")
_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def one_line(text: str) -> str:
    """Stored text can never start a line of its own, so it cannot forge a block header."""
    return _BREAKS.sub(" ", text).strip()


def header(p: SourcePacket) -> str:
    when = p.session_time[:16].replace("T", " ") if p.session_time else p.session_time_raw
    return f"[{one_line(p.dia_id)}] {one_line(p.speaker)} | {one_line(when)} | session {p.session}"


def render_block(index: UserIndex, packet_id: str, view: str = "bundle", representative: str | None = None) -> str:
    p = index.packets[packet_id]
    if view == "raw":
        lines = [one_line(p.text)]
        if p.image_caption or p.image_query:
            lines.append(one_line(f"(shared image: {p.image_caption} {p.image_query})"))
    elif view == "claim":
        claims = index.by_packet[packet_id]
        rep = next((d for d in claims if d.descriptor_id == representative), claims[0] if claims else None)
        lines = [one_line(rep.claim)] if rep else []
    else:  # Eq. 15: the retained claims only; a packet without any (a factless turn) shows its header alone
        lines = [one_line(d.claim) for d in index.by_packet[packet_id]]
    return "\n".join([header(p), *(f"- {line}" for line in lines)])


def render_context(index: UserIndex, packet_ids: list[str], view: str = "bundle", representatives: dict[str, str] | None = None) -> str:
    """X_q = Render(p_1, B_p1) || ... || Render(p_L, B_pL), Eq. 16."""
    reps = representatives or {}
    return "\n\n".join(render_block(index, pid, view, reps.get(pid)) for pid in packet_ids)
