"""A context budget in tokens (engineering, not in the paper): long packets give up their least relevant lines.

Packets stay the unit of provenance: every selected packet keeps its header. When the whole rendering is over
the budget, the budget is shared water-filling style: a block no larger than its fair share stays whole (short
turns are never touched), and each longer block keeps the lines (claims or sentences) that best answer the
query, in their own order, until its share is spent, with one visible marker line saying how many were cut.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..text.terms import bounded, term_set

CUT_MARKER = "- [... {cut} of {total} {unit} cut to fit the token budget]"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Block:
    header: str
    lines: tuple[str, ...]  # rendered lines ("- ..."), in the packet's own order
    notes: tuple[str, ...] = ()  # lines about the packet (a supersession mark), never cut

    def text(self) -> str:
        return "\n".join([self.header, *self.lines, *self.notes])

    @property
    def units(self) -> tuple[str, ...]:
        """What a cut chooses among: the lines, or the sentences of a block that is one line (raw and claim views)."""
        if len(self.lines) != 1:
            return self.lines
        return tuple(_SENTENCE_END.split(self.lines[0].removeprefix("- ")))


def query_idf(query: str, lines: Sequence[str]) -> dict[str, float]:
    """Weight of each query term: its idf over the lines of the context (a term every line holds tells little)."""
    docs = [term_set(line) for line in lines]
    n = len(docs)
    return {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t in term_set(query) for df in [sum(t in d for d in docs)]}


def line_scores(lines: Sequence[str], idf: dict[str, float]) -> list[float]:
    """Relevance of each line to the query: the summed weights of the query terms it holds."""
    return [sum(idf[t] for t in idf.keys() & term_set(line)) for line in lines]


def shares(costs: Sequence[int], budget: int) -> list[int | None]:
    """Water-filling: None for a block that stays whole, else the tokens it may keep."""
    out: list[int | None] = [None] * len(costs)
    left, open_ = budget, sorted(range(len(costs)), key=lambda i: costs[i])
    while open_:
        fair = left // len(open_)
        if costs[open_[0]] > fair:
            for i in open_:
                out[i] = max(fair, 0)
            break
        i = open_.pop(0)
        left -= costs[i]
    return out


def cut_unit(unit: str, tokens: int, count: Callable[[str], int]) -> str:
    """The start of a unit, about `tokens` long, with the marker of what was left out (bounded's)."""
    chars = max(0, tokens) * len(unit) // max(count(unit), 1)
    return bounded(unit, chars) if chars else ""


def cut_block(block: Block, idf: dict[str, float], allowance: int, count: Callable[[str], int]) -> str:
    """The header, the best-scoring units that fit the allowance, in order, and the cut marker. The best unit is
    always kept, cut to what is left of the allowance when it alone is over it."""
    units = list(block.units)
    scores, total = line_scores(units, idf), len(units)
    unit = "lines" if len(block.lines) > 1 else "sentences"
    used = sum(map(count, [block.header, *block.notes, CUT_MARKER.format(cut=total, total=total, unit=unit)]))
    keep: set[int] = set()
    for i in sorted(range(total), key=lambda i: (-scores[i], i)):
        cost = count(units[i])
        if used + cost > allowance:
            if keep or not (start := cut_unit(units[i], allowance - used, count)):
                continue
            units[i], cost = start, count(start)  # the best unit alone is over: its start, not the whole of it
        keep.add(i)
        used += cost
    kept = [units[i] for i in sorted(keep)]
    lines = kept if len(block.lines) > 1 else ["- " + " ... ".join(kept)] if kept else []
    if len(keep) < total:
        lines.append(CUT_MARKER.format(cut=total - len(keep), total=total, unit=unit))
    return "\n".join([block.header, *lines, *block.notes])


def fit_blocks(blocks: Sequence[Block], query: str, max_tokens: int | None, count: Callable[[str], int]) -> list[str]:
    """The rendered blocks, cut to about max_tokens in total; unchanged when they fit or no budget is given."""
    whole = [b.text() for b in blocks]
    if max_tokens is None or sum(count(t) for t in whole) <= max_tokens:
        return whole
    allow = shares([count(t) for t in whole], max_tokens)
    idf = query_idf(query, [u for b in blocks for u in b.units])
    cut = [t if a is None else cut_block(b, idf, a, count) for b, t, a in zip(blocks, whole, allow)]
    return [c if count(c) < count(t) else t for c, t in zip(cut, whole)]  # a cut that saves less than its marker: whole


def validate_max_tokens(value: object) -> int | None:
    """A context budget is a positive integer, or None for the configured default."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {value!r}")
    return value
