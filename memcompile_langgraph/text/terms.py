"""Term normalization shared by BM25, Jaccard terms (Eq. 7, 22) and keyword matching."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_TOKEN = re.compile(r"\w+|[^\w\s]")
# every code point str.splitlines() ends a line at (\r\n counts as one break)
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK = re.compile(f"\r\n|[{_LINE_BREAKS}]")
_BREAK_RUN = re.compile(rf"\s*[{_LINE_BREAKS}]\s*")
# dangerous, removed: controls other than tab and line breaks, bidi embeddings/overrides/isolates (can reorder
# what a reader sees), a BOM inside text; invalid: lone surrogates (JSON can carry them), replaced by U+FFFD.
# Joiners (U+200C/U+200D), direction marks and every other character are kept.
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_INTERROGATIVE = frozenset(
    """what what's whats which who who's whom whose when where where's why how how's is are am was were do does did
    have has had can could will would should shall may might must don't doesn't didn't isn't aren't wasn't weren't
    haven't hasn't can't couldn't won't wouldn't shouldn't any anything""".split()
)
_ASK_MAX_WORDS = 20
_LEADING = frozenset("so and but oh hey well ok okay also then hmm um btw anyway wait now".split())
_DANGEROUS = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069\ufeff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# the separators of a provenance header "[dia_id] speaker | time | session N": a field shows look-alikes instead
_HEADER_SEPARATORS = str.maketrans({"|": "\u00a6", "[": "(", "]": ")"})

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


@dataclass(frozen=True)
class Cleaned:
    text: str
    removed: int  # dangerous characters dropped
    invalid: int  # lone surrogates replaced by U+FFFD


def scrub(text: str) -> Cleaned:
    """NFC text with every line break as \\n, dangerous characters removed and invalid ones replaced (counted)."""
    text, invalid = _SURROGATE.subn("\ufffd", text)
    text, removed = _DANGEROUS.subn("", text)
    text = _BREAK.sub("\n", unicodedata.normalize("NFC", text))
    return Cleaned(text.strip(), removed, invalid)


def clean_text(text: str) -> str:
    return scrub(text).text


def one_line(text: str) -> str:
    """Text that can never start a line of its own (no code point str.splitlines() breaks at)."""
    return _BREAK_RUN.sub(" ", text).strip()


def header_field(value: object) -> str:
    """A provenance-header field that cannot forge another field or line: one line, look-alike separators."""
    return one_line(str(value)).translate(_HEADER_SEPARATORS)


def bounded(text: str, limit: int) -> str:
    """At most `limit` characters of text, with a visible marker of what was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


def normalize_id(value: object) -> str:
    """An id handed to an API, cleaned exactly as a stored one is (NFC, one line), so both meet."""
    if not isinstance(value, str):
        raise ValueError(f"an id must be a string, got {type(value).__name__}")
    return one_line(scrub(value).text)


def normalize_ids(ids: str | Iterable[object]) -> list[str]:
    """normalize_id of each id; one string is one id, not its characters."""
    return [normalize_id(i) for i in ([ids] if isinstance(ids, str) else ids)]


def clean_query(query: object) -> str:
    """A query as the address plane reads it; ValueError (one line) when there is nothing to search for."""
    if not isinstance(query, str):
        raise ValueError(f"query must be a string, got {type(query).__name__}")
    query = clean_text(query)
    if not any(ch.isalnum() for ch in query):  # "" and "??" alike: no channel has anything to match
        raise ValueError("query must contain a word (a letter or digit)")
    return query


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


def jaccard(a: set | frozenset, b: Collection[str]) -> float:
    """|a & b| / |a | b|; b may be any collection of distinct items (a tuple of distinct terms)."""
    if not a or not b:
        return 0.0
    inter = len(a.intersection(b))
    return inter / (len(a) + len(b) - inter) if inter else 0.0


def name_key(name: str) -> str:
    return " ".join(words(name))


def _opens_question(ws: list[str]) -> bool:
    first = ws[1:2] if ws[:1] and ws[0] in _LEADING else ws[:1]
    return bool(first) and first[0] in _INTERROGATIVE


def only_asks(text: str) -> bool:
    """A turn that asks and states nothing ("What is my dog called?", "Hey! How was the trip?"): every sentence of
    more than three words is a question opening with a question word or an auxiliary (after "so", "and", ...). A
    sentence that states first and asks at its end ("I've done 10 problems, can you help me ...?"), or a long one
    (a problem set out in the asking), states something.
    Such a turn is weak evidence for its own answer."""
    asked = False
    for sentence in _SENTENCE.findall(text):
        sentence = sentence.strip()
        ws = words(sentence)
        if sentence.endswith("?") and len(ws) <= _ASK_MAX_WORDS and _opens_question(ws):
            asked = True
        elif len(sentence.split()) > 3:
            return False
    return asked
