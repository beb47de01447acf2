"""Keywords of a claim (Key_i, App. B.1): short runs of content words, the most salient first chosen."""

from __future__ import annotations

import re
from functools import lru_cache

from ..text.terms import STOPWORDS
from .sentences import LAUGH, LOW_CONTENT, normalize_quotes

# Light verbs, adverbs and template words: fine inside a claim, useless as retrieval keywords.
GENERIC = LOW_CONTENT | frozenset(
    """time really thanks thank said asked answering question shared others someone everyone people make made
    making took taking get getting come came coming say gave put find found looking looked seem seemed try tried
    trying use used start started need needed also still even always usually often sometimes ever already lately
    finally especially actually probably maybe quite every ones one little big able whole different important
    special huge might must shall since around front together else along across toward towards within without
    anyone went gone goes never""".split()
)
_TIME_WORDS = frozenset(
    """yesterday today tonight tomorrow morning afternoon evening night day days week weeks weekend weekends month
    months year years ago last next recently earlier later soon now past spring summer fall autumn winter
    january february march april may june july august september october november december jan feb mar apr jun
    jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu
    thur thurs fri sat sun couple few several two three four five six seven eight nine ten eleven twelve
    first second third decade decades""".split()
)
_KEYWORD_TOKEN = re.compile(r"[^\W_]+(?:['-][^\W_]+)*|[^\s\w]|_")


@lru_cache(maxsize=65536)
def _is_keyword_word(word: str) -> bool:
    return (
        len(word) > 1
        and word[0].isalnum()
        and "'" not in word
        and not word.isdigit()
        and word not in STOPWORDS
        and word not in GENERIC
        and not (word[-1] == "s" and word[:-1] in GENERIC)
        and word not in _TIME_WORDS
        and not LAUGH.match(word)
    )


def keyword_phrases(fact: str, skip: frozenset[str] | set[str], max_keywords: int) -> tuple[str, ...]:
    """Up to max_keywords runs of 1-3 content words (none in `skip`), the most salient, in order of appearance."""
    phrases: dict[tuple[str, ...], int] = {}
    run: list[str] = []
    for token in _KEYWORD_TOKEN.findall(normalize_quotes(fact).lower() + " ."):
        word = token[:-2] if token[-2:] == "'s" else token
        if word not in skip and _is_keyword_word(word):
            run.append(word)
            continue
        # a long run is cut from the right: the head of an English noun phrase comes last
        for end in range(len(run) % 3 or 3, len(run) + 1, 3):
            phrases.setdefault(tuple(run[max(0, end - 3) : end]), len(phrases))
        run = []
    chosen: list[tuple[str, ...]] = []
    for phrase in sorted(phrases, key=lambda p: (-len(p), -sum(map(len, p)), phrases[p])):
        if len(chosen) == max_keywords:
            break
        if not any(set(phrase) <= set(c) for c in chosen):  # no "inspiring" after "inspiring stories"
            chosen.append(phrase)
    return tuple(" ".join(p) for p in sorted(chosen, key=phrases.__getitem__))
