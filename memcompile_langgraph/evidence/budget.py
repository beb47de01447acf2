"""A context budget in tokens (engineering, not in the paper): tokens go to the units most likely to hold the answer.

Packets come in schedule order, the best first, and stay the unit of provenance. When the whole rendering is over
the budget, every unit (a packet's lines: claims, or the sentences of a one-line block) gets a value: the packet's
rank weight times the unit's own weight, which is highest for the packet's lead unit (the claim that selected it,
else its line holding the query's rarest terms); any other unit weighs its share of the packet (one line of a short
packet is more likely the answer than one of a long one) plus the weight of the query terms it holds, and counts
only for the share of its information the units before it do not already hold (a repeated line adds nothing). The
budget keeps the longest prefix of the units in value order that fits, then the start of the next unit when it
says something; a lower packet's best lines can thus come before a higher packet's filler, while a packet's lead
unit always comes before any other unit of a lower packet (so the packets shown are the first ones). Kept units are
shown in their packet's own order under its header. One line of its own at the end says what was cut. Every choice
is a prefix of a fixed order, so a larger budget never keeps less of any packet.
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from ..text.terms import count_tokens, term_set

CUT_MARKER = "[... {} to fit the token budget]"
MIN_FRAGMENT = 12  # tokens: the start of a unit that is alone over the room left; a shorter start tells nothing
FRAGMENT_END = " [... {} more characters]"  # text.bounded's marker
GAP = " ... "  # between the kept sentences of a one-line block where some were left out
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# A unit's weight within its packet. The lead outweighs any other unit, so that a packet's lead comes before every
# non-lead unit of the packets ranked below it (RANK_DECAY < 1 keeps the rank weights strictly falling).
LEAD_WEIGHT = 1.0
OTHER_MAX = 0.9  # any other unit stays below the lead
QUERY_WEIGHT = 0.6  # added for a line holding the query's weight the best line holds, less for less
RANK_DECAY = 0.8  # the rank weight of packet r (0-based) is RANK_DECAY ** r


@dataclass(frozen=True)
class Block:
    header: str
    lines: tuple[str, ...]  # rendered lines ("- ..."), in the packet's own order
    notes: tuple[str, ...] = ()  # lines about the packet (a supersession mark), never cut
    lead: int | None = None  # the line of the claim that selected the packet (bundle view): a cut keeps it first

    def text(self) -> str:
        return "\n".join([self.header, *self.lines, *self.notes])

    @cached_property  # fit reads it in every loop; a one-line block would be split again each time
    def units(self) -> tuple[str, ...]:
        """What a cut chooses among: the lines, or the sentences of a block that is one line (raw and claim views)."""
        if len(self.lines) != 1:
            return self.lines
        return tuple(_SENTENCE_END.split(self.lines[0].removeprefix("- ")))

    def shown(self, kept: dict[int, str]) -> list[str]:
        """The body lines keeping these units (index -> its text, a fragment for a unit cut short), in order; the
        sentences of a one-line block joined as they were, with GAP where some were left out."""
        if len(self.lines) != 1:
            return [kept[i] for i in sorted(kept)]
        parts: list[str] = []
        for i in sorted(kept):
            if parts:
                parts.append(" " if i - 1 in kept else GAP)
            parts.append(kept[i])
        return ["- " + "".join(parts)] if parts else []


@dataclass(frozen=True)
class Fitted:
    """What the budget kept: each block's text as shown (None: left out), whether a shown block lost units, and the
    marker line ("" when nothing was cut). `order` is the order the text shows the blocks in (empty: as given)."""

    blocks: tuple[str | None, ...]
    cut: tuple[bool, ...]
    marker: str = ""
    order: tuple[int, ...] = ()

    @property
    def shown(self) -> tuple[bool, ...]:
        return tuple(b is not None for b in self.blocks)

    def in_order(self, order: Sequence[int]) -> Fitted:
        """The same blocks, kept as they were, shown in another order (a permutation of their indexes)."""
        if sorted(order) != list(range(len(self.blocks))):
            raise ValueError(f"not an order of {len(self.blocks)} blocks: {list(order)!r}")
        return replace(self, order=tuple(order))

    def text(self) -> str:
        shown = [self.blocks[i] for i in self.order or range(len(self.blocks))]
        return "\n\n".join([*(b for b in shown if b is not None), *([self.marker] if self.marker else [])])


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def line_scores(held: Sequence[frozenset[str]], idf: dict[str, float]) -> list[float]:
    """Relevance of each line (its terms) to the query: the summed weights of the query terms it holds."""
    # fsum: a sum over a set in its iteration order depends on the hash seed, and ties between lines must not
    return [math.fsum(idf[t] for t in idf.keys() & h) for h in held]


def marker(cut: int, left: int) -> str:
    """The line saying what the budget cut: how many shown packets lost units, how many were left out."""
    said = [f"{cut} packet{'s' if cut != 1 else ''} cut short"] if cut else []
    if left:
        said.append(f"{left} {'more ' if cut else ''}packet{'s' if left != 1 else ''} left out")
    return CUT_MARKER.format(" and ".join(said))


MARKER_RESERVE = count_tokens(marker(2, 2))  # its cost whatever it reports: a number is one token


def priority(block: Block, scores: Sequence[float]) -> list[int]:
    """The order a packet's units are kept in: the claim that selected the packet, then by relevance to the query,
    ties (and the units holding no query term) in the packet's own order."""
    lead = block.lead if len(block.lines) > 1 else None
    return sorted(range(len(scores)), key=lambda i: (i != lead, -scores[i], i))


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


@dataclass(frozen=True)
class _Unit:
    block: int
    index: int  # in the block's units; -1 for a block without any (its header alone)


def rarity(units: Sequence[frozenset[str]]) -> dict[str, float]:
    """Weight of each term by how few of the context's units hold it (its idf over them): a speaker's name on every
    line tells little."""
    n = len(units)
    df: dict[str, int] = {}
    for u in units:
        for t in u:
            df[t] = df.get(t, 0) + 1
    return {t: _idf(n, c) for t, c in df.items()}


def value_order(blocks: Sequence[Block], query: str) -> list[_Unit]:
    """Every unit of the context, the most valuable first (module docstring); ties by rank, then by the packet's
    priority order.

    A unit other than a packet's lead is worth only the share of its information the units before it do not hold
    yet (its terms weighted by rarity): a line repeating what the context already shows adds nothing. Values only
    fall as units are taken, so the order is built greedily with a heap that re-checks a unit when it comes up."""
    held = [[frozenset(term_set(u)) for u in b.units] for b in blocks]
    units = [t for h in held for t in h]
    weight_of = rarity(units)
    # the query's terms weigh their rarity too; one no unit holds, the most
    idf = {t: weight_of.get(t, _idf(len(units), 0)) for t in term_set(query)}
    scored = [line_scores(h, idf) for h in held]
    best = max((s for ss in scored for s in ss), default=0.0) or 1.0
    heap: list[tuple[float, int, int, int, float]] = []  # (-value now, rank, priority position, unit, -value)
    for r, (b, scores) in enumerate(zip(blocks, scored)):
        weight = RANK_DECAY**r
        if not scores:
            heap.append((-weight * LEAD_WEIGHT, r, 0, -1, -weight * LEAD_WEIGHT))
        for pos, i in enumerate(priority(b, scores)):
            if pos == 0:
                own = LEAD_WEIGHT
            else:  # a unit's share of its packet (the answer is more likely in a line of a short one), plus its
                # query terms
                own = min(OTHER_MAX, 1 / len(scores) + QUERY_WEIGHT * scores[i] / best)
            heap.append((-weight * own, r, pos, i, -weight * own))
    heapq.heapify(heap)
    seen: set[str] = set()
    out = []
    while heap:
        _, r, pos, i, value = heapq.heappop(heap)
        if pos and i >= 0:
            terms = held[r][i]
            total = math.fsum(weight_of[t] for t in terms)
            now = value * math.fsum(weight_of[t] for t in terms - seen) / total if total else value
            if heap and now > heap[0][0]:  # worth less than the next one now: back in line
                heapq.heappush(heap, (now, r, pos, i, value))
                continue
        if i >= 0:
            seen |= held[r][i]
        out.append(_Unit(r, i))
    return out


class _Spend:
    """The context's token cost as units are added in value order: a block's header and notes (and a one-line
    block's "- ") come with its first unit, a sentence of a one-line block changes the gaps around it, the marker is
    reserved. Lines and blocks are joined by whitespace, which count_tokens does not count, so costs add up."""

    def __init__(self, blocks: Sequence[Block], count: Callable[[str], int]):
        self.blocks, self.count = blocks, count
        self.opened = [False] * len(blocks)
        self.kept: list[list[int]] = [[] for _ in blocks]  # sorted unit indexes per block
        self.total = MARKER_RESERVE
        self.gap = count(GAP)

    def cost(self, u: _Unit, text: str) -> int:
        """What adding unit u, shown as `text`, adds to the total."""
        b = self.blocks[u.block]
        add = 0
        if not self.opened[u.block]:
            add += self.count(b.header) + sum(map(self.count, b.notes)) + (self.count("- ") if len(b.lines) == 1 else 0)
        if u.index < 0:
            return add
        add += self.count(text)
        if len(b.lines) == 1:
            kept = self.kept[u.block]
            at = bisect.bisect(kept, u.index)
            before, after = (kept[at - 1] if at else None), (kept[at] if at < len(kept) else None)
            add += self._gap(before, u.index) + self._gap(u.index, after) - self._gap(before, after)
        return add

    def _gap(self, a: int | None, b: int | None) -> int:
        return self.gap if a is not None and b is not None and b != a + 1 else 0

    def add(self, u: _Unit, text: str) -> None:
        self.total += self.cost(u, text)
        self.opened[u.block] = True
        if u.index >= 0:
            bisect.insort(self.kept[u.block], u.index)


def fit(blocks: Sequence[Block], query: str, max_tokens: int | None, count: Callable[[str], int]) -> Fitted:
    """The blocks spent to at most max_tokens in all (module docstring); unchanged when they fit or no budget is
    given."""
    whole = tuple(b.text() for b in blocks)
    none_cut = (False,) * len(blocks)
    if max_tokens is None or sum(count(t) for t in whole) <= max_tokens:
        return Fitted(whole, none_cut)
    order = value_order(blocks, query)
    spend, fits = _Spend(blocks, count), 0
    for k, u in enumerate(order, 1):  # the longest prefix that fits (closing a gap can cost less than it holds)
        spend.add(u, blocks[u.block].units[u.index] if u.index >= 0 else "")
        if spend.total <= max_tokens:
            fits = k
    spend = _Spend(blocks, count)
    kept: list[dict[int, str]] = [{} for _ in blocks]
    for u in order[:fits]:
        text = blocks[u.block].units[u.index] if u.index >= 0 else ""
        spend.add(u, text)
        if u.index >= 0:
            kept[u.block][u.index] = text
    if fits < len(order) and order[fits].index >= 0:  # the start of the next unit, when it says something
        u = order[fits]
        start = fragment(blocks[u.block].units[u.index], max_tokens - spend.total - spend.cost(u, ""), count)
        if start:
            spend.add(u, start)
            kept[u.block][u.index] = start
    shown = tuple(
        "\n".join([b.header, *b.shown(k), *b.notes]) if spend.opened[r] else None
        for r, (b, k) in enumerate(zip(blocks, kept))
    )
    cut = tuple(
        spend.opened[r] and sum(k.get(i) == x for i, x in enumerate(b.units)) < len(b.units)
        for r, (b, k) in enumerate(zip(blocks, kept))
    )
    if not any(spend.opened):
        return Fitted((None,) * len(blocks), none_cut)
    return Fitted(shown, cut, marker(sum(cut), spend.opened.count(False)))


def fit_blocks(blocks: Sequence[Block], query: str, max_tokens: int | None, count: Callable[[str], int]) -> str:
    """The rendered context of the blocks, spent to at most max_tokens (fit)."""
    return fit(blocks, query, max_tokens, count).text()


def is_marker(block: str) -> bool:
    """The budget's closing line, a block of its own after the packets it kept."""
    return block.startswith(CUT_MARKER.split("{}")[0]) and block.endswith(CUT_MARKER.split("{}")[1])


def validate_max_tokens(value: object) -> int | None:
    """A context budget is a positive integer, or None for the configured default."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {value!r}")
    return value
