"""Persistent containers for index snapshots: a writer's next version shares everything it did not change.

A published snapshot is never changed, so a writer used to copy every dict and list of the index it extends:
~400k references at 20k turns, touched twice (the copy, then freeing the superseded version), ~40 ms per write
and O(stored turns). A HAMT map (immutables.Map, the structure behind contextvars) and a persistent vector
(pyrsistent's C PVector) make that copy O(1) and an insert O(log n), with reads about as fast as dict and list.

An index built in one go (a rebuild, a snapshot file) holds plain dicts and lists, which build and unpickle
several times faster; its first fork converts them (once per process and user). A snapshot file is always
written plain (`plain`), so a cold start never rebuilds a HAMT.
"""

from __future__ import annotations

from typing import Any

from immutables import Map
from pyrsistent import PVector, pvector


def persistent(c: Any) -> Any:
    """The container as a persistent one (itself when it already is)."""
    if type(c) is dict:
        return Map(c)
    if type(c) is list:
        return pvector(c)
    return c


def plain(c: Any) -> Any:
    """The container as a plain dict or list (what snapshot files hold)."""
    if isinstance(c, Map):
        return dict(c.items())
    if isinstance(c, PVector):
        return list(c)
    return c


def put(c: Any, key: Any, value: Any) -> Any:
    """c with c[key] = value: a plain container is changed in place, a persistent one gives its next version."""
    if type(c) is dict or type(c) is list:
        c[key] = value
        return c
    return c.set(key, value)


def push(c: Any, value: Any) -> Any:
    """c with value appended (in place for a list)."""
    if type(c) is list:
        c.append(value)
        return c
    return c.append(value)


def push_all(c: Any, values: list) -> Any:
    if type(c) is list:
        c.extend(values)
        return c
    return c.extend(values)
