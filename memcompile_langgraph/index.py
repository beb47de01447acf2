"""The in-memory view of one user's records that the query plane reads; rebuilt from the store on open."""
from __future__ import annotations

from dataclasses import dataclass, field

from .address.bm25 import BM25Index
from .address.cells import CellLayout
from .config import MemCompileConfig
from .records import Descriptor, SourcePacket
from .text import terms


def descriptor_document(d: Descriptor) -> list[str]:
    """BM25 document: descriptor text + keywords + people (App. B.3)."""
    return terms(" ".join([d.claim, *d.keywords, *d.people]))


def packet_document(p: SourcePacket, claims: list[Descriptor]) -> str:
    """z(p), App. C.2: raw text, caption/query, all claims, packet people/keywords, session time."""
    people = list(dict.fromkeys(x for d in claims for x in d.people))
    keywords = list(dict.fromkeys(x for d in claims for x in d.keywords))
    parts = [f"{p.speaker}: {p.text}"]
    if p.image_caption or p.image_query:
        parts.append(f"image: {p.image_caption} {p.image_query}".strip())
    parts += [d.claim for d in claims]
    if people:
        parts.append("people: " + ", ".join(people))
    if keywords:
        parts.append("keywords: " + ", ".join(keywords))
    parts.append(f"time: {p.session_time or p.session_time_raw}")
    return "\n".join(parts)


@dataclass
class UserIndex:
    user_id: str
    cfg: MemCompileConfig
    version: int = -1
    packets: dict[str, SourcePacket] = field(default_factory=dict)
    packet_order: list[str] = field(default_factory=list)
    by_dia: dict[str, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)  # content hash -> packet id
    descriptors: list[Descriptor] = field(default_factory=list)  # position = BM25 document id
    position: dict[str, int] = field(default_factory=dict)
    by_packet: dict[str, list[Descriptor]] = field(default_factory=dict)
    claim_terms: list[frozenset[str]] = field(default_factory=list)
    key_terms: list[frozenset[str]] = field(default_factory=list)
    people: dict[str, None] = field(default_factory=dict)  # known names, insertion-ordered
    sessions: dict[int, tuple[str, str | None]] = field(default_factory=dict)  # index -> (label, time)
    layout: CellLayout = None  # type: ignore[assignment]
    bm25: BM25Index = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.layout = CellLayout(self.cfg)
        self.bm25 = BM25Index(self.cfg.bm25_k1, self.cfg.bm25_b, self.cfg.bm25_epsilon)

    def add_packet(self, p: SourcePacket) -> None:
        self.packets[p.packet_id] = p
        self.packet_order.append(p.packet_id)
        self.by_dia[p.dia_id] = p.packet_id
        self.hashes[p.content_hash] = p.packet_id
        self.by_packet.setdefault(p.packet_id, [])
        self.people.setdefault(p.speaker, None)
        self.sessions.setdefault(p.session, (p.session_label, p.session_time))

    def add_descriptor(self, d: Descriptor, cell_id: str | None = None) -> str:
        """Place one descriptor by Algorithm 2 (or replay its stored Cell) and index it."""
        cell = self.layout.place(d, cell_id)
        self.register(d)
        return cell

    def register(self, d: Descriptor) -> None:
        """Make an already placed descriptor addressable: BM25 document, term sets, packet bundle."""
        self.position[d.descriptor_id] = len(self.descriptors)
        self.descriptors.append(d)
        self.by_packet.setdefault(d.packet_id, []).append(d)
        self.claim_terms.append(frozenset(terms(d.claim)))
        self.key_terms.append(frozenset(t for k in d.keywords for t in terms(k)))
        self.bm25.add(descriptor_document(d))
        for name in d.people:
            self.people.setdefault(name, None)

