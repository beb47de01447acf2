"""The in-memory view of one user's records that the query plane reads; rebuilt from the store on open."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import numpy.typing as npt

from ..address.bm25 import BM25Index
from ..address.cells import CellLayout
from ..config import MemCompileConfig
from ..model import Descriptor, SourcePacket
from ..process import gc_paused
from ..text.terms import only_asks, terms
from ..text.timeparse import time_span, year_spans
from .growarray import GrowArray
from .persistent import Forkable, Rows
from .termrows import TermRows, TermTable
from .vectors import PacketVectors


def descriptor_terms(d: Descriptor) -> tuple[list[str], list[str], list[str]]:
    """(claim terms, keyword terms, BM25 document: descriptor text + keywords + people, App. B.3). Words never span
    the spaces joining the fields, so the document is the three term lists in a row."""
    claim, keys = terms(d.claim), terms(" ".join(d.keywords))
    return claim, keys, claim + keys + terms(" ".join(d.people))


def packet_document(p: SourcePacket, claims: list[Descriptor], kind: str = "packet") -> str:
    """The text the dense channel embeds for a packet (config.dense_document). "packet" is the paper's z(p), App.
    C.2: raw text, caption/query, all claims, packet people/keywords, session time. "turn" keeps what was said (the
    speaker's line and the image fields) and the session time; "turn_terms" adds the claims' people and keywords
    but not the claims. "claims" puts the claims (the turn restated with its references resolved) after the speaker in
    place of the turn's text, which stays only for a packet without claims."""
    line = f"{p.speaker}: {p.text}"
    if kind == "claims" and claims:
        said = "\n".join(d.claim for d in claims)
        line = said if said.startswith(f"{p.speaker}: ") else f"{p.speaker}: {said}"  # a fallback claim is the line
    parts = [line]
    if p.image_caption or p.image_query:
        parts.append(f"image: {p.image_caption} {p.image_query}".strip())
    if kind == "packet":
        parts += [d.claim for d in claims]
    if kind in ("packet", "turn_terms"):
        people = list(dict.fromkeys(x for d in claims for x in d.people))
        keywords = list(dict.fromkeys(x for d in claims for x in d.keywords))
        if people:
            parts.append("people: " + ", ".join(people))
        if keywords:
            parts.append("keywords: " + ", ".join(keywords))
    parts.append(f"time: {p.session_time or p.session_time_raw}")
    return "\n".join(parts)


def asks_only(p: SourcePacket) -> bool:
    """A turn that only asks (text.only_asks); a shared image states something."""
    return not p.image_caption and only_asks(p.text)


def packet_lexical_document(
    p: SourcePacket, claims: list[Descriptor], previous: SourcePacket | None, following: SourcePacket | None
) -> list[str]:
    """Packet-level lexical document for offline fusion: the claim bundle with its keywords, the speaker and image
    fields, and the raw text of the adjacent turns of the same session (a reply answers the turn before it)."""
    parts = [f"{d.claim} {' '.join(d.keywords)}" for d in claims] + [p.speaker, p.image_caption, p.image_query]
    parts += [n.text for n in (previous, following) if n is not None and n.session == p.session]
    return terms(" ".join(parts))


@dataclass
class UserIndex(Forkable):
    """A snapshot of one user's records at `version`. Published snapshots are never changed: a writer extends a
    fork(), which shares every container with this one (persistent maps and columns, big arrays copy-on-write)."""

    # the containers a writer extends, one entry or more per turn, are shared; names and sessions are small
    SHARED = (
        "packets",
        "packet_order",
        "by_dia",
        "hashes",
        "descriptors",
        "position",
        "by_packet",
        "claim_packets",
        "packet_position",
        "packet_sessions",
        "packet_speakers",
        "packet_timed",
    )
    COPIED = ("people", "sessions", "session_packets")
    # the columns queries read as arrays, appended by the writes that add their rows
    COLUMNS = ("_sessions", "_claim_rows", "_timed", "_speakers", "_asking", "_spans", "_vector_rows")
    CHILDREN = ("layout", "bm25", "packet_bm25", "vectors", "claim_terms", "key_terms", *COLUMNS)

    user_id: str
    cfg: MemCompileConfig
    version: int = -1
    epoch: int = 0  # the records' epoch it was built in (RecordsStore.head)
    digest: str = ""  # the records' digest chain at its newest packet (RecordsStore.digest_at)
    packets: Mapping[str, SourcePacket] = field(default_factory=dict)
    packet_order: Rows[str] = field(default_factory=list)
    by_dia: Mapping[str, str] = field(default_factory=dict)
    hashes: Mapping[str, str] = field(default_factory=dict)  # content hash -> packet id
    descriptors: Rows[Descriptor] = field(default_factory=list)  # position = BM25 document id
    position: Mapping[str, int] = field(default_factory=dict)
    by_packet: Mapping[str, list[Descriptor]] = field(default_factory=dict)
    claim_packets: Rows[int] = field(default_factory=list)  # packet row of each descriptor (append-only)
    claim_terms: TermRows = field(default_factory=TermRows)  # distinct terms of each descriptor
    key_terms: TermRows = field(default_factory=TermRows)
    people: dict[str, None] = field(default_factory=dict)  # known names, insertion-ordered
    sessions: dict[int, tuple[str, str | None]] = field(default_factory=dict)  # index -> (label, time)
    session_packets: dict[int, int] = field(default_factory=dict)  # packets per session, kept as packets are added
    last_session: int | None = None  # the highest session index (packetize continues it)
    packet_position: Mapping[str, int] = field(default_factory=dict)  # row in packet_order = packet BM25 doc id
    packet_sessions: Rows[int] = field(default_factory=list)
    packet_speakers: Rows[str] = field(default_factory=list)
    packet_timed: Rows[bool] = field(default_factory=list)  # a claim of the packet carries an event time
    layout: CellLayout = None  # type: ignore[assignment]
    bm25: BM25Index = None  # type: ignore[assignment]
    packet_bm25: BM25Index = None  # type: ignore[assignment]
    vectors: PacketVectors = None  # type: ignore[assignment]
    _sessions: GrowArray = field(default_factory=lambda: GrowArray(np.int64, 256), repr=False)
    _claim_rows: GrowArray = field(default_factory=lambda: GrowArray(np.int64, 256), repr=False)
    _timed: GrowArray = field(default_factory=lambda: GrowArray(np.float64, 256), repr=False)  # packet_timed, 1/0
    _speakers: GrowArray = field(default_factory=lambda: GrowArray(np.int32, 256), repr=False)  # speaker codes
    _speaker_codes: TermTable = field(default_factory=TermTable, repr=False)  # shared by forks, only grows
    _asking: GrowArray = field(default_factory=lambda: GrowArray(np.float64, 256), repr=False)
    _spans: GrowArray = field(default_factory=lambda: GrowArray(np.int64, 256, (3,)), repr=False)  # _time_spans
    # the vector row of each packet, -1 while it has none: kept as vectors arrive (an O(packets) pass per publish
    # would make a one-turn add grow with the memory)
    _vector_rows: GrowArray = field(default_factory=lambda: GrowArray(np.int64, 256), repr=False)

    def __post_init__(self) -> None:
        self.layout = CellLayout(self.cfg)
        self.bm25 = BM25Index(self.cfg.bm25_k1, self.cfg.bm25_b, self.cfg.bm25_epsilon)
        self.packet_bm25 = BM25Index(self.cfg.bm25_k1, self.cfg.bm25_b, self.cfg.bm25_epsilon)
        self.vectors = PacketVectors()

    def fork(self) -> UserIndex:
        # built in one go (plain containers): converted once, with the collector paused (it would walk them meanwhile)
        with gc_paused() if type(self.packets) is dict else nullcontext():
            return super().fork()

    @property
    def last_seqs(self) -> tuple[int, int]:
        """(packet seq, descriptor seq) of the newest records held: what an incremental load continues after."""
        last_packet = self.packets[self.packet_order[-1]].seq if self.packet_order else -1
        return last_packet, self.descriptors[-1].seq if self.descriptors else -1

    def extend(self, packets: list[SourcePacket], placed: Sequence[tuple[Descriptor, str | None]]) -> None:
        """Add stored records in order (a load, or another writer's newer records): stored Cells are replayed."""
        for p in packets:
            self.add_packet(p)
        for d, cell in placed:
            self.layout.place(d, cell)
        self.register([d for d, _ in placed])
        self.index_packet_text([p.packet_id for p in packets])

    def make_columns(self, timed: np.ndarray, speakers: list[str], speaker_codes: np.ndarray) -> None:
        """The columns queries read as arrays (COLUMNS), made at once from rows loaded whole (index/codec.py), as
        the writes that add rows make them one by one. timed: packet_timed; speaker_codes: each packet's speaker as
        a position in `speakers`."""
        self._sessions = GrowArray.of(np.array(self.packet_sessions, dtype=np.int64))
        self._claim_rows = GrowArray.of(np.array(self.claim_packets, dtype=np.int64))
        self._timed = GrowArray.of(timed.astype(np.float64))
        self._speaker_codes = TermTable(speakers)
        self._speakers = GrowArray.of(speaker_codes.astype(np.int32))
        n = len(self.packet_order)
        self._asking = GrowArray.of(np.fromiter((asks_only(self.packets[p]) for p in self.packet_order), np.float64, n))
        self._spans = GrowArray.of(self.time_spans(range(n)))

    def vector_rows(self) -> np.ndarray:
        """Row of each packet (in packet_order) in the vector matrix, -1 for a packet without a vector yet."""
        return self._vector_rows.view()

    def set_vectors(self, ids: list[str], vectors: npt.ArrayLike) -> None:
        """Packet vectors made or read (PacketVectors.set), with the rows of the packets held kept beside them."""
        new = [p for p in dict.fromkeys(ids) if p not in self.vectors.row]
        self.vectors.set(ids, vectors)
        for p in new:
            pos = self.packet_position.get(p)
            if pos is not None:
                self._vector_rows.put(pos, self.vectors.row[p])

    def clear_vectors(self) -> None:
        """No vectors (a model change re-embeds every packet)."""
        self.vectors = PacketVectors(self.vectors.dim)
        self._vector_rows = GrowArray.of(np.full(len(self.packet_order), -1, dtype=np.int64))

    def take_vectors(self, vectors: PacketVectors) -> None:
        """Takes over decoded vectors and makes the rows of the packets they hold once."""
        self.vectors = vectors
        rows = np.full(len(self.packet_order), -1, dtype=np.int64)
        for p, row in vectors.row.items():
            pos = self.packet_position.get(p)
            if pos is not None:
                rows[pos] = row
        self._vector_rows = GrowArray.of(rows)

    def session_array(self) -> np.ndarray:
        return self._sessions.view()

    def claim_packet_array(self) -> np.ndarray:
        return self._claim_rows.view()

    def timed_array(self) -> np.ndarray:
        """packet_timed as 1.0 / 0.0."""
        return self._timed.view()

    def asking_array(self) -> np.ndarray:
        """1.0 for packets that only ask (text.only_asks; a shared image states something)."""
        return self._asking.view()

    def dated_array(self, asked: str) -> np.ndarray:
        """1.0 for packets about the time a question names ("on 1 May, 2022", "in April 2022"): said within it, or
        with a claim whose event time overlaps it ("yesterday" said on 2 May). A time named without a year ("in
        June": timeparse.question_time) is that time in any year the packets are about."""
        out = np.zeros(len(self.packet_order))
        spans = self._spans.view()
        if not len(spans):
            return out
        rows, first, last = spans[:, 0], spans[:, 1], spans[:, 2]
        years = range(date.fromordinal(int(first.min())).year, date.fromordinal(int(last.max())).year + 1)
        hit = np.zeros(len(rows), dtype=bool)
        for start, end in year_spans(asked, years):
            hit |= (first <= end.toordinal()) & (last >= start.toordinal())
        out[rows[hit]] = 1.0
        return out

    def time_spans(self, rows: Iterable[int]) -> np.ndarray:
        """(packet row, first day, last day) of every span the packets at `rows` are about: their session's time
        and their claims' event times, as day ordinals."""
        spans: list[tuple[int, int, int]] = []
        days: dict[str | None, tuple[int, int] | None] = {}  # a session's time is on each of its packets: parsed once
        for row in rows:
            p = self.packets[self.packet_order[row]]
            for value in (p.session_time, *(d.event_time for d in self.by_packet[p.packet_id])):
                if value not in days:
                    span = time_span(value) if value else None
                    days[value] = (span[0].toordinal(), span[1].toordinal()) if span else None
                if (day := days[value]) is not None:
                    spans.append((row, *day))
        return np.array(spans, dtype=np.int64).reshape(-1, 3)

    def speaker_mask(self, names: Iterable[str]) -> np.ndarray:
        """1.0 for packets spoken by one of the names (compared as integer codes, cheaper than strings)."""
        codes = self._speaker_codes.codes  # a code another fork added is one no row of this one holds
        wanted = [codes[n] for n in names if n in codes]
        return np.isin(self._speakers.view(), wanted).astype(np.float64)

    def _lexical_document(self, pos: int, following: SourcePacket | None) -> list[str]:
        pid = self.packet_order[pos]
        previous = self.packets[self.packet_order[pos - 1]] if pos else None
        return packet_lexical_document(self.packets[pid], self.by_packet[pid], previous, following)

    def index_packet_text(self, packet_ids: list[str]) -> None:
        """Add packet-level lexical documents once a packet's descriptors are registered (in dialogue order);
        the preceding packet's document gains the new turn as its following turn.

        A packet whose successor comes in the same call is indexed with its final document at once, so only the
        packet before the call is re-indexed (not one replace per packet: a store reload is one call)."""
        positions = [self.packet_position[pid] for pid in packet_ids]
        documents = []
        for i, pos in enumerate(positions):
            packet = self.packets[self.packet_order[pos]]
            chained = i > 0 and positions[i - 1] == pos - 1  # the previous document already has this turn
            if pos and not chained and self.packet_sessions[pos - 1] == packet.session:
                self.packet_bm25.replace_last(self._lexical_document(pos - 1, packet))  # pos - 1: its newest
            nxt = positions[i + 1] if i + 1 < len(positions) else -1
            following = (
                self.packets[self.packet_order[nxt]]
                if nxt == pos + 1 and self.packet_sessions[nxt] == packet.session
                else None
            )
            documents.append(self._lexical_document(pos, following))
            timed = any(d.event_time for d in self.by_packet[packet.packet_id])
            self._put("packet_timed", pos, timed)
            self._timed.put(pos, float(timed))
        self.packet_bm25.add_many(documents)
        self._spans.extend(self.time_spans(positions))

    def add_packet(self, p: SourcePacket) -> None:
        pid = p.packet_id
        self._put("packets", pid, p)
        self._put("packet_position", pid, len(self.packet_order))
        self._push("packet_order", pid)
        self._push("packet_sessions", p.session)
        self._push("packet_speakers", p.speaker)
        self._push("packet_timed", False)
        self._sessions.append(p.session)
        self._timed.append(0.0)
        self._speakers.append(self._speaker_codes.encode((p.speaker,))[0])
        self._asking.append(float(asks_only(p)))
        self._vector_rows.append(self.vectors.row.get(pid, -1))
        self._put("by_dia", p.dia_id, pid)
        self._put("hashes", p.content_hash, pid)
        if pid not in self.by_packet:
            self._put("by_packet", pid, [])
        self.people.setdefault(p.speaker, None)
        self.sessions.setdefault(p.session, (p.session_label, p.session_time))
        self.session_packets[p.session] = self.session_packets.get(p.session, 0) + 1
        self.last_session = p.session if self.last_session is None else max(self.last_session, p.session)

    def release(self, dia_ids: Iterable[str]) -> None:
        """In a fork that replaces the packets of these dia_ids (and is never published: the records are loaded again
        after the replace), new turns may take the dia_ids."""
        for dia_id in dia_ids:
            self._drop("by_dia", dia_id)

    def register(self, descriptors: list[Descriptor]) -> None:
        """Make placed descriptors addressable: BM25 documents, term sets, packet bundles."""
        documents: list[list[str]] = []
        claim_terms: list[tuple[str, ...]] = []
        key_terms: list[tuple[str, ...]] = []
        for d in descriptors:
            self._put("position", d.descriptor_id, len(self.descriptors) + len(documents))
            # a new list: the bundle of a published snapshot is never appended to
            self._put("by_packet", d.packet_id, [*self.by_packet.get(d.packet_id, ()), d])
            claim, keys, document = descriptor_terms(d)
            claim_terms.append(tuple(dict.fromkeys(claim)))  # distinct terms
            key_terms.append(tuple(dict.fromkeys(keys)))
            documents.append(document)
            for name in d.people:
                self.people.setdefault(name, None)
        self._push_all("descriptors", descriptors)
        rows = [self.packet_position[d.packet_id] for d in descriptors]
        self._push_all("claim_packets", rows)
        self._claim_rows.extend(rows)
        self.claim_terms.extend(claim_terms)
        self.key_terms.extend(key_terms)
        self.bm25.add_many(documents)
