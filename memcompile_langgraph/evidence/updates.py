"""Knowledge updates (engineering, not in the paper): a later selected packet restating an earlier one's fact with
a different value marks the earlier one as superseded, with both dates.

Offline heuristic over the packets' claims: two statements of the same speaker (the subject of their own facts)
in different packets are one fact restated when they share topic terms that are rare in the user's memory
(summed relative idf, at least one of them a query term) and each carries a value (a number, amount, time or date) the
other does not.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from ..records import SourcePacket
from ..text import term_set

# a number with its unit glued on: 250ms, 1,200, 4:30 pm, 78%, v1.0.0
_VALUE = re.compile(r"\d+(?:[.,:]\d+)*(?:\s?(?:am|pm)\b|%|[a-z]+\b)?", re.I)
UPDATE_MIN_SHARED_IDF = 1.5  # summed relative idf (idf / the idf of a term one claim holds) of the shared topic
# terms: two or three terms rare in this user's memory; relative, so it means the same in a small and a large memory
UPDATE_MAX_CLAIM_TERMS = 60  # longer claims (code, lists) are not statements of one fact


@dataclass(frozen=True)
class Supersession:
    old: str  # packet id of the earlier statement
    new: str  # packet id of the later one
    old_values: tuple[str, ...]
    new_values: tuple[str, ...]


def values(text: str) -> frozenset[str]:
    return frozenset(v.lower().replace(",", "").replace(" ", "") for v in _VALUE.findall(text))


def topic_terms(text: str) -> frozenset[str]:
    return frozenset(t for t in term_set(text) if not any(c.isdigit() for c in t))


@dataclass(frozen=True)
class Statement:
    topics: frozenset[str]
    values: frozenset[str]


def statement(claim: str, query: frozenset[str]) -> Statement | None:
    """A claim that can state a value about what the query asks: it names a value and one of the query's topics."""
    topics = topic_terms(claim)
    if len(topics) > UPDATE_MAX_CLAIM_TERMS or not topics & query:
        return None
    found = values(claim)
    return Statement(topics, found) if found else None


def restated(old: Statement, new: Statement, query: frozenset[str], idf: Callable[[str], float]) -> tuple[frozenset, frozenset] | None:
    """(old-only values, new-only values) when `new` restates `old`'s fact with another value, else None."""
    shared = old.topics & new.topics
    if not shared & query or sum(idf(t) for t in shared) < UPDATE_MIN_SHARED_IDF:
        return None
    gone, came = old.values - new.values, new.values - old.values
    return (gone, came) if gone and came else None


def supersessions(
    packets: Sequence[SourcePacket],
    claims: Callable[[str], Sequence[str]],
    query: str,
    idf: Callable[[str], float],
) -> dict[str, Supersession]:
    """Earlier packet id -> the latest later packet of the same speaker restating one of its facts."""
    q = topic_terms(query)
    ordered = sorted(packets, key=lambda p: p.seq)
    said = {p.packet_id: [s for c in claims(p.packet_id) if (s := statement(c, q))] for p in ordered}
    out: dict[str, Supersession] = {}
    for i, old in enumerate(ordered):
        for new in reversed(ordered[i + 1 :]):
            if new.speaker != old.speaker or old.packet_id in out:
                continue
            for a in said[old.packet_id]:
                found = next((r for b in said[new.packet_id] if (r := restated(a, b, q, idf))), None)
                if found:
                    out[old.packet_id] = Supersession(old.packet_id, new.packet_id, tuple(sorted(found[0])), tuple(sorted(found[1])))
                    break
    return out


def superseded_note(s: Supersession, old: SourcePacket, new: SourcePacket) -> str:
    return (f"- [superseded on {new.date} by [{new.dia_id}]: {', '.join(s.new_values)} replaces "
            f"{', '.join(s.old_values)} stated here on {old.date}]")
