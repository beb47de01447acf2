"""A deterministic, model-free Extractor (Sec. 3.2.1, App. B.1): rule-based claims and metadata per turn.

Claims are sentences of the turn with greetings, acknowledgements and filler removed, rewritten to stand alone:

- first person becomes the speaker ("I'm" -> "Caroline is", "my" -> "Caroline's", with the next verb put in the
  third person); "we"/"us" become "<Speaker> and others" and "our" becomes "<Speaker>'s", because "we" is as
  often friends or a partner as it is family;
- second person becomes the addressee, the speaker of the preceding turn, when that is someone else;
- a short reply (or one opening with yes/no) to a question of the preceding turn carries that question:
  "Caroline, answering Melanie's question 'where did Caroline move from', said: Sweden, four years ago.";
- content-bearing questions become "<Speaker> asked [<addressee>]: <question>";
- an attached image becomes "<Speaker> shared a photo: <caption> (<query>)."
A sentence that names nobody after rewriting is prefixed "<Speaker> said: ".
"""
from __future__ import annotations

import re
from functools import lru_cache

from ..records import SourcePacket
from ..text import STOPWORDS, clean_text, words
from ..timeparse import normalize_event_time, parse_session_time
from .base import Metadata, TurnContext

# --- vocabulary -------------------------------------------------------------------------------------------

# Words that carry no fact on their own: a sentence made only of these (plus stop words and names) is filler.
_LOW_CONTENT = frozenset(
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
# Light verbs, adverbs and template words: fine inside a claim, useless as retrieval keywords.
_GENERIC = _LOW_CONTENT | frozenset(
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
# Names that are also ordinary words only count as a person when written with a capital.
_WORD_LIKE_NAMES = frozenset(
    "will may mark rose grace joy hope faith bill art june april august summer dawn sky sunny jack pat sue frank "
    "rich victor sandy holly ivy daisy amber crystal autumn river storm bob jean gene chase".split()
)
_ANSWER_MARKERS = ("yes", "yeah", "yep", "yup", "no", "nope", "nah", "sure", "definitely", "absolutely",
                   "of course", "not really", "not yet", "totally", "exactly", "kind of", "sort of")
_ADVERBS = frozenset(
    """also just still even never always often sometimes already ever first too usually recently finally really
    actually totally definitely truly kinda sorta only once soon almost mostly""".split()
)
_LY_VERBS = frozenset("apply reply fly rely supply comply multiply bully rally tally ally".split())
# After "I" these stay as they are: modals, past tenses and forms that do not take an -s.
_KEEP_VERB = frozenset(
    """can could will would should might must may shall was had did got went made took felt saw thought knew found
    gave told said came began brought bought built caught chose drew drove ate fell flew forgot grew heard held
    kept left lent lost met paid ran rode sang sat sent slept spent stood swam taught understood woke won wore
    wrote became hit cut quit shut hurt led fed fought hung lit meant sold shot spoke stuck struck threw read put
    set let cost beat bet spread ought used can't couldn't won't wouldn't shouldn't didn't wasn't mustn't
    mightn't ain't gotta gonna wanna learnt dreamt burnt spelt hid bit slid dug swore tore wove""".split()
)
_THIRD_PERSON = {
    "am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "go": "goes", "be": "is",
    "don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't",
}
# Verbs "you" is commonly the subject of; other words after "you" are left alone (it may be an object).
_YOU_VERBS = frozenset(
    """like love want need think know feel have do go make take get see enjoy remember mean miss say wish guess
    believe find keep play work live plan agree understand look seem sound deserve prefer appreciate hope try
    are were don't haven't aren't weren't""".split()
)
_YOU_GROUP = frozenset(["guys", "all", "both", "two"])
_INVERTING_AUX = frozenset(
    "am are were have do don't haven't aren't weren't did didn't can can't could will won't would should "
    "shall might must may let to does has".split()
)
_YOU_SUBJECT_AFTER = frozenset(
    """and but so if when that because since as while what where how why who which though although or hope
    think bet guess know glad sure wish before after until unless then""".split()
)

# --- regular expressions ----------------------------------------------------------------------------------

_EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D\u2B50\u2764]+")
_BOUNDARY = re.compile(r"(?<=[.!?\u2026])[\"')\]\u201d\u2019]*\s+|\s*\n+\s*")
# a piece ending like this does not end a sentence: titles, initials, list numbers ("1.")
_ABBREVIATION = re.compile(
    r"(?:\b(?i:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|Mt|Ft|vs|approx|e\.g|i\.e)|(?<![\w'])[A-Z]|^\d{1,2})\.$"
)
_MARKUP = re.compile(r"\*\*|`")
_COMPOUND = re.compile(
    r";\s+|\s+[-\u2013\u2014]+\s+(?=(?:I|I'm|I've|we|my|it|they|he|she)\b)|,\s+(?:and|but|so)\s+(?=(?:I|I'm|I've)\b)"
)
_SPACES = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+(?:'\w+)*|[^\w]+")
_KEYWORD_TOKEN = re.compile(r"[^\W_]+(?:['-][^\W_]+)*|[^\s\w]|_")
_NEGATION = re.compile(r"\b(?:not|never|no|nobody|nothing|none|nor|cannot)\b|n't\b", re.I)
_CAPTION_LEAD = re.compile(r"^(?:a|an|the)\s+(?:photo(?:graph|graphy)?|picture|image|pic|snapshot)\s+of\s+", re.I)
_ACKNOWLEDGEMENT = re.compile(r"^(?:(?:but|and|so)\s+)?(?:thanks|thank\s+you|congrats|congratulations)\b", re.I)
_LAUGH = re.compile(r"^(?:a*h+a+(?:ha)*h*|he(?:he)+|lo+l|x+d+)$")
_FIRST_PERSON = frozenset(
    "i i'm i've i'll i'd me my mine myself we we're we've we'll we'd us our ours ourselves".split()
)
# Openers stripped from a sentence: the first group always, the second only before punctuation or a name.
_OPENER = r"(?:oh|ooh|wow|whoa|woah|hey|hi|hello|yay|aw+|omg|um+|hmm+|btw|ha(?:ha)+|lol|yeah|yep|yup)"
_OPENER_PUNCT = (
    r"(?:yes|thanks|thank\s+you(?:\s+so\s+much)?|ok|okay|cool|great|awesome|nice|totally|absolutely|definitely|"
    r"sure|well|so|anyway|man|dude|agreed|exactly|true|right|congrats|congratulations|good\s+luck)"
)


def _norm(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


@lru_cache(maxsize=8192)
def split_sentences(text: str) -> tuple[str, ...]:
    """Sentences of a turn (emoji act as boundaries); abbreviations such as "Mr." do not end a sentence."""
    text = _EMOJI.sub("\n", _MARKUP.sub("", _norm(clean_text(text))))
    pieces: list[str] = []
    for piece in _BOUNDARY.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return tuple(part.strip() for piece in pieces for part in _COMPOUND.split(piece) if part.strip())


# --- names ------------------------------------------------------------------------------------------------


class _Names:
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
            for end in range(3, len(key)):
                prefix = key[:end]
                prefixes[prefix] = name if prefixes.get(prefix, name) == name else None
        self.nicknames = {k: v for k, v in prefixes.items() if v and k not in self.lookup and k not in STOPWORDS}
        # name words are not keywords; a name that is also a word ("Art") only when written as a name
        self.tokens = frozenset(w for key in self.lookup for w in key.split() if w not in _WORD_LIKE_NAMES)
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
            elif (key in _WORD_LIKE_NAMES or key in STOPWORDS) and not capitalized:
                name = None
            if name:
                found.append((name, key))
        return found

    def find(self, text: str) -> list[str]:
        """Canonical names mentioned in `text`, deduplicated, in order of first appearance."""
        return list(dict.fromkeys(name for name, _ in self.mentions(text)))


@lru_cache(maxsize=256)
def _names(people: tuple[str, ...]) -> _Names:
    return _Names(people)


def _names_for(ctx: TurnContext) -> _Names:
    people = {ctx.packet.speaker, *ctx.known_people, ctx.previous.speaker if ctx.previous else ""}
    return _names(tuple(sorted(people - {""})))  # sorted: one cached index per set of names


# --- pronoun rewriting ------------------------------------------------------------------------------------


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower in _THIRD_PERSON:
        return _match_case(_THIRD_PERSON[lower], verb)
    past = lower.endswith("ed") and not lower.endswith("eed")  # "need" takes an -s, "walked" does not
    if lower in _KEEP_VERB or past or "'" in lower or not lower.isalpha():
        return verb
    if lower.endswith(("ss", "sh", "ch", "x", "z", "o", "us")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 2 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _match_case(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _is_adverb(word: str) -> bool:
    lower = word.lower()
    return lower in _ADVERBS or (lower.endswith("ly") and lower not in _LY_VERBS and len(lower) > 4)


class _Rewriter:
    """Rewrites first and second person of one sentence to names, fixing the agreement of the next verb."""

    def __init__(self, speaker: str, addressee: str | None):
        self.speaker, self.addressee = speaker, addressee
        group = f"{speaker} and others"
        self.first = {
            "i": speaker, "me": speaker, "myself": speaker, "my": f"{speaker}'s", "mine": f"{speaker}'s",
            "i'm": f"{speaker} is", "i've": f"{speaker} has", "i'll": f"{speaker} will",
            "we": group, "us": group, "ourselves": group, "our": f"{speaker}'s", "ours": f"{speaker}'s",
            "we're": f"{group} are", "we've": f"{group} have", "we'll": f"{group} will", "we'd": f"{group} would",
        }
        self.second = {}
        if addressee:
            self.second = {
                "you": addressee, "yourself": addressee, "your": f"{addressee}'s", "yours": f"{addressee}'s",
                "you're": f"{addressee} is", "you've": f"{addressee} has", "you'll": f"{addressee} will",
                "you'd": f"{addressee} would", "yourselves": f"{addressee} and others",
                "y'all": f"{addressee} and others",
            }

    def __call__(self, sentence: str) -> str:
        source = _TOKEN.findall(sentence)  # read from the original tokens, write to `out`
        out = list(source)
        at = [i for i, t in enumerate(source) if t[0].isalnum() or t[0] == "_"]
        for n, i in enumerate(at):
            lower = source[i].lower()
            if lower in _FIRST_PERSON:
                self._first(source, out, at, n, lower)
            elif lower in self.second:
                self._second(source, out, at, n, lower)
        return "".join(out)

    def _first(self, source: list[str], out: list[str], at: list[int], n: int, lower: str) -> None:
        if lower == "us" and source[at[n]] == "US":  # the country
            return
        if lower == "i'd":
            out[at[n]] = f"{self.speaker} {'had' if _word(source, at, n + 1) in ('been', 'better') else 'would'}"
            return
        out[at[n]] = self.first[lower]
        if lower == "i" and _word(source, at, n - 1) != "and":  # "Mel and I love" stays plural
            self._agree(source, out, at, n, always=True)

    def _second(self, source: list[str], out: list[str], at: list[int], n: int, lower: str) -> None:
        if lower == "you" and _word(source, at, n + 1) in _YOU_GROUP and _adjacent(source, at, n):
            out[at[n]], out[at[n] + 1], out[at[n + 1]] = f"{self.addressee} and others", "", ""
            return
        out[at[n]] = self.second[lower]
        if lower == "you":
            self._agree(source, out, at, n, always=False)

    @staticmethod
    def _agree(source: list[str], out: list[str], at: list[int], n: int, always: bool) -> None:
        """Third-person agreement around a rewritten "I"/"you": "have you" -> "has X", "I love" -> "X loves".

        `always` is for "I", always a subject; "you" only agrees when it looks like one."""
        prev = _word(source, at, n - 1) if n > 0 and _adjacent(source, at, n - 1) else ""
        if prev in _INVERTING_AUX:
            out[at[n - 1]] = _match_case(_THIRD_PERSON.get(prev, prev), source[at[n - 1]])
            return
        if not always and prev and prev not in _YOU_SUBJECT_AFTER:
            return
        k = n + 1
        while k < len(at) and _adjacent(source, at, k - 1):
            word = _word(source, at, k)
            if word in ("kind", "sort") and _word(source, at, k + 1) == "of":
                k += 2
            elif _is_adverb(word):
                k += 1
            else:
                if always or word in _YOU_VERBS:
                    out[at[k]] = _third_person(source[at[k]])
                return


def _word(source: list[str], at: list[int], n: int) -> str:
    return source[at[n]].lower() if 0 <= n < len(at) else ""


def _adjacent(source: list[str], at: list[int], n: int) -> bool:
    """Whether word n and word n+1 are separated by white space only."""
    return n + 1 < len(at) and not "".join(source[at[n] + 1 : at[n + 1]]).strip()


@lru_cache(maxsize=1024)
def _rewriter(speaker: str, addressee: str | None) -> _Rewriter:
    return _Rewriter(speaker, addressee)


# --- sentence classification ------------------------------------------------------------------------------


@lru_cache(maxsize=16384)  # a sentence is looked at as a turn and again as the next turn's context
def _content_words(sentence: str, names: _Names) -> tuple[str, ...]:
    return tuple(
        w
        for w in (w.split("'", 1)[0] for w in words(sentence))
        if w
        and not w.isdigit()
        and w not in STOPWORDS
        and w not in _LOW_CONTENT
        and not (w[-1] == "s" and w[:-1] in _LOW_CONTENT)
        and w not in names.filler
        and not _LAUGH.match(w)
    )


@lru_cache(maxsize=16384)
def _strip_vocatives(sentence: str, names: _Names) -> str:
    stripped = names.trailing.sub("", names.leading.sub("", sentence))
    return stripped.strip(" ,-\u2013\u2014")


def _is_question(sentence: str) -> bool:
    return sentence.rstrip("\"')\u201d ").endswith("?")


def _answer_marker(sentence: str) -> str:
    lower = sentence.lower()
    return next(
        (m for m in _ANSWER_MARKERS if lower.startswith(m) and (len(lower) == len(m) or not lower[len(m)].isalnum())),
        "",
    )


def _starts_with_answer(sentence: str) -> bool:
    return bool(_answer_marker(sentence))


def _is_bare_answer(sentence: str, names: _Names) -> bool:
    """Only a yes/no and perhaps a name: "Yes!", "Nope, Mel."."""
    rest = _strip_vocatives(sentence[len(_answer_marker(sentence)) :].strip(" ,!.\u2026"), names)
    return not any(c.isalnum() for c in rest)


def _lower_function_word(text: str) -> str:
    """Lower-case a sentence-initial common word, so the sentence reads as quoted inside a claim."""
    first = text.split(" ", 1)[0].lower()
    return text[:1].lower() + text[1:] if first in STOPWORDS or first in _GENERIC else text


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _finish(claim: str) -> str:
    claim = _capitalize(clean_text(_SPACES.sub(" ", claim)).strip(" ,;:-"))
    return claim if claim[-1:] in ".!?\"'" else f"{claim}."


@lru_cache(maxsize=65536)
def _is_keyword_word(word: str) -> bool:
    return (
        len(word) > 1
        and word[0].isalnum()
        and "'" not in word
        and not word.isdigit()
        and word not in STOPWORDS
        and word not in _GENERIC
        and not (word[-1] == "s" and word[:-1] in _GENERIC)
        and word not in _TIME_WORDS
        and not _LAUGH.match(word)
    )


# --- the extractor ----------------------------------------------------------------------------------------


class HeuristicExtractor:
    """Rule-based Extractor: deterministic claims and metadata, no model (see the module docstring)."""

    reply_max_words = 16  # a first sentence this short after a question is read as its answer

    def __init__(self, max_keywords: int = 5):
        self.max_keywords = max_keywords

    def facts(self, ctx: TurnContext) -> list[str]:
        packet, previous = ctx.packet, ctx.previous
        names = _names_for(ctx)
        addressee = previous.speaker if previous and previous.speaker != packet.speaker else None
        rewrite = _rewriter(packet.speaker, addressee)
        units = list(split_sentences(packet.text))
        claims: list[str] = []
        question = self._open_question(previous, packet.speaker, names) if addressee else None
        answer = self._answer(units, names) if question else None
        if answer:
            reply, start, end = answer
            reply = _capitalize(rewrite(reply))
            claims.append(f"{packet.speaker}, answering {addressee}'s question '{question}', said: {reply}")
            units = units[:start] + units[end:]
        for unit in units:
            claim = self._claim(unit, packet.speaker, addressee, rewrite, names)
            if claim:
                claims.append(claim)
        caption = self._caption_claim(packet)
        if caption:
            claims.append(caption)
        return list(dict.fromkeys(_finish(c) for c in claims if c.strip()))

    def metadata(self, fact: str, ctx: TurnContext) -> Metadata:
        packet, names = ctx.packet, _names_for(ctx)
        mentions = names.mentions(fact)
        anchor = packet.session_time or parse_session_time(packet.session_time_raw)
        return Metadata(
            people=tuple(dict.fromkeys(name for name, _ in mentions)),
            keywords=self.keywords(fact, names.tokens | {w for _, key in mentions for w in key.split()}),
            event_time=normalize_event_time(fact, anchor),
            interaction_time=packet.session_time or packet.session_time_raw,
            negated=bool(_NEGATION.search(_norm(fact))),
        )

    def keywords(self, fact: str, skip: frozenset[str] | set[str] = frozenset()) -> tuple[str, ...]:
        """Up to max_keywords runs of 1-3 content words (none in `skip`), the most salient, in order of appearance."""
        phrases: dict[tuple[str, ...], int] = {}
        run: list[str] = []
        for token in _KEYWORD_TOKEN.findall(_norm(fact).lower() + " ."):
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
            if len(chosen) == self.max_keywords:
                break
            if not any(set(phrase) <= set(c) for c in chosen):  # no "inspiring" after "inspiring stories"
                chosen.append(phrase)
        return tuple(" ".join(p) for p in sorted(chosen, key=phrases.__getitem__))

    # --- claims ---

    @staticmethod
    def _open_question(previous: SourcePacket, speaker: str, names: _Names) -> str | None:
        """The preceding turn's closing question, rewritten from the current speaker's view, if it has content.

        Only a question after the turn's last content-bearing statement counts, and only the last one: when that
        is small talk ("What's new?"), small talk is what the reply answers."""
        for sentence in reversed(split_sentences(previous.text)):
            sentence = _strip_vocatives(sentence, names)
            if _is_question(sentence):
                if not _content_words(sentence, names):
                    return None
                return _lower_function_word(_rewriter(previous.speaker, speaker)(sentence).rstrip(" ?!."))
            if _content_words(sentence, names):
                return None
        return None

    def _answer(self, units: list[str], names: _Names) -> tuple[str, int, int] | None:
        """The reply that opens the turn, as (reply text, first unit, end unit), or None when it does not open
        with one. The reply is the first unit with content, a yes/no or a question mark (which means no reply),
        or an all-filler turn's first non-greeting ("Loved it."); it must start with yes/no or be short."""
        candidates = [i for i, u in enumerate(units) if _strip_vocatives(u, names) and not _ACKNOWLEDGEMENT.match(u)]
        if not candidates:
            return None
        informative = (
            i for i in candidates
            if _is_question(units[i]) or _starts_with_answer(units[i]) or _content_words(units[i], names)
        )
        start = next(informative, candidates[0])
        if _is_question(units[start]):
            return None
        unit, end = units[start], start + 1
        if not _starts_with_answer(unit):
            reply = _strip_vocatives(unit, names)
            return (reply, start, end) if len(reply.split()) <= self.reply_max_words else None
        reply = names.trailing.sub("", unit)
        if _is_bare_answer(reply, names) and end < len(units) and not _is_question(units[end]):
            return f"{reply} {units[end]}", start, end + 1  # a bare "Yes!" answers with the next sentence
        return reply, start, end

    def _claim(self, unit: str, speaker: str, addressee: str | None, rewrite: _Rewriter, names: _Names) -> str | None:
        sentence = _strip_vocatives(unit, names)
        content = _content_words(sentence, names)
        if _is_question(sentence):
            if len(content) < 2:
                return None
            question = _lower_function_word(rewrite(sentence))
            ask = f"{speaker} asked {addressee}" if addressee and addressee not in question else f"{speaker} asked"
            return f"{ask}: {question}"
        if not content or _ACKNOWLEDGEMENT.match(unit):
            return None
        claim = rewrite(sentence)
        return claim if names.find(claim) else f"{speaker} said: {_capitalize(claim)}"

    @staticmethod
    def _caption_claim(packet: SourcePacket) -> str | None:
        caption = _CAPTION_LEAD.sub("", clean_text(packet.image_caption or ""))
        query = clean_text(packet.image_query or "")
        if not caption and not query:
            return None
        body = f"{caption} ({query})" if caption and query and query.lower() != caption.lower() else caption or query
        return f"{packet.speaker} shared a photo: {body}"
