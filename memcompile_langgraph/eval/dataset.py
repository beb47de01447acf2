"""The benchmark-neutral eval schema: dialogues (turns to store) with their questions and gold evidence."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Question:
    qid: str  # "<dialogue>#<position>", stable across runs (the resume key)
    dialogue: str
    question: str
    answer: str
    category: str
    gold: tuple[str, ...]  # gold dia_ids, in the order the benchmark lists them


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
