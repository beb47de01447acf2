"""Term normalization shared by BM25, Jaccard terms (Eq. 7, 22) and keyword matching."""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
    him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't
    my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves then there there's
    these they they'd they'll they're they've this those through to too under until up very was wasn't we we'd
    we'll we're we've were weren't what what's when when's where where's which while who who's whom why why's
    with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves also just really
    yeah yes oh hey hi hello wow thanks thank okay ok lol like get got gonna wanna s t re ve ll d m""".split()
)

_stemmer = snowballstemmer.stemmer("english")


def clean_text(text: str) -> str:
    """Drop control and bidi-override characters; keep everything a reader needs."""
    text = unicodedata.normalize("NFC", text)
    return _CONTROL.sub("", text).replace("\r\n", "\n").strip()


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    return _stemmer.stemWord(word)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def terms(text: str) -> list[str]:
    """Lower-cased, stop-word-free, stemmed terms in order (duplicates kept, as BM25 wants)."""
    out = []
    for w in words(text):
        if "'" in w:
            w = w.split("'", 1)[0]
        if w and w not in STOPWORDS:
            out.append(stem(w))
    return out


def term_set(text: str) -> frozenset[str]:
    return frozenset(terms(text))


def count_tokens(text: str) -> int:
    """Offline token count: words and punctuation marks (no tokenizer download needed)."""
    return len(_TOKEN.findall(text))


def jaccard(a: set | frozenset, b: set | frozenset) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if inter else 0.0


def name_key(name: str) -> str:
    return " ".join(words(name))
