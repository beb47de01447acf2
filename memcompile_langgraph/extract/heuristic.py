"""A deterministic, model-free Extractor (Sec. 3.2.1, App. B.1): rule-based claims and metadata per turn.

Claims are sentences of the turn with greetings, acknowledgements and filler removed (sentences.py), rewritten to
stand alone:

- first person becomes the speaker ("I'm" -> "Caroline is", "my" -> "Caroline's", with the next verb put in the
  third person); "we"/"us" become "<Speaker> and others" and "our" becomes "<Speaker>'s", because "we" is as
  often friends or a partner as it is family (rewrite.py);
- second person becomes the addressee, the speaker of the preceding turn, when that is someone else;
- a short reply (or one opening with yes/no) to a question of the preceding turn carries that question:
  "Caroline, answering Melanie's question 'where did Caroline move from', said: Sweden, four years ago."
  (reply.py);
- content-bearing questions become "<Speaker> asked [<addressee>]: <question>";
- a sentence whose first person cannot be rewritten exactly keeps the speaker's words, quoted: '<Speaker>: "I ..."'
  (rewrite.py);
- an attached image becomes "<Speaker> shared a photo: <caption> (<query>).";
- a fenced block of code becomes what it is, not its lines: "<Speaker> shared python code defining login,
  create_app." (nothing when it names neither a language nor a definition); display math is left out.
A sentence that names nobody after rewriting is prefixed "<Speaker> said: ". Keywords come from keywords.py,
people from names.py.
"""

from __future__ import annotations

import re
from functools import partial

from ..model import SourcePacket
from ..text.terms import clean_text
from ..text.timeparse import normalize_event_time, parse_session_time
from .base import Metadata, TurnWindow
from .keywords import keyword_phrases
from .names import Names, names_for
from .reply import lower_function_word, open_question, opening_answer
from .rewrite import Rewriter, rewriter
from .sentences import (
    ACKNOWLEDGEMENT,
    CodeBlock,
    code_blocks,
    content_words,
    has_words,
    is_question,
    split_sentences,
    strip_vocatives,
)

_SPACES = re.compile(r"\s+")
_CAPTION_LEAD = re.compile(r"^(?:a|an|the)\s+(?:photo(?:graph|graphy)?|picture|image|pic|snapshot)\s+of\s+", re.I)


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _own_words(sentence: str) -> str:
    """A sentence kept as its speaker said it, quoted: its first person is the speaker's."""
    return f'"{sentence.strip()}"'


def _finish(claim: str) -> str:
    claim = _capitalize(clean_text(_SPACES.sub(" ", claim)).strip(" ,;:-"))
    return claim if claim[-1:] in ".!?\"'" else f"{claim}."


class HeuristicExtractor:
    """Rule-based Extractor: deterministic claims and metadata, no model (see the module docstring)."""

    reply_max_words = 16  # a first sentence this short after a question is read as its answer

    def __init__(self, max_keywords: int = 5):
        self.max_keywords = max_keywords

    def facts(self, window: TurnWindow) -> list[str]:
        packet, previous = window.packet, window.previous
        names = names_for(window)
        addressee = previous.speaker if previous and previous.speaker != packet.speaker else None
        rewrite = rewriter(packet.speaker, addressee)
        units = list(split_sentences(packet.text))
        claims: list[str] = []
        question = open_question(previous, packet.speaker, names) if addressee and previous else None
        answer = opening_answer(units, names, self.reply_max_words) if question else None
        if answer:
            reply, start, end = answer
            reply = _capitalize(rewrite(reply) or _own_words(reply))
            claims.append(f"{packet.speaker}, answering {addressee}'s question '{question}', said: {reply}")
            units = units[:start] + units[end:]
        for unit in units:
            claim = self._claim(unit, packet.speaker, addressee, rewrite, names)
            if claim:
                claims.append(claim)
        claims += [c for c in map(partial(self._code_claim, packet.speaker), code_blocks(packet.text)) if c]
        caption = self._caption_claim(packet)
        if caption:
            claims.append(caption)
        return list(dict.fromkeys(_finish(c) for c in claims if c.strip()))

    def metadata(self, fact: str, window: TurnWindow) -> Metadata:
        packet, names = window.packet, names_for(window)
        mentions = names.mentions(fact)
        anchor = packet.session_time or parse_session_time(packet.session_time_raw)
        return Metadata(
            people=tuple(dict.fromkeys(name for name, _ in mentions)),
            keywords=self.keywords(fact, names.tokens | {w for _, key in mentions for w in key.split()}),
            event_time=normalize_event_time(fact, anchor),
            interaction_time=packet.session_time or packet.session_time_raw,
        )

    def keywords(self, fact: str, skip: frozenset[str] | set[str] = frozenset()) -> tuple[str, ...]:
        """Up to max_keywords runs of 1-3 content words (none in `skip`), the most salient, in order of appearance."""
        return keyword_phrases(fact, skip, self.max_keywords)

    # --- claims ---

    @staticmethod
    def _claim(unit: str, speaker: str, addressee: str | None, rewrite: Rewriter, names: Names) -> str | None:
        sentence = strip_vocatives(unit, names)
        content = content_words(sentence, names)
        rewritten = rewrite(sentence)
        if is_question(sentence):
            if len(content) < 2:
                return None
            question = lower_function_word(rewritten) if rewritten is not None else _own_words(sentence)
            ask = f"{speaker} asked {addressee}" if addressee and addressee not in question else f"{speaker} asked"
            return f"{ask}: {question}"
        if not content or ACKNOWLEDGEMENT.match(unit) or not has_words(sentence):
            return None
        if rewritten is None:  # no exact rewrite: the speaker's own words, attributed
            return f"{speaker}: {_own_words(sentence)}"
        return rewritten if names.find(rewritten) else f"{speaker} said: {_capitalize(rewritten)}"

    @staticmethod
    def _code_claim(speaker: str, block: CodeBlock) -> str | None:
        if not block.language and not block.defines:
            return None
        what = f"{block.language} code" if block.language else "code"
        return (
            f"{speaker} shared {what} defining {', '.join(block.defines)}"
            if block.defines
            else f"{speaker} shared {what}"
        )

    @staticmethod
    def _caption_claim(packet: SourcePacket) -> str | None:
        caption = _CAPTION_LEAD.sub("", clean_text(packet.image_caption or ""))
        query = clean_text(packet.image_query or "")
        if not caption and not query:
            return None
        body = f"{caption} ({query})" if caption and query and query.lower() != caption.lower() else caption or query
        return f"{packet.speaker} shared a photo: {body}"
