"""Typed records of the method: SourcePacket (Sec. 3.2), Descriptor (Eq. 2), Cell (App. B.2) and query-time records."""

from __future__ import annotations

import hashlib
import sys
from collections import Counter, deque
from dataclasses import dataclass, field, fields
from itertools import repeat
from typing import Any


def stable_hash(*parts: object, length: int = 20) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:length]


def from_columns(cls: type, columns: tuple[list, ...]) -> list:
    """Records of a slots dataclass from one list per field (a snapshot file's columns), built field by field
    straight into their slots. Every loop runs in C: one Python call per record (the frozen __init__) would be much of
    a large snapshot's load."""
    records: list[Any] = list(map(object.__new__, repeat(cls, len(columns[0]))))
    for f, column in zip(fields(cls), columns):
        deque(map(getattr(cls, f.name).__set__, records, column), maxlen=0)
    return records


def _intern(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


def _intern_fields(record: Any, names: tuple[str, ...], tuples: tuple[str, ...] = ()) -> None:
    """One string object per distinct value of these fields (sys.intern: shared across records and users, freed
    with the last record holding it): a user's labels, times, names and keywords repeat from record to record, and
    each record parsed or extracted apart would hold a copy of its own. A snapshot file's records share them already
    (one string table), so only records built one by one come here."""
    for name in names:
        object.__setattr__(record, name, _intern(getattr(record, name)))
    for name in tuples:
        object.__setattr__(record, name, tuple(map(_intern, getattr(record, name))))


@dataclass(frozen=True, slots=True)
class SourcePacket:
    """One immutable dialogue turn; the unit the evidence budget is spent on."""

    packet_id: str
    user_id: str
    dia_id: str
    speaker: str
    session: int
    session_label: str
    session_time: str | None  # ISO 8601 when parsed
    session_time_raw: str
    text: str
    seq: int  # dialogue order within the user
    image_caption: str = ""
    image_query: str = ""
    content_hash: str = ""

    def __post_init__(self) -> None:
        _intern_fields(self, ("user_id", "speaker", "session_label", "session_time", "session_time_raw"))

    @staticmethod
    def hash_content(speaker: str, text: str, session_time_raw: str, caption: str = "", query: str = "") -> str:
        return stable_hash(speaker, text, session_time_raw, caption, query, length=32)

    @property
    def date(self) -> str:
        return (self.session_time or "")[:10] or self.session_time_raw


@dataclass(frozen=True, slots=True)
class Descriptor:
    """A source-linked atomic claim x_i = (f, d, s, j, t, Per, Key, tau, tau_bar, n, pi), Eq. 2."""

    descriptor_id: str
    packet_id: str  # pi_i: foreign key to the SourcePacket
    claim: str  # f_i
    dia_id: str  # d_i
    speaker: str  # s_i
    session: int  # j_i
    session_time: str | None  # t_i
    people: tuple[str, ...]  # Per_i
    keywords: tuple[str, ...]  # Key_i (<= 5)
    event_time: str  # tau_i ("" when unknown)
    interaction_time: str  # tau_bar_i
    n_tokens: int  # n_i
    seq: int  # construction order within the user
    negated: bool = False  # carries a negation marker (for X(i,c), App. B.2)

    def __post_init__(self) -> None:
        _intern_fields(self, ("speaker", "session_time", "event_time", "interaction_time"), ("people", "keywords"))


@dataclass(slots=True)
class Cell:
    """A capacity-bounded routing container with the running aggregates Eq. 17-23 read."""

    cell_id: str
    seq: int
    descriptor_ids: list[str] = field(default_factory=list)
    tokens: int = 0
    keyword_counts: Counter = field(default_factory=Counter)
    person_counts: Counter = field(default_factory=Counter)
    dia_counts: Counter = field(default_factory=Counter)
    session_min: int | None = None
    session_max: int | None = None
    has_time: bool = False
    title: str = ""

    def __len__(self) -> int:
        return len(self.descriptor_ids)

    @property
    def keywords(self) -> set[str]:
        return set(self.keyword_counts)

    @property
    def people(self) -> set[str]:
        return set(self.person_counts)


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A turn as the user hands it over, before it becomes a packet."""

    speaker: str
    text: str
    time: str = ""
    session: int | None = None
    session_label: str = ""
    dia_id: str = ""
    image_caption: str = ""
    image_query: str = ""


@dataclass(frozen=True, slots=True)
class Intent:
    """Query-only retrieval intent (App. F): people, keywords, time, attribute need."""

    query: str
    people: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    time: str | None = None
    temporal: bool = False
    need_attribute: bool = False
    terms: tuple[str, ...] = ()  # normalized query term set Term_q


@dataclass(frozen=True, slots=True)
class Candidate:
    """An address hit (Eq. 6-7) that still carries its channel identities."""

    descriptor_id: str
    packet_id: str
    score: float  # r_i, Eq. 7
    bm25: float  # b_i, normalized
    channels: tuple[str, ...]  # "bm25" and/or "cell:<id>"
    position: int  # position in the union before reordering


@dataclass(frozen=True, slots=True)
class PacketScore:
    """A normalized packet (Eq. 9-10) with its representative address."""

    packet_id: str
    score: float  # s(p,q) = max r_i
    representative: str  # descriptor id of the max-scoring hit
    first_position: int
    support: float = 0.0  # sum of positive r_i over the same source
    cells: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DenseHit:
    packet_id: str
    similarity: float


@dataclass(frozen=True, slots=True)
class SelectedPacket:
    """One packet `compile` selected (E_q), with its provenance. Its dict form (`to_dict`) is what the served query
    graph outputs and MCP and the CLI print: the fields in this order, `superseded_by` only when set."""

    dia_id: str
    speaker: str
    session: int
    time: str  # the session's time: ISO 8601 when parsed, else as given
    score: float  # its fused (pool) or dense score, 6 decimals
    packet_id: str
    rank: int  # 1-based, in schedule order: the order of the compiled text's blocks
    source: str  # "anchor" (A_0) or "frontier" (added by the frontier stage)
    shown: bool = True  # False: the token budget left it out of the compiled text
    superseded_by: str | None = None  # a knowledge-update mark: the dia_id of the newer statement

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.superseded_by is None:
            del out["superseded_by"]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SelectedPacket:
        return cls(**d)


@dataclass(slots=True)
class CompiledContext:
    """What `compile` returns: the reader view, the selected packets in schedule order, and a per-stage trace."""

    query: str
    text: str
    packets: list[SelectedPacket]
    trace: dict[str, Any]

    @property
    def dia_ids(self) -> list[str]:
        return [p.dia_id for p in self.packets]

    def to_dict(self) -> dict[str, Any]:
        return {"context": self.text, "packets": [p.to_dict() for p in self.packets], "trace": self.trace}
