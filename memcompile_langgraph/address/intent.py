"""Offline query-only intent (App. F fields): people, keywords, time, temporal flag, attribute need."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ..model import Intent
from ..text.terms import STOPWORDS, name_key, terms, words
from ..text.timeparse import question_time

_TEMPORAL = re.compile(
    r"^\s*when\b|\bwhat (?:year|month|day|date|time|week|season)\b|\bhow long\b|\bhow many (?:years|months|weeks|days|times)\b"
    r"|\b(?:ago|since|before|after|during|until)\b|\b(?:19|20)\d\d\b|\b(?:january|february|march|april|may|june|july|august|"
    r"september|october|november|december)\b|\blast (?:week|month|year|weekend)\b",
    re.I,
)
_ATTRIBUTE = re.compile(
    r"\b(?:favorite|favourite|prefer|like|likes|enjoy|hobby|hobbies|job|work|career|occupation|profession|identity|"
    r"relationship|status|married|single|allergic|health|goal|dream|plan|plans|pet|pets|family|kids|children|"
    r"personality|trait|values|believe|religion|religious|political|live|lives|from|age|old)\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.I)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b", re.I)
# a request to the assistant ("can you list ...", "do you remember ...") asks it to act, not about what it said
_REQUEST = re.compile(r"\b(?:(?:can|could|would|will) you|do you (?:remember|recall|know))\b", re.I)
_QUESTION_WORDS = frozenset(
    "what when where which who whom whose why how did does do is are was were would could should".split()
)


def match_people(text: str, known_people: Sequence[str]) -> tuple[str, ...]:
    """Known names mentioned in the text (full name or its first word), canonical, in order of mention."""
    tokens = words(text)
    present = set(tokens)
    found: list[tuple[int, str]] = []
    for name in known_people:
        parts = _name_parts(name)
        if not parts or parts[0] not in present:  # every match below starts with the first word
            continue
        for i in range(len(tokens)):
            if tokens[i : i + len(parts)] == parts or (len(parts) > 1 and tokens[i] == parts[0]):
                found.append((i, name))
                break
    return tuple(dict.fromkeys(n for _, n in sorted(found)))


@lru_cache(maxsize=4096)
def _name_parts(name: str) -> list[str]:
    return name_key(name).split()


def query_keywords(query: str, people: Sequence[str], limit: int = 5) -> tuple[str, ...]:
    """Maximal runs of content words, people and question words left out, at most `limit`."""
    names = {w for p in people for w in name_key(p).split()}
    phrases, run = [], []
    for w in words(query) + [""]:
        w = w.split("'", 1)[0]
        if w and w not in STOPWORDS and w not in names and w not in _QUESTION_WORDS:
            run.append(w)
            continue
        if run:
            phrases.append(" ".join(run[:3]))
            run = []
    return tuple(dict.fromkeys(phrases))[:limit]


def offline_intent(query: str, known_people: Sequence[str], max_keywords: int = 5) -> Intent:
    people = match_people(query, known_people)
    keywords = query_keywords(query, people, max_keywords)
    time = question_time(query) or None
    temporal = bool(_TEMPORAL.search(query))
    return Intent(
        query=query,
        people=people,
        keywords=keywords,
        time=time,
        temporal=temporal,
        need_attribute=bool(_ATTRIBUTE.search(query)),
        terms=tuple(dict.fromkeys(terms(query) + terms(" ".join(keywords)))),
    )


def addressed_speakers(query: str, self_speaker: str, assistant_speaker: str) -> tuple[str, ...]:
    """The speakers a user's question points at by pronoun: "I/my" is the asker, "you" the assistant."""
    text = query.replace("\u2019", "'")
    pairs = ((self_speaker, _FIRST_PERSON, text), (assistant_speaker, _SECOND_PERSON, _REQUEST.sub(" ", text)))
    return tuple(name for name, pattern, said in pairs if pattern.search(said))


def enriched_query(intent: Intent) -> str:
    """q+ of App. C.2: the question with the intent's people, keywords and time."""
    # a year-less time ("--06") says nothing the question's own words do not
    extra = [*intent.people, *intent.keywords] + ([intent.time] if intent.time and intent.time[:2] != "--" else [])
    return intent.query + ("\n" + " ".join(extra) if extra else "")
