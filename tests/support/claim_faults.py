"""Classes of broken claims, for checking what an extractor writes (tests/test_claim_faults.py).

A claim is broken when a reader cannot use it as a sentence about the conversation:
- "no_content": nothing is said once the reported-speech frame ("X said:", "X asked Y:", "X, answering Y's
  question '...', said:", "X shared a photo:"), parenthetical asides and dates are taken away
  ("Assistant said: (said on 2024-03-04).");
- "agreement": a name the extractor put in place of "I"/"you" followed by a bare verb in subject position
  ("Alice work as a marine biologist", "when User start working");
- "markup": markdown or LaTeX marks left in the text ("Assistant said: ### Conclusion.", "\\[ h = 2 \\]");
- "code": the body is a fragment of source code rather than prose ("Assistant said: (async () => {.", "Assistant
  said: Def login()."): many code marks, or a statement of a programming language at its start.

The verb list is the checker's own (not the rewriter's), so a check never passes because both share a gap.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator

FAULTS = ("no_content", "agreement", "markup", "code")

_FRAME = re.compile(
    r"^(?:[^:]{1,80}?, answering [^:]{1,80}? question '.*', said:|[^:]{1,80}? said:|[^:]{1,80}? asked(?: [^:]{1,80})?:"
    r"|[^:]{1,80}? shared a photo:)\s*"
)
# what a frame or an attribution aside is made of: "(said on 2024-03-04)" says nothing about the conversation
_FRAME_WORDS = frozenset("said asked answering shared photo on at in the".split())
_MARKUP = re.compile(r"^\s*#{1,6}\s|\*\*|\\[\[\]()]")
_DATE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}\b")
_WORD = re.compile(r"[^\W\d_]{2,}")
_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_CODE_CHARS = set("{}()[]<>=;`|&$\\/_")
# a statement of a programming language opening the body: "Def login().", "Import numpy as np.", "Return x."
_CODE_STATEMENT = re.compile(
    r"^(?:(?:def|class|function|func|fn)\s+\w+\s*[(:{]|(?:const|let|var)\s+\w+\s*=|(?:return|print|await)\s+[\w.]+\("
    r"|print\(|(?:import|from)\s+[\w.]+(?:\s+import\b|\s+as\b|\s*;))",
    re.I,
)
# Base forms that take an -s after a singular subject; neither past forms nor words that are also common nouns
# after a name ("Caroline's work", "User's plan" are possessives and never reach this check).
BASE_VERBS = frozenset(
    """like love want need think know feel have do go make take get see enjoy remember mean miss say wish guess
    believe find keep play work live plan agree understand seem deserve prefer appreciate hope try start stop use
    write give run call come create build add check choose decide follow open move send share spend travel visit
    watch learn teach study finish change handle implement consider continue include install notice prepare
    receive reach apply improve manage practice are were am""".split()
)
# Words after which a name is an object, or the verb is bare anyway: auxiliaries and modals ("does Alice like"),
# "and" (a plural subject), verbs taking an object with a bare verb ("makes Alice feel", "let User know"),
# prepositions ("for User to use").
_NOT_SUBJECT = frozenset(
    """and or nor does do did can could would will should might may must shall to let lets letting make makes made
    making help helps helped helping have has had don't doesn't didn't can't couldn't won't wouldn't shouldn't
    for with at of from about by on into watch watched seeing see saw seen hear heard give gives gave giving""".split()
)


def body(claim: str) -> str:
    """The claim without its reported-speech frame."""
    return _FRAME.sub("", claim, count=1)


def faults(claim: str, names: Iterable[str]) -> set[str]:
    """The fault classes of one claim; `names` are the ones pronouns were rewritten to (speaker, addressee)."""
    found: set[str] = set()
    said = body(claim)
    if all(w.lower() in _FRAME_WORDS for w in _WORD.findall(_DATE.sub(" ", said))):
        found.add("no_content")
    if _MARKUP.search(said):
        found.add("markup")
    chars = [c for c in said if not c.isspace()]
    if (chars and sum(c in _CODE_CHARS for c in chars) >= 0.15 * len(chars)) or _CODE_STATEMENT.match(said):
        found.add("code")
    names = {n for n in names if n}
    tokens = _TOKEN.findall(said)
    for i, tok in enumerate(tokens[:-1]):
        if tok in names and tokens[i + 1].lower() in BASE_VERBS and tokens[i + 1] != tokens[i + 1].upper():
            if i == 0 or tokens[i - 1].lower().lstrip("'") not in _NOT_SUBJECT:
                found.add("agreement")
    return found


def count_faults(claims: Iterable[tuple[str, Iterable[str]]]) -> Counter[str]:
    """How many claims fall in each class ("claims": the total), over (claim, rewritten names) pairs."""
    counts: Counter[str] = Counter({f: 0 for f in FAULTS})
    for claim, names in claims:
        counts["claims"] += 1
        counts.update(faults(claim, names))
    return counts


def dialogue_claims(dialogue_turns: list, user_id: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(claim, names) for every heuristic claim of one dialogue, extracted as ingest does."""
    from memcompile_langgraph.config import MemCompileConfig
    from memcompile_langgraph.extract.heuristic import HeuristicExtractor
    from memcompile_langgraph.index.user import UserIndex
    from memcompile_langgraph.ingest.build import packetize, turn_windows

    cfg = MemCompileConfig()
    index = UserIndex(user_id, cfg)
    windows, _ = turn_windows(packetize(dialogue_turns, index, user_id).packets, index, cfg)
    extractor = HeuristicExtractor(cfg.max_keywords)
    for window in windows:
        names = (window.packet.speaker, window.previous.speaker if window.previous else "")
        for claim in extractor.facts(window):
            yield claim, names
