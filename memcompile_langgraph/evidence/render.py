"""Reader-view compilation: claim bundles per packet in schedule order (Eq. 15-16, App. C.3)."""
from __future__ import annotations

from ..index import UserIndex
from ..records import SourcePacket
from ..text import bounded, header_field, one_line

VIEWS = ("bundle", "raw", "claim")


def header(p: SourcePacket) -> str:
    """[dia_id] speaker | time | session N; every stored field escaped, empty ones left out."""
    when = p.session_time[:16].replace("T", " ") if p.session_time else p.session_time_raw
    fields = [header_field(p.speaker), header_field(when), f"session {p.session}"]
    return f"[{header_field(p.dia_id)}] " + " | ".join(f for f in fields if f)


def body_line(text: str, limit: int) -> str:
    """One line of a block (stored text cannot start a header line of its own), at most `limit` characters."""
    return "- " + bounded(one_line(text), limit)


def render_block(index: UserIndex, packet_id: str, view: str = "bundle", representative: str | None = None) -> str:
    p = index.packets[packet_id]
    if view == "raw":
        lines = [p.text]
        if p.image_caption or p.image_query:
            lines.append(f"(shared image: {p.image_caption} {p.image_query})")
    elif view == "claim":
        claims = index.by_packet[packet_id]
        rep = next((d for d in claims if d.descriptor_id == representative), claims[0] if claims else None)
        lines = [rep.claim if rep else p.text]
    else:
        lines = [d.claim for d in index.by_packet[packet_id]] or [p.text]
    return "\n".join([header(p), *(body_line(line, index.cfg.render_max_chars) for line in lines)])


def render_context(index: UserIndex, packet_ids: list[str], view: str = "bundle",
                   representatives: dict[str, str] | None = None) -> str:
    """X_q = Render(p_1, B_p1) || ... || Render(p_L, B_pL), Eq. 16."""
    reps = representatives or {}
    return "\n\n".join(render_block(index, pid, view, reps.get(pid)) for pid in packet_ids)
