"""The benchmark-neutral eval schema: dialogues (turns to store) with their questions and gold evidence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..ingest.loaders import UnusableInput

T = TypeVar("T")


@dataclass(frozen=True)
class Question:
    qid: str  # "<dialogue>#<position>", stable across runs (the resume key)
    dialogue: str
    question: str
    answer: str
    category: str
    gold: tuple[str, ...]  # gold dia_ids, in the order the benchmark lists them
    replaced: tuple[str, ...] = ()  # knowledge updates: the statements the gold superseded (not gold themselves)


@dataclass
class Dialogue:
    """One conversation to store (its turns, in the loaders' turn schema) and the questions asked about it."""

    user_id: str
    turns: list[Any]
    questions: list[Question] = field(default_factory=list)


@dataclass
class Benchmark:
    name: str  # "locomo" or "longmemeval": selects the paper figures the report sets beside the run
    categories: tuple[str, ...]  # report order
    dialogues: list[Dialogue]
    skipped: Counter = field(default_factory=Counter)  # questions or instances left out, by reason

    @property
    def questions(self) -> int:
        return sum(len(d.questions) for d in self.dialogues)


def answer_text(value: Any) -> str | None:
    """Gold answers are strings or numbers in both benchmarks; anything else makes the question unusable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    return value.strip() if isinstance(value, str) and value.strip() else None


def select(items: Sequence[T], wanted: Iterable[str] | None, name: Callable[[T], str], source: object) -> list[T]:
    """The named items in file order (all when none are named); an unknown name is a one-line error."""
    wanted = list(dict.fromkeys(wanted or []))
    if not wanted:
        return list(items)
    known = [name(x) for x in items]
    missing = [w for w in wanted if w not in known]
    if missing:
        shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        raise UnusableInput(f"{source}: no sample named {', '.join(missing)} (it holds {shown})")
    return [x for x in items if name(x) in wanted]
