"""A published index is read, never written: queries, from many threads at once, leave every byte of it as it was."""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from immutables import Map

from memcompile_langgraph.bench.synthetic import generate
from memcompile_langgraph.index.persistent import Column, Layered

LOCK = type(threading.Lock())


def fingerprint(obj: Any) -> Any:
    """Everything reachable from obj, as plain values: arrays by their whole buffer, objects by every field."""
    if obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return obj
    if isinstance(obj, np.ndarray):
        return ("array", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, LOCK):
        return "lock"
    if isinstance(obj, (Map, Layered)):
        return ("map", sorted(((fingerprint(k), fingerprint(v)) for k, v in obj.items()), key=repr))
    if isinstance(obj, dict):
        return ("dict", [(fingerprint(k), fingerprint(v)) for k, v in obj.items()])
    if isinstance(obj, (list, tuple, Column)):
        return (type(obj).__name__, [fingerprint(v) for v in obj])
    if isinstance(obj, (set, frozenset)):
        return ("set", sorted(map(repr, obj)))
    if callable(obj) and not dataclasses.is_dataclass(obj):
        return ("callable", repr(obj))
    names = list(getattr(obj, "__dict__", ()))
    names += [n for klass in type(obj).__mro__ for n in getattr(klass, "__slots__", ()) if hasattr(obj, n)]
    return (type(obj).__name__, [(n, fingerprint(getattr(obj, n))) for n in names])


QUESTIONS = [
    "What did Caroline say about the pottery class?",
    "When did Melanie go camping with the kids?",
    "What happened on 1 May, 2022?",
    "Who adopted a dog and what is its name?",
    "What did they talk about in April 2022?",
]


def test_queries_from_many_threads_leave_a_published_index_unchanged(make_mem):
    turns = generate(160, seed=5).turns
    mem = make_mem(turns=turns[:150])
    mem.add_turns(turns[150:], user_id="u")  # a fork's writes made the published index, not a load
    published = mem.index("u")
    assert type(published.packets) is not dict  # a fork (persistent containers), not the one built at once
    people = list(published.people)[:3]
    before = fingerprint(published)

    def ask(k: int) -> int:
        question = QUESTIONS[k % len(QUESTIONS)]
        found = mem.compile(question, user_id="u").packets
        published.speaker_mask(people)
        published.dated_array(question)
        published.bm25.scores(["pottery", "dog", people[0].lower()])
        return len(found)

    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(ask, range(24)))
    assert any(found)
    assert mem.index("u") is published  # nothing wrote in between: the same snapshot was read throughout
    assert fingerprint(published) == before
