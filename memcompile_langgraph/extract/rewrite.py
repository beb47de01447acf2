"""First and second person rewritten to names so a claim stands alone (Sec. 3.2.1): "I love" -> "Caroline loves".

First person becomes the speaker ("I'm" -> "Caroline is", "my" -> "Caroline's"); "we"/"us" become "<Speaker> and
others" and "our" "<Speaker>'s", because "we" is as often friends or a partner as it is family; a reflexive
("myself", "ourselves") becomes "themselves" after the name it refers back to, else the name. Second person becomes the addressee, when there is one. The verb next
to a rewritten "I"/"you" is put in the third person, past the adverbs between them ("I now have" -> "Caroline now
has"), and an auxiliary before an asking "I" agrees ("do I" -> "does Caroline"); after "you" that is any content
word unless "you" is an object there ("makes you feel"). Words inside double quotes are left as they were said:
the "I" of a quote is whoever is quoted ('she said "I love it"').

A sentence whose first person cannot be rewritten exactly (the word after "I" is neither a verb nor a known adverb,
or the verb is not where it is looked for: "I, too, love it", "I so want it") is not rewritten: the rewriter
returns None and the caller keeps the speaker's own words.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..text.terms import STOPWORDS

_TOKEN = re.compile(r"\w+(?:'\w+)*|[^\w]+")
_FIRST_PERSON = frozenset(
    "i i'm i've i'll i'd me my mine myself we we're we've we'll we'd us our ours ourselves".split()
)
_ADVERBS = frozenset(
    """also just still even never always often sometimes already ever first too usually recently finally really
    actually totally definitely truly kinda sorta only once soon almost mostly now then again seldom maybe perhaps
    sometime somehow""".split()
)
# Forms that are a verb of their own: a word before one of them after "I" was not the verb ("I now have").
_AUXILIARIES = frozenset(
    """am is are was were have has had do does did can could will would shall should may might must don't doesn't
    didn't can't couldn't won't wouldn't shouldn't haven't hasn't hadn't isn't aren't wasn't weren't""".split()
)
# After "I'd" these make it "I had" ("I'd been", "I'd never seen", "I'd already left"), as does a word in -ed; any
# other word makes it "I would". Participles that are also bare verbs ("put", "read", "cut") are not here: "would".
_PARTICIPLES = frozenset(
    """been better had gone done seen known taken given got gotten made come become left bought brought built caught
    taught thought found felt kept lost met paid sent spent stood slept heard held told sold said won understood lent
    fed fought hung lit meant shot stuck struck led written eaten fallen flown forgotten grown chosen driven drawn
    ridden spoken stolen sworn torn woken worn broken begun sung swum thrown shown drunk rung hidden bitten""".split()
)
_REFLEXIVE = frozenset(["myself", "ourselves"])
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
_PREFIXES = ("over", "under", "with", "mis", "out", "fore", "re", "be")
_THIRD_PERSON = {
    "am": "is",
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "go": "goes",
    "be": "is",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "weren't": "wasn't",
}
# Function words that are verbs: after a subject "you" these agree; any other function word after "you" is not
# its verb ("you all", "you too", "you more").
_YOU_VERBS = frozenset("like have do get are were don't haven't aren't weren't".split())
# Content words that follow "you" without being its verb: groups, time and place adverbs ("see you soon").
_NOT_VERBS = frozenset(
    """guys all both two folks lot people too again soon later yet there here back now then anyway though tho today
    tonight tomorrow yesterday ever once well better worse closer right wrong fine ready free happy sick time many
    luck sometime away apart along around throughout astray one money different""".split()
)
_ADJECTIVE_ENDINGS = ("able", "ible", "ful", "ous", "less")
_YOU_GROUP = frozenset(["guys", "all", "both", "two"])
_INVERTING_AUX = frozenset(
    "am are were have do don't haven't aren't weren't did didn't can can't could will won't would should "
    "shall might must may let to does has how'd what'd where'd why'd when'd who'd was wasn't had hadn't couldn't "
    "wouldn't shouldn't doesn't hasn't is isn't".split()
)
# After these "you" is an object and a verb that follows is bare ("makes you feel", "help you find", "gives you
# hope", "proud of you"); after any other word a "you" followed by a verb (_verb_after_you) is its subject ("the
# people you work with", "ensure you have", "than you think", and "I heard you work as": in chat "heard" and
# "noticed" report a clause). Listing the object side: the subject side is open-ended
_YOU_OBJECT_AFTER = frozenset(
    """make makes made making let lets letting help helps helped helping see sees saw seen seeing watch watched
    watching give gives gave giving send sends sent bring brings brought wishing show shows showed tell tells told
    teach taught offer offers offered get gets got keep keeps kept thank thanks wish wishes wished love loved miss
    missed need needs needed want wants wanted ask asks asked to for with at of from about by on into""".split()
)


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower in _THIRD_PERSON:
        return _match_case(_THIRD_PERSON[lower], verb)
    past = lower.endswith("ed") and not lower.endswith("eed")  # "need" takes an -s, "walked" does not
    if _keeps_form(lower) or past or "'" in lower or not lower.isalpha():
        return verb
    if lower.endswith(("ss", "sh", "ch", "x", "z", "o", "us")):
        return _match_case(lower + "es", verb)
    if lower.endswith("y") and len(lower) > 2 and lower[-2] not in "aeiou":
        return _match_case(lower[:-1] + "ies", verb)
    return _match_case(lower + "s", verb)


def _keeps_form(lower: str) -> bool:
    """A modal or past form, also with a prefix ("overcame", "understood", "withheld")."""
    return lower in _KEEP_VERB or any(lower.startswith(p) and lower[len(p) :] in _KEEP_VERB for p in _PREFIXES)


def _match_case(word: str, like: str) -> str:
    if len(like) > 1 and like.isupper():  # "I LOVE IT": a shouted verb stays shouted, not "LOVEs"
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _is_adverb(word: str) -> bool:
    lower = word.lower()
    return lower in _ADVERBS or (lower.endswith("ly") and lower not in _LY_VERBS and len(lower) > 4)


class Rewriter:
    """Rewrites first and second person of one sentence to names, fixing the agreement of the next verb."""

    def __init__(self, speaker: str, addressee: str | None):
        self.speaker, self.addressee = speaker, addressee
        group = f"{speaker} and others"
        self.first = {
            "i": speaker,
            "me": speaker,
            "myself": speaker,
            "my": f"{speaker}'s",
            "mine": f"{speaker}'s",
            "i'm": f"{speaker} is",
            "i've": f"{speaker} has",
            "i'll": f"{speaker} will",
            "we": group,
            "us": group,
            "ourselves": group,
            "our": f"{speaker}'s",
            "ours": f"{speaker}'s",
            "we're": f"{group} are",
            "we've": f"{group} have",
            "we'll": f"{group} will",
            "we'd": f"{group} would",
        }
        self.second = {}
        if addressee:
            self.second = {
                "you": addressee,
                "yourself": addressee,
                "your": f"{addressee}'s",
                "yours": f"{addressee}'s",
                "you're": f"{addressee} is",
                "you've": f"{addressee} has",
                "you'll": f"{addressee} will",
                "you'd": f"{addressee} would",
                "yourselves": f"{addressee} and others",
                "y'all": f"{addressee} and others",
            }

    def __call__(self, sentence: str) -> str | None:
        """The sentence rewritten, or None when its first person cannot be rewritten exactly."""
        source = _TOKEN.findall(sentence)  # read from the original tokens, write to `out`
        out = list(source)
        at = [i for i, t in enumerate(source) if t[0].isalnum() or t[0] == "_"]
        quoted = _quoted(source)
        try:
            for n, i in enumerate(at):
                lower = source[i].lower()
                if i in quoted:  # 'she said "I love it"': the "I" of a quote may be someone else
                    continue
                if lower in _FIRST_PERSON:
                    self._first(source, out, at, n, lower)
                elif lower in self.second:
                    self._second(source, out, at, n, lower)
        except _Inexact:
            return None
        return "".join(out)

    def _first(self, source: list[str], out: list[str], at: list[int], n: int, lower: str) -> None:
        if lower == "us" and source[at[n]] == "US":  # the country
            return
        if lower == "i" and "/" in source[at[n] - 1 : at[n]] + source[at[n] + 1 : at[n] + 2]:  # "I/O", "R/I"
            return
        if lower in _REFLEXIVE and _word(source, at, n - 1) in ("i", "we", "and", "or"):
            raise _Inexact  # "I myself think", "my wife and myself went": no reflexive reads right there
        if lower in _REFLEXIVE and any(self.speaker in t for t in out[: at[n]]):
            out[at[n]] = "themselves"  # its antecedent, the speaker's name, is already in the sentence
            return
        if lower == "i'd":
            k = _past_adverbs(source, at, n + 1)
            word = _word(source, at, k)
            had = word in _PARTICIPLES or (word.endswith("ed") and not word.endswith("eed"))
            out[at[n]] = f"{self.speaker} {'had' if had else 'would'}"
            return
        out[at[n]] = self.first[lower]
        if lower == "i" and _word(source, at, n - 1) != "and":  # "Mel and I love" stays plural
            self._agree(source, out, at, n, always=True)

    def _second(self, source: list[str], out: list[str], at: list[int], n: int, lower: str) -> None:
        if source[at[n] - 1 : at[n]] == ["-"]:  # part of a compound word: "a thank-you note"
            return
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
        if not always and prev in _YOU_OBJECT_AFTER:
            return
        k = n + 1
        while k < len(at) and _adjacent(source, at, k - 1):
            after = _adverb_end(source, at, k)
            if after is None:
                end = _compound_end(source, at, k)
                if always:
                    out[at[end]] = _verb_after_i(source, at, end)
                elif _verb_after_you(source[at[end]]):
                    out[at[end]] = _third_person(source[at[end]])
                return
            k = after
        if always and k < len(at) and k > n and "".join(source[at[k - 1] + 1 : at[k]]).strip()[:1] in ",;(-–—":
            raise _Inexact  # "I, too, love it": the verb is past an aside, whose end is not known


class _Inexact(Exception):
    """The first person of a sentence cannot be rewritten exactly."""


def _quoted(source: list[str]) -> set[int]:
    """Indexes of the tokens inside double quotes (straight or curly); an unclosed quote runs to the end."""
    inside, quoted = False, set()
    for i, token in enumerate(source):
        for char in token:
            if char in '"\u201c\u201d':
                inside = char == "\u201c" or (char == '"' and not inside)
        if inside:
            quoted.add(i)
    return quoted


def _past_adverbs(source: list[str], at: list[int], k: int) -> int:
    """The first word from k on that is not part of an adverb next to the one before."""
    while k < len(at) and _adjacent(source, at, k) and (after := _adverb_end(source, at, k)) is not None:
        k = after
    return k


def _adverb_end(source: list[str], at: list[int], k: int) -> int | None:
    """The word after the adverb that starts at word k ("no longer", "kind of" and a hyphenated adverb are one), or
    None when word k starts no adverb."""
    end = _compound_end(source, at, k)
    word, following = _word(source, at, end), _word(source, at, end + 1)
    if (word in ("kind", "sort") and following == "of") or (word == "no" and following == "longer"):
        return end + 2
    return end + 1 if _is_adverb(word) else None


def _compound_end(source: list[str], at: list[int], k: int) -> int:
    """The last part of the hyphenated word that starts at word k (k itself for a plain word): a compound verb
    agrees on its last part ("I co-own" -> "co-owns", not "coes-own")."""
    while k + 1 < len(at) and source[at[k] + 1 : at[k + 1]] == ["-"]:
        k += 1
    return k


def _verb_after_i(source: list[str], at: list[int], k: int) -> str:
    """Word k, the verb after a subject "I", in the third person; _Inexact when it does not read as that verb: a
    function word ("I so want"), a form that is no present ("I loving", "I gets"), or a word followed by a verb of
    its own, so that it was an adverb not known as one ("I now have")."""
    token, lower = source[at[k]], source[at[k]].lower()
    if lower in _THIRD_PERSON or _keeps_form(lower):
        return _third_person(token)
    plural = lower.endswith("s") and not lower.endswith(("ss", "us"))
    if (lower in STOPWORDS and lower not in ("like", "get")) or not token.isalpha() or lower.endswith("ing") or plural:
        raise _Inexact
    if _adjacent(source, at, k) and _word(source, at, k + 1) in _AUXILIARIES:
        raise _Inexact
    return _third_person(token)


def _verb_after_you(token: str) -> bool:
    """Whether the word after a subject "you" is its verb: any lower-case content word but a few adverbs and
    group words ("when you start", "the tools you use"; not "you guys", "see you soon", "you Caroline")."""
    lower = token.lower()
    if lower in _YOU_VERBS:
        return True
    return (
        token.isalpha()
        and token.islower()
        and lower not in STOPWORDS
        and lower not in _NOT_VERBS
        and not lower.endswith("ing")  # "remember you saying": a participle, no agreement
        and not (lower.endswith("s") and not lower.endswith(("ss", "us")))  # a plural or a verb that agrees
        and not lower.endswith(_ADJECTIVE_ENDINGS)  # "makes you accountable", "serve you well"
    )


def _word(source: list[str], at: list[int], n: int) -> str:
    return source[at[n]].lower() if 0 <= n < len(at) else ""


def _adjacent(source: list[str], at: list[int], n: int) -> bool:
    """Whether word n and word n+1 are separated by white space only."""
    return n + 1 < len(at) and not "".join(source[at[n] + 1 : at[n + 1]]).strip()


@lru_cache(maxsize=1024)
def rewriter(speaker: str, addressee: str | None) -> Rewriter:
    """The (cached) rewriter of one speaker talking to one addressee (None: second person stays as written)."""
    return Rewriter(speaker, addressee)
