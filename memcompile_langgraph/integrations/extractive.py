"""A small extractive reader over a compiled context: no language model, it quotes one remembered claim.

Offline, the demos still have to answer their own questions, so this picks the claim of the rendered blocks that
best answers the question and quotes it with its dia_id and date. It reads each claim as a statement: the
reported-speech frame the heuristic extractor writes ("X said:", "X, answering Y's question '...', said:") is
looked through, questions ("X asked: ...") answer nothing, and a claim that only restates the question is no answer
but marks its turn as the one the answer is in. Relevance is the cosine of question and claim with the memory's
own embedder (term overlap weighted by rarity within the context when there is none), plus a small bonus when the
statement holds what the question word asks for (a person for who, a time for when, a reason for why, a number
for how many). It is a stand-in that shows the memory working, not a reader of the paper's quality.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..text.terms import STOPWORDS, term_set

_HEADER = re.compile(r"^\[(?P<dia>[^\]]+)\] (?P<rest>.*\bsession \d+)$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_FRAME = re.compile(r"^[^:]{1,80}?, answering [^']{1,80}'s question '.*', said: |^[^:]{1,80}? said: ")
_ASKED = re.compile(r"^[^:]{1,80}? asked(?: [^:]{1,80})?: ")
_PROPER = re.compile(r"\b[A-Z][a-z]+\b")
_MONTHS = "january february march april may june july august september october november december"
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"
_NOT_PEOPLE = frozenset((_MONTHS + " " + _WEEKDAYS).split())
_TIME = re.compile(
    rf"\b(?:\d{{1,4}}|{_MONTHS.replace(' ', '|')}|{_WEEKDAYS.replace(' ', '|')}|yesterday|today|tomorrow|tonight|"
    r"ago|last|next|since|week|weekend|month|year|morning|evening|night)\b",
    re.I,
)
_REASON = re.compile(r"\b(?:because|since|due to|so that|as a result|after|caused|reason)\b", re.I)
_NUMBER = re.compile(r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|dozen|hundred)\b", re.I)
CUE_BONUS = 0.15  # what fitting the question word is worth against a cosine step
TURN_WEIGHT = 0.3  # how much a restatement of the question lifts the other claims of its turn


@dataclass(frozen=True)
class Claim:
    dia_id: str
    date: str
    text: str


@dataclass(frozen=True)
class Answer:
    text: str
    dia_ids: tuple[str, ...]

    def render(self) -> str:
        """Says where the answer comes from and that no model wrote it."""
        return f"From memory [{', '.join(self.dia_ids)}], quoted by the offline reader: {self.text}"


def statement(claim: str) -> str | None:
    """What the claim states, without the reported-speech frame; None for a question."""
    if _ASKED.match(claim) or claim.rstrip().endswith("?"):
        return None
    return _FRAME.sub("", claim, count=1)


def _asks_for(question: str) -> re.Pattern | None:
    first = question.lower()
    if re.search(r"\bhow (?:many|much|long|old)\b", first):
        return _NUMBER
    for word, cue in (("who", None), ("whom", None), ("whose", None), ("when", _TIME), ("why", _REASON)):
        if re.search(rf"\b{word}\b", first):
            return cue if cue is not None else _PROPER
    return None


def _fits(cue: re.Pattern | None, text: str, question: str) -> bool:
    if cue is None:
        return False
    if cue is _PROPER:  # a person the question does not name already
        named = {w.lower() for w in _PROPER.findall(question)}
        return any(w.lower() not in named | STOPWORDS | _NOT_PEOPLE for w in _PROPER.findall(text))
    return bool(cue.search(text))


def _relevance(question: str, texts: Sequence[str], embeddings: Any) -> list[float]:
    if embeddings is not None:
        q = embeddings.embed_query(question)
        return [sum(a * b for a, b in zip(q, v)) for v in embeddings.embed_documents(list(texts))]
    asked, sets = term_set(question), [term_set(t) for t in texts]
    df: dict[str, int] = {}
    for s in sets:
        for t in s:
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log(1 + len(sets) / n) for t, n in df.items()}
    norm = sum(idf.get(t, 0.0) for t in asked) or 1.0
    return [sum(idf[t] for t in asked & s) / norm for s in sets]


def ranked(question: str, claims: Sequence[Claim], embeddings: Any = None) -> list[tuple[float, Claim]]:
    """(score, claim) for every claim that states something beyond the question, best first; equal scores keep the
    context's order (the schedule ranked the earlier block higher)."""
    if not claims:
        return []
    relevance = _relevance(question, [c.text for c in claims], embeddings)
    asked, cue = term_set(question), _asks_for(question)
    turn_lift: dict[str, float] = {}
    candidates = []
    for c, rel in zip(claims, relevance):
        said = statement(c.text)
        if said is None:
            continue
        if term_set(said) <= asked:  # restates the question: its turn is where the answer is
            turn_lift[c.dia_id] = max(turn_lift.get(c.dia_id, 0.0), rel)
            continue
        candidates.append((rel + (CUE_BONUS if _fits(cue, said, question) else 0.0), c))
    scored = [(score + TURN_WEIGHT * turn_lift.get(c.dia_id, 0.0), c) for score, c in candidates]
    return sorted(scored, key=lambda x: -x[0])  # stable: ties keep the earlier claim


def answer(question: str, claims: Sequence[Claim], embeddings: Any = None) -> Answer | None:
    """The claim that best answers the question, or None when no claim states anything beyond it."""
    scored = ranked(question, claims, embeddings)
    if not scored:
        return None
    c = scored[0][1]
    when = f" (said on {c.date})" if c.date else ""
    return Answer(f"{c.text.rstrip()}{when}", (c.dia_id,))


def block_dia_ids(context: str) -> set[str]:
    """The dia_ids of every rendered block ("[dia_id] speaker | time | session n") in the text."""
    return {head["dia"] for line in context.splitlines() if (head := _HEADER.match(line))}


def parse_claims(context: str) -> list[Claim]:
    """(dia_id, date, claim) for every claim line of rendered blocks ("[dia_id] speaker | time | session n")."""
    out = []
    dia = date = ""
    for line in context.splitlines():
        if head := _HEADER.match(line):
            dia = head["dia"]
            fields = head["rest"].rsplit(" | ", 2)  # speaker | time | session n; an empty time may be left out
            when = fields[1].strip() if len(fields) == 3 else ""
            date = when[:10] if _DATE.match(when) else when
        elif dia and line.startswith("- ") and line[2:].strip():
            out.append(Claim(dia, date, line[2:]))
    return out
