"""Sentences of a turn and which of them carry a fact: greetings, acknowledgements and filler carry none."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..text.terms import STOPWORDS, clean_text, words
from .names import Names

# Words that carry no fact on their own: a sentence made only of these (plus stop words and names) is filler.
LOW_CONTENT = frozenset(
    """great awesome cool amazing wonderful fantastic incredible brilliant nice fun sweet lovely beautiful gorgeous
    stunning impressive glad happy proud excited good luck care bye goodbye congrats congratulations haha hahaha
    hehe lmao omg aw aww awww yay whoa ooh ah hmm um totally agreed agree sure definitely absolutely true right
    exactly indeed appreciate appreciated welcome sounds sound hear heard see seeing talk talking soon later catch
    keep means meant lot lots love loved feel feels felt thing things stuff something anything everything kind
    bit way much many new part best nope yep yup nah cheers kudos bravo well super pretty tell telling share
    sharing hope hoping wish glad mind guess bet believe know knew think thought wanted want going go doing done
    man dude guys friend buddy there here let wait ask asking update news life huh woah pic pics photo photos
    picture pictures look check take will give mean interesting cute yum yummy mr mrs ms dr""".split()
)
LAUGH = re.compile(r"^(?:a*h+a+(?:ha)*h*|he(?:he)+|lo+l|x+d+)$")
ACKNOWLEDGEMENT = re.compile(r"^(?:(?:but|and|so)\s+)?(?:thanks|thank\s+you|congrats|congratulations)\b", re.I)

_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d\u2b50\u2764]+")
_BOUNDARY = re.compile(r"(?<=[.!?\u2026])[\"')\]\u201d\u2019]*\s+|\s*\n+\s*")
# a piece ending like this does not end a sentence: titles, initials, list numbers ("1.")
_ABBREVIATION = re.compile(
    r"(?:\b(?i:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|Mt|Ft|vs|approx|e\.g|i\.e)|(?<![\w'])[A-Z]|^\d{1,2})\.$"
)
# emphasis, code ticks, heading marks and LaTeX delimiters: layout, not words of the sentence
_MARKUP = re.compile(r"\*\*|`|^[ \t]*#{1,6}[ \t]+|\\[\[\]()]", re.M)
# a piece that is only parentheses ("(said on 2024-03-04).") is an aside to the sentence before it
_LETTERS = re.compile(r"[^\W\d_]{2,}")
_PARENTHESES = re.compile(r"\([^()]*\)")
_ASIDE = re.compile(r"(?:\([^()]*\)[.!?\u2026]*\s*)+")
# A fenced block of code (to its closing fence, or to the end of a text cut inside it) and display math state code
# and formulas, not sentences of the conversation: they are taken out before the text is split.
_FENCED = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n?(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.M | re.S)
_DISPLAY_MATH = re.compile(r"\\\[.*?(?:\\\]|\Z)|\$\$.*?(?:\$\$|\Z)", re.S)
# names a block of code defines: functions, classes, types and declared variables, at the start of a line
_DEFINED = re.compile(
    r"^[ \t]*(?:(?:export|public|private|static|async|pub)\s+)*"
    r"(?:def|class|function|func|fn|interface|struct|enum|trait|const|let|var|val)\s+([A-Za-z_$][\w$]*)",
    re.M,
)
_COMPOUND = re.compile(
    r";\s+|\s+[-\u2013\u2014]+\s+(?=(?:I|I'm|I've|we|my|it|they|he|she)\b)|,\s+(?:and|but|so)\s+(?=(?:I|I'm|I've)\b)"
)


_NEGATION = re.compile(r"\b(?:not|never|no|nobody|nothing|none|nor|cannot)\b|n't\b", re.I)


def normalize_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def has_negation(claim: str) -> bool:
    """The negation marker of X(i,c), App. B.2, read from the descriptor text (whichever extractor wrote it)."""
    return bool(_NEGATION.search(normalize_quotes(claim)))


@dataclass(frozen=True)
class CodeBlock:
    language: str  # as the fence labels it ("python"), or ""
    defines: tuple[str, ...]  # the names it defines, in order, at most `max_names`


def prose(text: str) -> str:
    """The text without its fenced code blocks and display math."""
    return _DISPLAY_MATH.sub(" ", _FENCED.sub("\n", text))


def code_blocks(text: str, max_names: int = 5) -> tuple[CodeBlock, ...]:
    """The fenced code blocks of a text, each with its language and the names it defines."""
    return tuple(
        CodeBlock(m.group(1).lower(), tuple(dict.fromkeys(_DEFINED.findall(m.group(2))))[:max_names])
        for m in _FENCED.finditer(text)
    )


@lru_cache(maxsize=8192)
def split_sentences(text: str) -> tuple[str, ...]:
    """Sentences of a turn's prose (emoji act as boundaries); abbreviations such as "Mr." do not end a sentence,
    and a parenthesis standing alone stays with the sentence before it."""
    text = _EMOJI.sub("\n", _MARKUP.sub("", prose(normalize_quotes(clean_text(text)))))
    pieces: list[str] = []
    for piece in _BOUNDARY.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if pieces and (_ABBREVIATION.search(pieces[-1]) or _ASIDE.fullmatch(piece)):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return tuple(part.strip() for piece in pieces for part in _COMPOUND.split(piece) if part.strip())


@lru_cache(maxsize=16384)  # a sentence is looked at as a turn and again as the next turn's preceding turn
def content_words(sentence: str, names: Names) -> tuple[str, ...]:
    """The words of a sentence that carry a fact; empty for a greeting or filler."""
    return tuple(
        w
        for w in (w.split("'", 1)[0] for w in words(sentence))
        if w
        and not w.isdigit()
        and w not in STOPWORDS
        and w not in LOW_CONTENT
        and not (w[-1] == "s" and w[:-1] in LOW_CONTENT)
        and w not in names.filler
        and not LAUGH.match(w)
    )


@lru_cache(maxsize=16384)
def strip_vocatives(sentence: str, names: Names) -> str:
    """The sentence without opening interjections and names addressed at its start or end."""
    stripped = names.trailing.sub("", names.leading.sub("", sentence))
    return stripped.strip(" ,-\u2013\u2014")


def has_words(sentence: str) -> bool:
    """Whether the sentence has a word outside parentheses: a formula line ("c = 5", "5x = 80") or an aside alone
    ("(said on 2024-03-04)") states nothing on its own."""
    return bool(_LETTERS.search(_PARENTHESES.sub(" ", sentence)))


def is_question(sentence: str) -> bool:
    return sentence.rstrip("\"')\u201d ").endswith("?")
