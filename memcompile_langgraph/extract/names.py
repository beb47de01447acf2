"""The people of a conversation as the heuristic extractor sees them (Sec. 3.2.1): names, nicknames, vocatives."""

from __future__ import annotations

import re
from functools import lru_cache

from ..text.terms import STOPWORDS
from .base import TurnWindow

# Names that are also ordinary words only count as a person when written with a capital.
WORD_LIKE_NAMES = frozenset(
    "will may mark rose grace joy hope faith bill art june april august summer dawn sky sunny jack pat sue frank "
    "rich victor sandy holly ivy daisy amber crystal autumn river storm bob jean gene chase".split()
)
MAX_NICKNAME = 12  # longest prefix taken as a nickname: each prefix is one more alternative in every name regex
# Openers stripped from a sentence: the first group always, the second only before punctuation or a name.
_OPENER = r"(?:oh|ooh|wow|whoa|woah|hey|hi|hello|yay|aw+|omg|um+|hmm+|btw|ha(?:ha)+|lol|yeah|yep|yup)"
_OPENER_PUNCT = (
    r"(?:yes|thanks|thank\s+you(?:\s+so\s+much)?|ok|okay|cool|great|awesome|nice|totally|absolutely|definitely|"
    r"sure|well|so|anyway|man|dude|agreed|exactly|true|right|congrats|congratulations|good\s+luck)"
)


class Names:
    """Known people of a conversation: canonical names, first names and unique nickname prefixes ("Mel")."""

    def __init__(self, people: tuple[str, ...]):
        canonical = tuple(dict.fromkeys(p.strip() for p in people if p and p.strip()))
        full = {p.lower(): p for p in canonical}
        first: dict[str, str | None] = {}
        for p in canonical:
            key = p.split()[0].lower()
            first[key] = p if first.get(key, p) == p else None
        self.lookup = {**{k: v for k, v in first.items() if v}, **full}
        prefixes: dict[str, str | None] = {}
        for key, name in self.lookup.items():
            if " " in key:
                continue
            for end in range(3, min(len(key), MAX_NICKNAME + 1)):
                prefix = key[:end]
                prefixes[prefix] = name if prefixes.get(prefix, name) == name else None
        self.nicknames = {k: v for k, v in prefixes.items() if v and k not in self.lookup and k not in STOPWORDS}
        # name words are not keywords; a name that is also a word ("Art") only when written as a name
        self.tokens = frozenset(w for key in self.lookup for w in key.split() if w not in WORD_LIKE_NAMES)
        self.filler = self.tokens | set(self.nicknames)  # words that do not make a sentence informative
        alternation = "|".join(re.escape(k) for k in sorted({*self.lookup, *self.nicknames}, key=len, reverse=True))
        self._pattern = re.compile(rf"\b(?:{alternation})\b", re.I) if alternation else None
        vocative = rf"(?:{alternation})" if alternation else r"(?!x)x"
        punct = r"[,!.\u2026-]"
        self.leading = re.compile(
            rf"^(?:{_OPENER}\b{punct}*\s*"
            rf"|(?:{_OPENER_PUNCT}|{vocative})\s*{punct}+\s*"
            rf"|{_OPENER_PUNCT}\s+(?={vocative}\b))+",
            re.I,
        )
        self.trailing = re.compile(rf"\s*,\s*{vocative}\s*(?=[.!?\u2026]*$)", re.I)

    def mentions(self, text: str) -> list[tuple[str, str]]:
        """(canonical name, words as written in lower case) for each person mention in `text`, in order."""
        found = []
        for m in self._pattern.finditer(text) if self._pattern else ():
            key = m.group().lower()
            name = self.lookup.get(key)
            capitalized = m.group()[0].isupper()
            if name is None:  # a nickname prefix: only as a capitalized word inside the text
                name = self.nicknames[key] if capitalized and m.start() > 0 else None
            elif (key in WORD_LIKE_NAMES or key in STOPWORDS) and not capitalized:
                name = None
            if name:
                found.append((name, key))
        return found

    def find(self, text: str) -> list[str]:
        """Canonical names mentioned in `text`, deduplicated, in order of first appearance."""
        return list(dict.fromkeys(name for name, _ in self.mentions(text)))


@lru_cache(maxsize=256)
def _names(people: tuple[str, ...]) -> Names:
    return Names(people)


def names_for(window: TurnWindow) -> Names:
    """The names a turn may mention: its speaker, the preceding speaker and everyone known so far."""
    people = {window.packet.speaker, *window.known_people, window.previous.speaker if window.previous else ""}
    return _names(tuple(sorted(people - {""})))  # sorted: one cached index per set of names
