"""A context budget in tokens (engineering, not in the paper): tokens are spent by rank.

Packets come in schedule order, the best first, and stay the unit of provenance. When the whole rendering is over
the budget, the first packets stay whole; the first one that does not fit keeps its header and as many of its lines
(claims, or the sentences of a one-line block) as fit, the answer-bearing ones first: the claim that selected the
packet, then the lines holding the query's rarest terms, then the rest, shown in the packet's own order. The packets
after it are left out, header and all. One marker line at the end says what was cut. Every choice is a prefix of a
fixed order, so a larger budget never keeps less of any packet.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..text.terms import term_set

CUT_MARKER = "- [... {} cut to fit the token budget]"
MIN_FRAGMENT = 12  # tokens: the start of a line that is alone over the room left; a shorter start tells nothing
FRAGMENT_END = " [... {} more characters]"  # text.bounded's marker
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Block:
    header: str
    lines: tuple[str, ...]  # rendered lines ("- ..."), in the packet's own order
    notes: tuple[str, ...] = ()  # lines about the packet (a supersession mark), never cut
    lead: int | None = None  # the line of the claim that selected the packet (bundle view): a cut keeps it first

    def text(self) -> str:
        return "\n".join([self.header, *self.lines, *self.notes])

    @property
    def units(self) -> tuple[str, ...]:
        """What a cut chooses among: the lines, or the sentences of a block that is one line (raw and claim views)."""
        if len(self.lines) != 1:
            return self.lines
        return tuple(_SENTENCE_END.split(self.lines[0].removeprefix("- ")))

    def shown(self, kept: dict[int, str]) -> list[str]:
        """The body lines keeping these units (index -> its text, a fragment for a unit cut short), in order; the
        sentences of a one-line block joined as they were, with " ... " where some were left out."""
        if len(self.lines) != 1:
            return [kept[i] for i in sorted(kept)]
        parts: list[str] = []
        for i in sorted(kept):
            if parts:
                parts.append(" " if i - 1 in kept else " ... ")
            parts.append(kept[i])
        return ["- " + "".join(parts)] if parts else []


def query_idf(query: str, lines: Sequence[str]) -> dict[str, float]:
    """Weight of each query term: its idf over the lines of the context (a term every line holds tells little)."""
    docs = [term_set(line) for line in lines]
    n = len(docs)
    return {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t in term_set(query) for df in [sum(t in d for d in docs)]}


def line_scores(lines: Sequence[str], idf: dict[str, float]) -> list[float]:
    """Relevance of each line to the query: the summed weights of the query terms it holds."""
    return [sum(idf[t] for t in idf.keys() & term_set(line)) for line in lines]


def marker(left: int, cut: int = 0, total: int = 0, unit: str = "lines") -> str:
    """The one line saying what the budget cut: units of the packet it ends (whole or cut short), packets after it."""
    said = [f"{cut} of {total} {unit}"] if cut else []
    said += [f"{left} more packet{'s' if left > 1 else ''}"] if left else []
    return CUT_MARKER.format(" and ".join(said))


MARKER_RESERVE = marker(2, 2, 2, "sentences")  # its cost whatever it reports: a number is one token, as a unit word


def priority(block: Block, idf: dict[str, float]) -> list[int]:
    """The order a cut keeps units in: the claim that selected the packet, then by relevance to the query, ties (and
    the units holding no query term) in the packet's own order."""
    units = block.units
    scores = line_scores(units, idf)
    lead = block.lead if len(block.lines) > 1 else None
    return sorted(range(len(units)), key=lambda i: (i != lead, -scores[i], i))


def fragment(unit: str, room: int, count: Callable[[str], int]) -> str:
    """The longest start of a unit, cut at a space and marked, that costs at most `room` tokens; "" when it would be
    shorter than MIN_FRAGMENT. A prefix's count never falls as it grows, so the search is a bisection."""
    lo, hi = 0, len(unit)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(unit[:mid] + FRAGMENT_END.format(len(unit) - mid)) <= room:
            lo = mid
        else:
            hi = mid - 1
    start = unit[:lo] if unit[lo : lo + 1] == " " else unit[:lo].rpartition(" ")[0]  # whole words only
    if count(start) < MIN_FRAGMENT:
        return ""
    return start + FRAGMENT_END.format(len(unit) - len(start))


def cut_block(block: Block, idf: dict[str, float], room: int, left: int, count: Callable[[str], int]) -> str | None:
    """The header, the longest prefix of the block's priority order that fits `room` with the notes and the marker
    (which also counts the `left` packets after it); None when not one unit, nor a fragment of the first, fits."""
    units, order = block.units, priority(block, idf)
    fixed = count(block.header) + sum(map(count, block.notes)) + count(MARKER_RESERVE)
    kept: dict[int, str] = {}
    best: dict[int, str] = {}
    for i in order:  # the largest prefix that fits (a sentence closing a " ... " gap costs less than it holds)
        kept[i] = units[i]
        if fixed + count("\n".join(block.shown(kept))) <= room:
            best = dict(kept)
    if not best and order:
        first = order[0]
        start = fragment(units[first], room - fixed - count("\n".join(block.shown({first: ""}))), count)
        best = {first: start} if start else {}
    if not best:
        return None
    whole = sum(best[i] == units[i] for i in best)
    unit = "lines" if len(block.lines) > 1 else "sentences"
    return "\n".join(
        [block.header, *block.shown(best), *block.notes, marker(left, len(units) - whole, len(units), unit)]
    )


def fit_blocks(blocks: Sequence[Block], query: str, max_tokens: int | None, count: Callable[[str], int]) -> list[str]:
    """The rendered blocks, spent by rank to at most max_tokens in total (the blocks the budget left out are not in
    the list); unchanged when they fit or no budget is given."""
    whole = [b.text() for b in blocks]
    if max_tokens is None or sum(count(t) for t in whole) <= max_tokens:
        return whole
    idf = query_idf(query, [u for b in blocks for u in b.units])
    room, out = max_tokens, []
    for i, (b, text) in enumerate(zip(blocks, whole)):
        left = len(blocks) - i - 1
        cost = count(text)
        if cost + count(MARKER_RESERVE) <= room:
            out.append(text)
            room -= cost
            continue
        cut = cut_block(b, idf, room, left, count) if b.units else None
        if cut is not None:
            out.append(cut)
        elif out:  # this packet and the ones after it are left out: the last kept one says so
            out[-1] += "\n" + marker(left + 1)
        break
    return out


def validate_max_tokens(value: object) -> int | None:
    """A context budget is a positive integer, or None for the configured default."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {value!r}")
    return value
