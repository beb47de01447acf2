"""The records as the two SQL stores (SQLite, PostgreSQL) write them: the columns, a record as a row and back, the
digest chain over the rows, and the meta row naming the model of a user's vectors."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..model import Descriptor, SourcePacket
from .layout import user_key

EDITABLE = {
    "packets": "packet_id, user_id, seq, dia_id, speaker, session, session_label, session_time, session_time_raw, text, "
    "image_caption, image_query, content_hash",
    "descriptors": "user_id, descriptor_id, packet_id, seq, claim, dia_id, speaker, session, session_time, people, "
    "keywords, event_time, interaction_time, n_tokens, negated, cell_id",
}
PACKET_COLS = (
    "packet_id, user_id, dia_id, speaker, session, session_label, session_time, session_time_raw, text, seq, image_caption, "
    "image_query, content_hash"
)
DESC_COLS = (
    "descriptor_id, packet_id, claim, dia_id, speaker, session, session_time, people, keywords, event_time, "
    "interaction_time, n_tokens, seq, negated, cell_id"
)


REEMBEDDING = "(re-embedding)"  # recorded while a writer replaces the vectors: equal to no model's identity


def embedding_key(user_id: str) -> str:
    return f"embedding:{user_key(user_id)}"


def forgetting_key(user_id: str) -> str:
    """The meta key that marks a forget of the user whose derived state (vectors, files, LLM cache) is not gone yet."""
    return f"forgetting:{user_id}"


def removing_key(user_id: str) -> str:
    """The meta key that marks removed packets of the user (a JSON list of their ids) whose vectors and cached LLM
    replies are not gone yet."""
    return f"removing:{user_id}"


def item_key(user_id: str, packet_id: str) -> str:
    """The meta key of a document kept beside a packet; item_key(user, "") prefixes all of the user's."""
    return f"item:{user_key(user_id)}:{packet_id}"


EXPIRY = "expires:"


def expiry_key(user_id: str, packet_id: str) -> str:
    """The meta key of a packet's expiry (a JSON object: at, when it expires; ttl, its minutes; the user's id);
    expiry_key(user, "") prefixes all of the user's."""
    return f"{EXPIRY}{user_key(user_id)}:{packet_id}"


def chain(prev: str, packets: list[tuple[Any, ...]], descriptors: list[tuple[Any, ...]]) -> list[str]:
    """The digests of `packets` (rows in PACKET_COLS order, by seq) chained after `prev`: each over the previous
    digest, the packet and its descriptors with their Cells (rows in user_id + DESC_COLS order), in canonical
    JSON, so the value is the same whether computed from a commit's objects or read back from either database."""
    claims: dict[str, list[list[Any]]] = {}
    for d in sorted(descriptors, key=lambda r: (r[13], r[1])):
        claims.setdefault(d[2], []).append(list(d))
    out = []
    for p in packets:
        body = json.dumps([prev, list(p), claims.get(p[0], [])], ensure_ascii=True, separators=(",", ":"))
        prev = hashlib.sha256(body.encode()).hexdigest()
        out.append(prev)
    return out


def chained_rows(
    prev: str, user_id: str, packets: list[SourcePacket], placed: list[tuple[Descriptor, str]], now: float
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str]]:
    """A commit's packet rows (with created_at and digest), descriptor rows, and the packets' digests in seq order."""
    ordered = sorted(packets, key=lambda p: p.seq)
    drows = [descriptor_row(user_id, d, cell) for d, cell in placed]
    digests = chain(prev, [packet_row(p, now)[:-1] for p in ordered], drows)
    return [(*packet_row(p, now), dg) for p, dg in zip(ordered, digests)], drows, digests


def packet_row(p: SourcePacket, created_at: float) -> tuple[Any, ...]:
    """A packet as the values of PACKET_COLS + created_at (shared by the SQL stores)."""
    return (
        p.packet_id, p.user_id, p.dia_id, p.speaker, p.session, p.session_label, p.session_time, p.session_time_raw,
        p.text, p.seq, p.image_caption, p.image_query, p.content_hash, created_at,
    )  # fmt: skip


def descriptor_row(user_id: str, d: Descriptor, cell: str) -> tuple[Any, ...]:
    """A placed descriptor as the values of user_id + DESC_COLS (shared by the SQL stores)."""
    return (
        user_id, d.descriptor_id, d.packet_id, d.claim, d.dia_id, d.speaker, d.session, d.session_time,
        json.dumps(d.people), json.dumps(d.keywords), d.event_time, d.interaction_time, d.n_tokens, d.seq,
        int(d.negated), cell,
    )  # fmt: skip


def descriptors_from_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Descriptor, str]]:
    """(Descriptor, Cell id) from rows in DESC_COLS order (shared by the SQL stores)."""
    # one JSON parse per column instead of two per row: a large store has many rows
    people = json.loads("[" + ",".join(r[7] for r in rows) + "]")
    keywords = json.loads("[" + ",".join(r[8] for r in rows) + "]")
    out = []
    for r, per, key in zip(rows, people, keywords):
        d = Descriptor(
            descriptor_id=r[0],
            packet_id=r[1],
            claim=r[2],
            dia_id=r[3],
            speaker=r[4],
            session=r[5],
            session_time=r[6],
            people=tuple(per),
            keywords=tuple(key),
            event_time=r[9],
            interaction_time=r[10],
            n_tokens=r[11],
            seq=r[12],
            negated=bool(r[13]),
        )
        out.append((d, r[14]))
    return out
