"""What a reply takes from the preceding turn (Sec. 3.2.1): a short reply, or one opening with yes/no, to that turn's
question carries the question, so "Sweden, four years ago." still says what it answers."""

from __future__ import annotations

from ..model import SourcePacket
from ..text.terms import STOPWORDS
from .keywords import GENERIC
from .names import Names
from .rewrite import rewriter
from .sentences import ACKNOWLEDGEMENT, content_words, has_words, is_question, split_sentences, strip_vocatives

_ANSWER_MARKERS = (
    "yes",
    "yeah",
    "yep",
    "yup",
    "no",
    "nope",
    "nah",
    "sure",
    "definitely",
    "absolutely",
    "of course",
    "not really",
    "not yet",
    "totally",
    "exactly",
    "kind of",
    "sort of",
)


def _answer_marker(sentence: str) -> str:
    lower = sentence.lower()
    return next(
        (m for m in _ANSWER_MARKERS if lower.startswith(m) and (len(lower) == len(m) or not lower[len(m)].isalnum())),
        "",
    )


def _starts_with_answer(sentence: str) -> bool:
    return bool(_answer_marker(sentence))


def _is_bare_answer(sentence: str, names: Names) -> bool:
    """Only a yes/no and perhaps a name: "Yes!", "Nope, Mel."."""
    rest = strip_vocatives(sentence[len(_answer_marker(sentence)) :].strip(" ,!.\u2026"), names)
    return not any(c.isalnum() for c in rest)


def lower_function_word(text: str) -> str:
    """Lower-case a sentence-initial common word, so the sentence reads as quoted inside a claim."""
    first = text.split(" ", 1)[0].lower()
    return text[:1].lower() + text[1:] if first in STOPWORDS or first in GENERIC else text


def open_question(previous: SourcePacket, speaker: str, names: Names) -> str | None:
    """The preceding turn's closing question, rewritten from the current speaker's view, if it has content.

    Only a question after the turn's last content-bearing statement counts, and only the last one: when that
    is small talk ("What's new?"), small talk is what the reply answers."""
    for sentence in reversed(split_sentences(previous.text)):
        sentence = strip_vocatives(sentence, names)
        if is_question(sentence):
            if not content_words(sentence, names):
                return None
            # no exact rewrite: the question as it was asked
            said = rewriter(previous.speaker, speaker)(sentence) or sentence
            return lower_function_word(said.rstrip(" ?!."))
        if content_words(sentence, names):
            return None
    return None


def opening_answer(units: list[str], names: Names, max_words: int) -> tuple[str, int, int] | None:
    """The reply that opens the turn, as (reply text, first unit, end unit), or None when it does not open
    with one. The reply is the first unit with content, a yes/no or a question mark (which means no reply),
    or an all-filler turn's first non-greeting ("Loved it."); it must start with yes/no or be at most
    `max_words` long."""
    candidates = [
        i for i, u in enumerate(units) if strip_vocatives(u, names) and not ACKNOWLEDGEMENT.match(u) and has_words(u)
    ]
    if not candidates:
        return None
    informative = (
        i
        for i in candidates
        if is_question(units[i]) or _starts_with_answer(units[i]) or content_words(units[i], names)
    )
    start = next(informative, candidates[0])
    if is_question(units[start]):
        return None
    unit, end = units[start], start + 1
    if not _starts_with_answer(unit):
        reply = strip_vocatives(unit, names)
        return (reply, start, end) if len(reply.split()) <= max_words else None
    reply = names.trailing.sub("", unit)
    if _is_bare_answer(reply, names) and end < len(units) and not is_question(units[end]):
        return f"{reply} {units[end]}", start, end + 1  # a bare "Yes!" answers with the next sentence
    return reply, start, end
