"""Knowledge updates (engineering, not in the paper): a later selected packet restating an earlier one's fact with
a different value marks the earlier one as superseded, with both dates.

Offline heuristic over the packets' claims: two statements of the same speaker (the subject of their own facts)
in different packets are one fact restated when they share topic terms that are rare in the user's memory
(summed relative idf, at least one of them a query term) and each carries a value the other does not for the same
attribute. A value's attribute is the word glued to or next to the number ("8 cards" -> "10 cards", "400ms" ->
"250ms"); only attributes the question names, units written on the number, months and clock times count, so list
numbering, versions and codes next to words the question does not ask about are never a changed value. A date
("April 25, 2024") or a clock time ("4:30 PM") counts as one value, so a dated statement is not taken for a list.
A number right after a word labels it ("sprint 2") and is no value of it. What a "how many" question counts is one
subject even when its terms are common in the chat (the question's own topic), when the newer statement says it
changed and the two share two of the question's terms. A value of any other kind (a place, an employer, a plan) is
told apart by the subject alone (subject_supersessions). "Later" is by the statements' own times (said_at), and the
current statement is read first (current_first).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import TYPE_CHECKING

import numpy as np

from ..model import SourcePacket
from ..text.terms import term_set
from ..text.timeparse import session_moment
from .spread import spans_history

if TYPE_CHECKING:
    from ..config import MemCompileConfig
    from ..index.user import UserIndex
    from .scheduler import ScheduleInput

_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[a-z%]+", re.I)
_GLUED = re.compile(r"\d([a-z]+|%)", re.I)  # a measurement unit written on the number: 250ms, 4GB, 78%
_ORDINAL = frozenset({"st", "nd", "rd", "th"})
_NUMBER = re.compile(r"\d")
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_MONTH_WORD = re.compile(rf"{_MONTH}$")
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE_OR_TIME = re.compile(
    rf"\b{_MONTH}\.?\s+{_DAY}(?:,?\s+\d{{4}})?\b|\b{_DAY}\s+(?:of\s+)?{_MONTH}\b(?:,?\s+\d{{4}})?"
    rf"|\b\d{{1,2}}(?::\d\d)?\s*[ap]\.?m\b",
    re.I,
)
# attributes a changed value is about whatever words the question uses: the date or time of something
_ALWAYS = frozenset(
    term_set("january february march april may june july august september october november december pm")
)
# words that say a value changed; the later statement of a date, a time or a unit the question does not name must
# carry one (dates, times and shares of different things differ without any update)
_CHANGE = re.compile(
    r"\b(?:now|new|newly|recently|updated?|changed?|moved?|moving|rescheduled?|postponed|delayed|extended|pushed|"
    r"adjusted|increased|decreased|reduced|grown|grew|reached|improved|dropped|raised|lowered|added|switched|"
    r"revised|instead|no longer|anymore)\b",
    re.I,
)
_COUNTED = re.compile(r"\bhow (?:many|much)\s+((?:[a-z-]+\s+){0,2}[a-z-]+)", re.I)
UPDATE_MIN_SHARED_IDF = 1.5  # summed relative idf (idf / the idf of a term one claim holds) of the shared topic
# terms: two or three terms rare in this user's memory; relative, so it means the same in a small and a large memory
UPDATE_MAX_CLAIM_TERMS = 60  # longer claims (code, lists) are not statements of one fact
# a claim with more values (a date or a time is one) is a list or a table, not one statement; 4 leaves room for a
# date and a time beside the changed value and its old one
UPDATE_MAX_VALUES = 4


def said_at(p: SourcePacket, event: str = "") -> tuple[str, int]:
    """When a statement was made, for "later": its session's time, else the time of the event its claims state, then
    its place in storage only to break ties (a turn imported or backfilled later can still be the older statement).
    Within a session the event time does not order: a turn recalling 2019 is not older than the turn before it. A
    turn with neither time comes before every dated one; times with UTC offsets compare as moments."""
    return (session_moment(p.session_time) if p.session_time else event, p.seq)


def subject_terms(index: UserIndex) -> Callable[[str], frozenset[str]]:
    """Packet id -> the topic terms of the people and keywords its claims name, the speaker left out (every claim of
    theirs names them): what its statements are about."""

    def subjects(pid: str) -> frozenset[str]:
        named = topic_terms(" ".join(w for d in index.by_packet[pid] for w in (*d.people, *d.keywords)))
        return named - topic_terms(index.packets[pid].speaker)

    return subjects


def statement_times(index: UserIndex) -> Callable[[SourcePacket], tuple[str, int]]:
    """said_at for this memory's packets, the event time the earliest one their claims state."""

    def when(p: SourcePacket) -> tuple[str, int]:
        return said_at(p, min((d.event_time for d in index.by_packet[p.packet_id] if d.event_time), default=""))

    return when


@dataclass(frozen=True)
class Supersession:
    old: str  # packet id of the earlier statement
    new: str  # packet id of the later one
    old_values: tuple[str, ...]
    new_values: tuple[str, ...]


def quantities(text: str) -> dict[str, frozenset[str]]:
    """Unit -> the numbers stated for it; a number's units are the words (stemmed) right before and after it, or
    the letters glued to it ("250ms": ms)."""
    tokens = _TOKEN.findall(text.lower().replace(",", ""))
    out: dict[str, set[str]] = {}
    for i, tok in enumerate(tokens):
        if not _NUMBER.match(tok):
            continue
        around = [tokens[j] for j in (i - 1, i + 1) if 0 <= j < len(tokens) and not _NUMBER.match(tokens[j])]
        if i and around and around[0] == tokens[i - 1] and not _MONTH_WORD.match(around[0]) and term_set(around[0]):
            around = around[1:]  # a number right after a word labels it ("sprint 2", "chapter 3"), unless a month
        for unit in {u for w in around for u in term_set(w)} | ({"%"} if "%" in around else set()):
            out.setdefault(unit, set()).add(tok)
    return {u: frozenset(v) for u, v in out.items()}


def values(text: str) -> frozenset[str]:
    return frozenset(n for v in quantities(text).values() for n in v)


def numbers(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower().replace(",", "")) if _NUMBER.match(t)]


def value_count(text: str) -> int:
    """Numbers stated, a date or a clock time counted once."""
    return len(numbers(_DATE_OR_TIME.sub(" ", text))) + len(_DATE_OR_TIME.findall(text))


def topic_terms(text: str) -> frozenset[str]:
    return frozenset(t for t in term_set(text) if not any(c.isdigit() for c in t))


@dataclass(frozen=True)
class Statement:
    topics: frozenset[str]
    quantities: dict[str, frozenset[str]]
    changed: bool = False  # the claim says a value changed


def statement(claim: str, query: frozenset[str]) -> Statement | None:
    """A claim that can state a value about what the query asks: it names one of the query's topics and a value
    for an attribute the query names (or a unit written on the number, a date or a time)."""
    if not _NUMBER.search(claim):  # every value is a number (dates and times too): most claims end here, cheaply
        return None
    topics = topic_terms(claim)
    if len(topics) > UPDATE_MAX_CLAIM_TERMS or not topics & query or value_count(claim) > UPDATE_MAX_VALUES:
        return None
    glued = {u.lower() for u in _GLUED.findall(claim)} - _ORDINAL
    found = {u: v for u, v in quantities(claim).items() if u in query or u in _ALWAYS or u in glued}
    changed = bool(_CHANGE.search(claim))
    if changed and value_count(claim) == 1 and (number := next(iter(numbers(claim)), None)):
        # "... commits merged into main, which has now reached 165": the one changed value is the claim's own
        # query topics' value, wherever the words stand
        found = {**found, **{u: frozenset({number}) for u in query & topics}}
    return Statement(topics, found, changed) if found else None


def counted(query: str) -> frozenset[str]:
    """What a "how many / how much" question counts: the last word before the first function word after it ("how
    many project cards are ...": card; "how many new columns did ...": column)."""
    m = _COUNTED.search(query)
    words = list(takewhile(term_set, m.group(1).split())) if m else []
    return topic_terms(words[-1]) if words else frozenset()


def restated(
    old: Statement,
    new: Statement,
    query: frozenset[str],
    idf: Callable[[str], float],
    count: frozenset[str] = frozenset(),
) -> tuple[frozenset, frozenset] | None:
    """(old-only values, new-only values) when `new` restates `old`'s fact with another value, else None. The
    subject is one when the shared topic terms are rare in the memory, or, for the very thing the question counts
    (`count`, when the newer statement says it changed), when they hold two of the question's terms: a question's
    main topic is common in its own chat."""
    shared = old.topics & new.topics
    if not shared & query:
        return None
    rare = sum(idf(t) for t in shared) >= UPDATE_MIN_SHARED_IDF
    if not rare and not (new.changed and len(shared & query) >= 2):
        return None
    for unit in sorted(old.quantities.keys() & new.quantities.keys()):
        if not new.changed and unit not in query or not rare and unit not in count:
            continue
        gone, came = old.quantities[unit] - new.quantities[unit], new.quantities[unit] - old.quantities[unit]
        if gone and came:
            return gone, came
    return None


def claim_pair(old: SourcePacket, new: SourcePacket, claims: Callable[[str], Sequence[str]]) -> Candidate:
    """The two packets as a Candidate, each by its claim sharing the most topic terms with the other packet."""
    a, b = claims(old.packet_id), claims(new.packet_id)
    ta, tb = statement_terms(a), statement_terms(b)
    best_a = max(a, key=lambda c: len(topic_terms(c) & tb))
    best_b = max(b, key=lambda c: len(topic_terms(c) & ta))
    return Candidate(old.packet_id, new.packet_id, best_a, best_b, 0.0)


def supersessions(
    packets: Sequence[SourcePacket],
    claims: Callable[[str], Sequence[str]],
    query: str,
    idf: Callable[[str], float],
    cosine: Callable[[str, str], float] | None = None,
    when: Callable[[SourcePacket], tuple] = said_at,
    subjects: Callable[[str], frozenset[str]] | None = None,
) -> dict[str, Supersession]:
    """Earlier packet id -> the latest later packet of the same speaker restating one of its facts: a value of the
    kind the question asks for (with the packets' `cosine`, when there are vectors), or an attribute's value, or,
    with the packets' `subjects` too, any other value of the same subject (subject_supersessions). Earlier and later
    by `when` (said_at)."""
    q, count = topic_terms(query), counted(query)
    ordered = sorted(packets, key=when)
    said = {p.packet_id: [s for c in claims(p.packet_id) if (s := statement(c, q))] for p in ordered}
    out = typed_supersessions(packets, claims, query, cosine, when) if cosine else {}
    for i, old in enumerate(ordered):
        for new in ordered[i + 1 :]:
            if new.speaker != old.speaker or old.packet_id in out:
                continue
            for a in said[old.packet_id]:
                found = next((r for b in said[new.packet_id] if (r := restated(a, b, q, idf, count))), None)
                if found:
                    out[old.packet_id] = Supersession(
                        old.packet_id, new.packet_id, tuple(sorted(found[0])), tuple(sorted(found[1]))
                    )
                    break
    if cosine and subjects:  # any other value of the same subject (a place, an employer, a plan): no values named
        out = {**subject_supersessions(packets, claims, query, cosine, subjects, when), **out}
    return out


# the kinds of value a question can ask for, each as (question cue, value pattern): a question asking when, how long,
# how much money, which share or how big is answered by a value of that kind, whatever the words around it (names
# are not: a later name of the same kind is as often another thing as a new value)
_KINDS = (
    (re.compile(r"^\s*when\b|\bwhat (?:date|day|time)\b|\b(?:deadline|scheduled)\b", re.I), _DATE_OR_TIME),
    (
        re.compile(r"\bhow long\b", re.I),
        re.compile(r"\b\d+(?:\.\d+)?\s*(?:seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)\b", re.I),
    ),
    (
        re.compile(r"\bhow much\b|\b(?:budget|cost|price|salary|rent|fee|spend)\b", re.I),
        re.compile(r"\$\s?\d[\d,.]*\s*[km]?\b|\b\d[\d,.]*\s*(?:dollars|euros?|pounds)\b", re.I),
    ),
    (re.compile(r"\brate\b|\bpercent|\bshare\b", re.I), re.compile(r"\b\d+(?:\.\d+)?\s?%")),
    (
        re.compile(r"\bhow (?:big|large|heavy|far)\b|\bsize\b", re.I),
        re.compile(r"\b\d+(?:\.\d+)?\s*(?:[kmgt]b|bytes?|km|miles?|kg|lbs?|pounds|meters?|feet)\b", re.I),
    ),
)


# the kind is what the question itself asks for: its head (a "when" further on is a clause about something else, as
# in "how many days passed between when ..."); a question in the past tense asks about an event, not a current value
UPDATE_HEAD_WORDS = 6
_PAST = re.compile(r"^\s*(?:\w+\s+){1,2}(?:did|was|were|had)\b", re.I)
# two statements carrying the asked kind of value are about one subject only when their packet vectors are this close:
# sharing the question's words alone also joins a neighbour ("an interview with the creative director via Zoom" after
# "the Zoom call with the creative director moved")
UPDATE_KIND_MIN_COSINE = 0.6


def answer_values(query: str, claim: str) -> frozenset[str] | None:
    """The values in `claim` of the kind `query` asks for (None when the question asks for no kind we know)."""
    head = " ".join(query.split()[:UPDATE_HEAD_WORDS])
    if _PAST.match(head):
        return None
    kinds = [v for cue, v in _KINDS if cue.search(head)]
    if not kinds:
        return None
    found = {m.group(0) for v in kinds for m in v.finditer(claim)}
    return frozenset(" ".join(re.sub(r"[$,]", "", f).lower().split()) for f in found)


def typed_supersessions(
    packets: Sequence[SourcePacket],
    claims: Callable[[str], Sequence[str]],
    query: str,
    cosine: Callable[[str, str], float],
    when: Callable[[SourcePacket], tuple] = said_at,
) -> dict[str, Supersession]:
    """Earlier packet id -> the latest later packet of the same speaker, about the same subject (a claim of each
    names a topic term of the question, and the packets' vectors are close), carrying another value of the kind the
    question asks for."""
    q = topic_terms(query)
    ordered = sorted(packets, key=when)
    said: dict[str, list[frozenset[str]]] = {}
    for p in ordered:
        vals = [answer_values(query, c) for c in claims(p.packet_id) if topic_terms(c) & q]
        said[p.packet_id] = [v for v in vals if v]
    out: dict[str, Supersession] = {}
    for i, old in enumerate(ordered):
        for new in reversed(ordered[i + 1 :]):
            if new.speaker != old.speaker or old.packet_id in out or not said[old.packet_id]:
                continue
            if cosine(old.packet_id, new.packet_id) < UPDATE_KIND_MIN_COSINE:
                continue
            for a in said[old.packet_id]:
                b = next((b for b in said[new.packet_id] if a - b and b - a), None)
                if b:
                    out[old.packet_id] = Supersession(
                        old.packet_id, new.packet_id, tuple(sorted(a - b)), tuple(sorted(b - a))
                    )
                    break
    return out


def statement_terms(claims: Sequence[str]) -> frozenset[str]:
    """The topic terms of a packet's claims that state one thing each (long claims, code and lists, state none)."""
    return frozenset(t for c in claims if len(tt := topic_terms(c)) <= UPDATE_MAX_CLAIM_TERMS for t in tt)


# two statements of one speaker are one subject told again with any other value only when their packet vectors are
# this close: another fact about the same entity ("the staging DB runs two read replicas") is close too, but less
UPDATE_SUBJECT_MIN_COSINE = 0.8


def subject_supersessions(
    packets: Sequence[SourcePacket],
    claims: Callable[[str], Sequence[str]],
    query: str,
    cosine: Callable[[str, str], float],
    subjects: Callable[[str], frozenset[str]],
    when: Callable[[SourcePacket], tuple] = said_at,
    min_cosine: float = UPDATE_SUBJECT_MIN_COSINE,
) -> dict[str, Supersession]:
    """Earlier packet id -> the latest later packet of the same speaker about the same subject, whatever the value:
    for a question asking one current value, each of the best `UPDATE_NEWEST_SEEDS` statements (`packets` in rank
    order) is superseded by a later statement of its speaker whose packet vector is close to it
    (`min_cosine`), that names a subject of it (`subjects`: the terms of its claims' people and keywords,
    "Berlin" in "I moved from Berlin to Lisbon") or of the question ("live"), and that states something it does not
    (a new value; a statement told again adds nothing). The values are not named: no rule knows which words of the
    newer statement are the value."""
    if not asks_one_value(query):
        return {}
    q = topic_terms(query)
    terms = {p.packet_id: statement_terms(claims(p.packet_id)) for p in packets}
    out: dict[str, Supersession] = {}
    for old in packets[:UPDATE_NEWEST_SEEDS]:
        mine = terms[old.packet_id]
        if not mine:
            continue
        later = sorted((p for p in packets if p.speaker == old.speaker and when(p) > when(old)), key=when)
        for new in reversed(later):
            theirs = terms[new.packet_id]
            about = subjects(old.packet_id) | q
            if theirs & about and theirs - mine and cosine(old.packet_id, new.packet_id) >= min_cosine:
                out[old.packet_id] = Supersession(old.packet_id, new.packet_id, (), ())
                break
    return out


def current_first(selected: Sequence[str], found: dict[str, Supersession]) -> list[str]:
    """The selection with each superseding statement moved right before the earliest-ranked statement it supersedes
    (the current fact is read first); the set of packets stays."""
    out = list(selected)
    for old, s in sorted(found.items(), key=lambda x: out.index(x[0]) if x[0] in out else len(out)):
        if old in out and s.new in out and out.index(s.new) > out.index(old):
            out.remove(s.new)
            out.insert(out.index(old), s.new)
    return out


@dataclass(frozen=True)
class Candidate:
    """Two claims of one speaker about the same rare query topic, the older first: what a model is asked to decide."""

    old: str  # packet ids
    new: str
    old_claim: str
    new_claim: str
    shared: float  # summed relative idf of their shared topic terms


def candidates(
    packets: Sequence[SourcePacket],
    claims: Callable[[str], Sequence[str]],
    query: str,
    idf: Callable[[str], float],
    limit: int,
    when: Callable[[SourcePacket], tuple] = said_at,
) -> list[Candidate]:
    """At most `limit` (older, newer) packet pairs of one speaker whose claims name one subject as restated() tells
    it (shared topic terms rare in the memory, or two of the question's terms), best pair of claims per packet pair,
    most shared first. No value rule: a model decides whether the newer claim changes the older one's value (a name,
    a place, a plan as well as a number)."""
    q = topic_terms(query)
    ordered = sorted(packets, key=when)
    said = {
        p.packet_id: [
            (c, t) for c in claims(p.packet_id) if (t := topic_terms(c)) & q and len(t) <= UPDATE_MAX_CLAIM_TERMS
        ]
        for p in ordered
    }
    out = []
    for i, old in enumerate(ordered):
        for new in ordered[i + 1 :]:
            if new.speaker != old.speaker:
                continue
            pairs = [
                (sum(idf(t) for t in ta & tb), len(ta & tb & q), a, b)
                for a, ta in said[old.packet_id]
                for b, tb in said[new.packet_id]
                if ta & tb & q and a != b
            ]
            one = [x for x in pairs if x[0] >= UPDATE_MIN_SHARED_IDF or x[1] >= 2]
            if one:
                shared, _, a, b = max(one, key=lambda x: x[0])
                out.append(Candidate(old.packet_id, new.packet_id, a, b, shared))
    return sorted(out, key=lambda c: -c.shared)[:limit]


# The newest statement of the question's subject (engineering, not in the paper). A question about a fact that
# changed finds the fact's statements by their words and vectors, and the older one often wins: it names the subject
# in the question's words, while the update may name it in other words, only in the turn before ("Re the test suite:"
# ... "it's 21 minutes now"), or among other news. So the best-ranked selected statements with a value each call in
# the newest later statement of their subject: same speaker; a value of the attribute the question asks about (a unit
# it names, or the kind of value it asks for) that no earlier statement of the subject holds (a value told again as
# history is no update); about the same entity: it, or the same speaker's turn just before it (a continuation names no
# subject of its own), shares a topic word with the statement or the question and has a packet vector close to the
# statement's. Only a question asking for one value calls any in: a wh-question, not in the past tense (an event), not
# about the whole history or what lies between two things (every statement counts there).
UPDATE_NEWEST_SEEDS = 3  # the best selected packets that can call in their subject's newest statement


_WH = re.compile(r"^\s*(?:what|which|when|where|who|whom|whose|how)\b", re.I)
_TWO = re.compile(r"\bbetween\b", re.I)


def asks_one_value(query: str) -> bool:
    """A wh-question about a current value: not a yes/no question, not in the past tense, not about the whole
    history or the span between two things."""
    head = " ".join(query.split()[:UPDATE_HEAD_WORDS])
    return bool(_WH.match(query)) and not _PAST.match(head) and not spans_history(query) and not _TWO.search(query)


def asked_values(query: str, claims: Sequence[str]) -> dict[str, frozenset[str]]:
    """Attribute -> the values the claims state for an attribute the question asks about: a unit the question names
    or the kind of value it asks for (key "kind"). Lists (many values, in one claim or over a packet's claims) state
    no one fact."""
    q = topic_terms(query)
    out: dict[str, set[str]] = {}
    for c in claims:
        if not _NUMBER.search(c) or value_count(c) > UPDATE_MAX_VALUES or len(topic_terms(c)) > UPDATE_MAX_CLAIM_TERMS:
            continue
        for unit, vals in quantities(c).items():
            if unit in q:
                out.setdefault(unit, set()).update(vals)
        if kind := answer_values(query, c):
            out.setdefault("kind", set()).update(kind)
    if len(set().union(*out.values())) > UPDATE_MAX_VALUES:  # a list or a schedule over several claims
        return {}
    return {u: frozenset(v) for u, v in out.items()}


def newest_statements(
    query: str,
    selected: Sequence[str],
    pool: Sequence[str],
    packets: Callable[[str], SourcePacket],
    claims: Callable[[str], Sequence[str]],
    before: Callable[[str], str | None],
    cosine: Callable[[str, str], float],
    min_cosine: float,
    skip_speaker: str = "",
    when: Callable[[SourcePacket], tuple] = said_at,
) -> tuple[list[str], dict[str, Supersession]]:
    """(the selection with each seed's newest subject statement in it, seed -> its supersession by that statement:
    the older statement is marked superseded when rendered). A statement called
    in goes right after its seed and the selection's last other packet leaves (the length stays; the render stage
    then puts it before the seed, current_first). `before(pid)`: the same
    speaker's turn just before pid in its session (None when there is none)."""
    out: list[str] = list(selected)
    found: dict[str, Supersession] = {}
    if not asks_one_value(query):
        return out, found
    chosen = set(out)
    q = topic_terms(query)
    said: dict[str, dict[str, frozenset[str]]] = {}

    def units(p: str) -> dict[str, frozenset[str]]:  # read only for the packets a seed can call in
        if p not in said:
            said[p] = asked_values(query, claims(p))
        return said[p]

    for a in list(selected[:UPDATE_NEWEST_SEEDS]):
        pa = packets(a)
        if pa.speaker == skip_speaker or not units(a):
            continue

        words = (q | {t for c in claims(a) for t in topic_terms(c)}) - set(units(a))

        def link(b: str) -> float:  # the closer of b and the turn before it that shares a topic word
            near = [x for x in (b, before(b)) if x and words & {t for c in claims(x) for t in topic_terms(c)}]
            return max((cosine(a, x) for x in near), default=-1.0)

        later = sorted(
            (b for b in pool if b != a and packets(b).speaker == pa.speaker and when(packets(b)) > when(pa)),
            key=lambda b: when(packets(b)),
        )
        subject = [b for b in later if units(b).keys() & units(a).keys() and link(b) >= min_cosine]
        seen = {u: set(v) for u, v in units(a).items()}
        newest: str | None = None
        values: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        for b in subject:  # in order: an update states a value for an attribute of the seed that none before did
            ub = units(b)
            shared = sorted(ub.keys() & seen.keys())
            if came := next((u for u in shared if ub[u] - seen[u]), None):
                newest = b
                values = (tuple(sorted(units(a)[came] - ub[came])), tuple(sorted(ub[came] - seen[came])))
            for u in shared:
                seen[u] |= ub[u]
        if newest is None:
            continue
        if newest not in chosen:  # the last packet that is neither a seed nor called in leaves
            keep = {*selected[:UPDATE_NEWEST_SEEDS], *(f.new for f in found.values())}
            drop = next((p for p in reversed(out) if p not in keep), None)
            if drop is None:
                continue
            out.remove(drop)
            chosen.discard(drop)
            out.insert(out.index(a) + 1, newest)
            chosen.add(newest)
        found[a] = Supersession(a, newest, *values)
    return out, found


def newest_of_subjects(
    inp: ScheduleInput, selected: list[str], cfg: MemCompileConfig
) -> tuple[list[str], dict[str, Supersession]]:
    """The selection with the newest statement of its best statements' subjects in it (evidence/updates.py), and
    the older statements' supersessions."""
    index = inp.index
    if not asks_one_value(inp.query):  # most questions end here, before any vector is read
        return selected, {}
    rows = index.vectors.row
    pool = list(dict.fromkeys([*(p.packet_id for p in inp.pool), *(h.packet_id for h in inp.dense)]))
    if not all(p in rows for p in [*selected, *pool]):  # no vectors (yet): nothing to tell a subject by
        return selected, {}
    m = index.vectors.matrix()
    unit: dict[str, np.ndarray] = {}

    def vector(p: str) -> np.ndarray:
        if p not in unit:
            unit[p] = m[rows[p]] / (float(np.linalg.norm(m[rows[p]])) or 1.0)
        return unit[p]

    def cosine(a: str, b: str) -> float:
        return float(vector(a) @ vector(b))

    def before(pid: str) -> str | None:
        p, pos = index.packets[pid], index.packet_position[pid]
        for back in (1, 2):  # the speaker's previous turn, across at most one turn of the other speaker
            if pos - back < 0:
                return None
            q = index.packets[index.packet_order[pos - back]]
            if q.session != p.session:
                return None
            if q.speaker == p.speaker:
                return q.packet_id if q.packet_id in rows else None
        return None

    return newest_statements(
        inp.query,
        selected,
        pool,
        index.packets.__getitem__,
        lambda pid: [d.claim for d in index.by_packet[pid]] or [index.packets[pid].text],
        before,
        cosine,
        cfg.update_newest_cosine,
        cfg.assistant_speaker,
        statement_times(index),
    )
