"""Copies of a turn take one slot, and a turn that only asks comes after the statements selected with it.

A chat agent's store fills with its own traffic: the same user sentence sent again in every run, the same question
asked again. Copies of a turn (same speaker, same words, same image) score alike on every channel, so without this
they take the slots of everything else. At the normalization boundary each group of copies among the pool and the
dense hits becomes its newest copy, in the place of the best-ranked one (its score and channels), so the copies
take one slot. After selection, a turn that only asks (text.only_asks) comes after every statement chosen with it:
offline nothing tells which statement answers a question, and a question is never better evidence for its own
answer than the statement that answers it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..index.user import UserIndex, asks_only
from ..model import DenseHit, PacketScore, SourcePacket
from .updates import statement_times


def said_key(p: SourcePacket) -> tuple[str, str, str, str]:
    """What makes two turns copies: the speaker and the words (case and spacing aside), with the image."""
    return p.speaker, " ".join(p.text.casefold().split()), p.image_caption, p.image_query


def newest_copies(index: UserIndex, packet_ids: Iterable[str]) -> dict[str, str]:
    """Each packet id -> the newest of the given packets that is a copy of it (itself when none is newer): newest by
    when each was said (updates.said_at), a copy imported or backfilled later being the older one when its time is."""
    ids = list(dict.fromkeys(packet_ids))
    when = statement_times(index)
    newest: dict[tuple[str, str, str, str], SourcePacket] = {}
    for pid in ids:
        p = index.packets[pid]
        key = said_key(p)
        if key not in newest or when(p) > when(newest[key]):
            newest[key] = p
    return {pid: newest[said_key(index.packets[pid])].packet_id for pid in ids}


def _as_copy(index: UserIndex, score: PacketScore, pid: str) -> PacketScore:
    """The pool entry standing for its copies, carried by the copy `pid`: its claim at the same place as the
    representative's (copies are extracted alike; a copy extracted otherwise keeps its first claim)."""
    if pid == score.packet_id:
        return score
    claims = [d.descriptor_id for d in index.by_packet[score.packet_id]]
    theirs = [d.descriptor_id for d in index.by_packet[pid]]
    at = claims.index(score.representative) if score.representative in claims else 0
    representative = theirs[at] if at < len(theirs) else (theirs[:1] or [""])[0]
    cell = index.layout.of_descriptor.get(representative)
    return PacketScore(pid, score.score, representative, score.first_position, score.support, (cell,) if cell else ())


def one_per_statement(
    index: UserIndex, pool: list[PacketScore], dense: list[DenseHit], scores: dict[str, float]
) -> tuple[list[PacketScore], list[DenseHit], dict[str, float]]:
    """(pool, dense hits, scores) with each group of copies as its newest copy, once, where its best copy was."""
    stands = newest_copies(index, [*(p.packet_id for p in pool), *(h.packet_id for h in dense)])
    if all(pid == new for pid, new in stands.items()):
        return pool, dense, scores
    kept: dict[str, PacketScore] = {}
    for p in pool:
        new = stands[p.packet_id]
        if new not in kept:
            kept[new] = _as_copy(index, p, new)
    hits: dict[str, DenseHit] = {}
    for h in dense:
        hits.setdefault(stands[h.packet_id], DenseHit(stands[h.packet_id], h.similarity))
    best: dict[str, float] = {}
    for pid, value in scores.items():
        new = stands.get(pid, pid)
        best[new] = max(best.get(new, value), value)
    return list(kept.values()), list(hits.values()), best


def statements_first(index: UserIndex, packet_ids: list[str]) -> list[str]:
    """The selection with the turns that only ask after the others, each part in its order."""
    asks = [pid for pid in packet_ids if asks_only(index.packets[pid])]
    if not asks:
        return packet_ids
    asking = set(asks)
    return [pid for pid in packet_ids if pid not in asking] + asks


def asked_scores(index: UserIndex, packet_ids: list[str], scores: dict[str, float]) -> dict[str, float]:
    """The selection's scores with each turn that only asks scored at most as the lowest statement before it: a
    caller ordering by score (the LangGraph store) keeps the questions after the statements too."""
    packets = [index.packets[pid] for pid in packet_ids]
    return dict(zip(packet_ids, asking_capped(packets, [scores[pid] for pid in packet_ids])))


def asking_capped(packets: list[SourcePacket], scores: list[float]) -> list[float]:
    """Scores in selection order, each turn that only asks capped at the lowest statement score before it."""
    out, lowest = list(scores), float("inf")
    for i, p in enumerate(packets):
        if asks_only(p):
            out[i] = min(out[i], lowest)
        else:
            lowest = min(lowest, out[i])
    return out
