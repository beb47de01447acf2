"""Persistent containers for index snapshots: a writer's next version shares everything it did not change.

A published snapshot is never changed, so a writer that copied every dict and list of the index it extends would
touch every reference twice (the copy, then freeing the superseded version), and each copy would be a young
container the cyclic collector walks whole at its next passes. Here a fork shares them: maps are HAMTs (immutables.Map, the structure behind contextvars, whose nodes are small objects of
their own), lists are `Column`s (tuples of fixed-size chunks plus a short tail). A fork is O(1), an insert
O(log n) or O(CHUNK), and what a new version adds is a few small objects.

An index built in one go (a rebuild, a snapshot file) holds plain dicts and lists, which build several times
faster; its first fork takes them over without copying: a list becomes a Column (its chunks are slices), a
large dict the base of a `Layered` map (whose writes go to a HAMT beside it), since building a HAMT of every entry
would be most of the first write after a restart.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Generic, Protocol, TypeVar, overload

from immutables import Map

CHUNK = 256
LAYERED_FROM = 2048  # a plain dict of at least this many entries is layered, not copied into a HAMT, by a fork

T = TypeVar("T")
F = TypeVar("F", bound="Forkable")
T_co = TypeVar("T_co", covariant=True)


class Rows(Protocol[T_co]):
    """What an index's list-valued field is: a plain list (built, loaded) or a Column (a fork), read alike."""

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[T_co]: ...
    @overload
    def __getitem__(self, i: int) -> T_co: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[T_co]: ...


class Column(Generic[T]):
    """An immutable sequence that append/extend/set return new versions of, sharing all full chunks."""

    __slots__ = ("_chunks", "_tail", "_n")

    def __init__(self, items: Iterable[T] = ()):
        items = list(items)
        full = len(items) - len(items) % CHUNK
        self._chunks = tuple(tuple(items[i : i + CHUNK]) for i in range(0, full, CHUNK))
        self._tail = tuple(items[full:])
        self._n = len(items)

    @classmethod
    def _of(cls, chunks: tuple[tuple[T, ...], ...], tail: tuple[T, ...]) -> Column[T]:
        out = object.__new__(cls)
        out._chunks, out._tail, out._n = chunks, tail, len(chunks) * CHUNK + len(tail)
        return out

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[T]:
        return chain(chain.from_iterable(self._chunks), self._tail)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return list(self)[i]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("Column index out of range")
        c = i // CHUNK
        return self._chunks[c][i % CHUNK] if c < len(self._chunks) else self._tail[i % CHUNK]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Column, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Column({list(self)!r})"

    def extend(self, values: Iterable[T]) -> Column[T]:
        tail, chunks = self._tail + tuple(values), self._chunks
        if len(tail) >= CHUNK:
            full = len(tail) - len(tail) % CHUNK
            chunks += tuple(tail[i : i + CHUNK] for i in range(0, full, CHUNK))
            tail = tail[full:]
        return Column._of(chunks, tail)

    def append(self, value: T) -> Column[T]:
        return self.extend((value,))

    def set(self, i: int, value: T) -> Column[T]:
        if not 0 <= i < self._n:
            raise IndexError("Column index out of range")
        c, r = divmod(i, CHUNK)
        if c < len(self._chunks):
            chunk = self._chunks[c]
            return Column._of(
                self._chunks[:c] + (chunk[:r] + (value,) + chunk[r + 1 :],) + self._chunks[c + 1 :], self._tail
            )
        return Column._of(self._chunks, self._tail[:r] + (value,) + self._tail[r + 1 :])

    def set_many(self, items: dict[int, T]) -> Column[T]:
        """Several set()s at once: each chunk they touch is copied once."""
        chunks, tail = list(self._chunks), list(self._tail)
        copied: dict[int, list[T]] = {}
        for i, value in items.items():
            if not 0 <= i < self._n:
                raise IndexError("Column index out of range")
            c, r = divmod(i, CHUNK)
            if c < len(chunks):
                row = copied.get(c)
                if row is None:
                    row = copied[c] = list(chunks[c])
                row[r] = value
            else:
                tail[r] = value
        for c, row in copied.items():
            chunks[c] = tuple(row)
        return Column._of(tuple(chunks), tuple(tail))


_ABSENT: Any = object()  # not in a Layered map's changes
_GONE: Any = object()  # in a Layered map's changes: a key of its base that was deleted

K = TypeVar("K")
V = TypeVar("V")


class Layered(Mapping[K, V]):
    """A persistent map over a plain dict that is never changed again (the base, shared with the snapshot it came
    from): set/update/delete return a new version whose changes sit in a HAMT beside the base. Reads cost about
    what a HAMT's do; a fork shares both parts. Iteration goes through the base first (in its order), then the keys
    the changes added."""

    __slots__ = ("_base", "_changes", "_n")

    def __init__(self, base: dict[K, V]):
        self._base = base
        self._changes: Map[K, Any] = Map()
        self._n = len(base)

    def _with(self, changes: Map[K, Any], n: int) -> Layered[K, V]:
        out: Layered[K, V] = object.__new__(Layered)
        out._base, out._changes, out._n = self._base, changes, n
        return out

    def __getitem__(self, key: K) -> V:
        value = self._changes.get(key, _ABSENT)
        if value is _ABSENT:
            return self._base[key]
        if value is _GONE:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]

    def get(self, key: K, default: Any = None) -> Any:
        value = self._changes.get(key, _ABSENT)
        if value is _ABSENT:
            return self._base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        value = self._changes.get(key, _ABSENT)  # type: ignore[arg-type]  # Mapping's signature takes any key
        return key in self._base if value is _ABSENT else value is not _GONE

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[K]:
        changes, base = self._changes, self._base
        if not changes:
            return iter(base)
        kept = (k for k in base if changes.get(k, _ABSENT) is not _GONE)
        return chain(kept, (k for k, v in changes.items() if v is not _GONE and k not in base))

    def __repr__(self) -> str:
        return f"Layered({dict(self.items())!r})"

    def set(self, key: K, value: V) -> Layered[K, V]:
        return self._with(self._changes.set(key, value), self._n + (key not in self))

    def update(self, items: Mapping[K, V]) -> Layered[K, V]:
        return self._with(self._changes.update(items), self._n + sum(k not in self for k in items))

    def delete(self, key: K) -> Layered[K, V]:
        if key not in self:
            raise KeyError(key)
        changes = self._changes.set(key, _GONE) if key in self._base else self._changes.delete(key)
        return self._with(changes, self._n - 1)


def persistent(c: Any) -> Any:
    """The container as a persistent one (itself when it already is)."""
    if type(c) is dict:
        return Layered(c) if len(c) >= LAYERED_FROM else Map(c)
    if type(c) is list:
        return Column(c)
    return c


def plain(c: Any) -> Any:
    """The container as a plain dict or list (what snapshot files hold)."""
    if isinstance(c, (Map, Layered)):
        return dict(c.items())
    if isinstance(c, Column):
        return list(c)
    return c


def put(c: Any, key: Any, value: Any) -> Any:
    """c with c[key] = value: a plain container is changed in place, a persistent one gives its next version."""
    if type(c) is dict or type(c) is list:
        c[key] = value
        return c
    return c.set(key, value)


def put_many(c: Any, items: dict[Any, Any]) -> Any:
    """c with every c[key] = value of items (one new version, not one per item)."""
    if type(c) is dict or type(c) is list:
        for key, value in items.items():
            c[key] = value
        return c
    if isinstance(c, Column):
        return c.set_many(items)
    return c.update(items)


def drop(c: Any, key: Any) -> Any:
    """c without c[key] (which must be there): in place for a dict."""
    if type(c) is dict:
        del c[key]
        return c
    return c.delete(key)


def push(c: Any, value: Any) -> Any:
    """c with value appended (in place for a list)."""
    if type(c) is list:
        c.append(value)
        return c
    return c.append(value)


def push_all(c: Any, values: list[Any]) -> Any:
    if type(c) is list:
        c.extend(values)
        return c
    return c.extend(values)


class Forkable:
    """The one fork mechanism of the index containers, declared per class:

    SHARED    containers a fork shares with its source (persistent from the fork on, see above);
    COPIED    small containers a fork copies;
    CHILDREN  parts that are Forkable themselves: composites declared like this one, or a leaf with a fork() of its
              own (GrowArray: numpy rows shared copy-on-write);
    OWN       tables whose values are changed in place (a Cell, a set, a posting array), each with how to copy one
              value: a fork copies a value the first time it changes it (`_own`) and remembers it in `_owned`.

    Every write rebinds its attribute (`_put`, `_push`, ...), so a plain container (a build, a loaded file) and a
    persistent one (a fork) take a write alike: no caller keeps a version a write left behind."""

    __slots__ = ()  # a leaf may keep slots; composites, which declare none, keep a __dict__
    SHARED: tuple[str, ...] = ()
    COPIED: tuple[str, ...] = ()
    CHILDREN: tuple[str, ...] = ()
    OWN: dict[str, Callable[[Any], Any]] = {}
    _owned: set[tuple[str, Any]] | None = None  # None: never forked (built or loaded here), every value is its own

    def fork(self: F) -> F:
        """An equal object that can be written without changing this one."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        for name in self.SHARED:
            setattr(out, name, persistent(getattr(self, name)))
        for name in self.COPIED:
            setattr(out, name, copy.copy(getattr(self, name)))
        for name in self.CHILDREN:
            setattr(out, name, getattr(self, name).fork())
        if self.OWN:
            out._owned = set()
        return out

    def _put(self, name: str, key: Any, value: Any) -> None:
        setattr(self, name, put(getattr(self, name), key, value))

    def _put_many(self, name: str, items: dict[Any, Any]) -> None:
        setattr(self, name, put_many(getattr(self, name), items))

    def _drop(self, name: str, key: Any) -> None:
        setattr(self, name, drop(getattr(self, name), key))

    def _push(self, name: str, value: Any) -> None:
        setattr(self, name, push(getattr(self, name), value))

    def _push_all(self, name: str, values: list[Any]) -> None:
        setattr(self, name, push_all(getattr(self, name), values))

    def _own(self, name: str, key: Any, new: Callable[[], Any] | None = None) -> Any:
        """getattr(self, name)[key], this object's own to change in place: in a fork copied (OWN[name]) at its first
        change; made by new() when missing (maps only)."""
        value = getattr(self, name).get(key) if new is not None else getattr(self, name)[key]
        if value is None and new is not None:
            value = new()
        elif self._owned is None or (name, key) in self._owned:
            return value
        else:
            value = self.OWN[name](value)
        self._put(name, key, value)
        self._adopt(name, key)
        return value

    def _own_many(self, name: str, keys: Iterable[Any]) -> None:
        """_own for each key (one new version of the table, not one per key)."""
        if self._owned is not None:
            fresh = [k for k in keys if (name, k) not in self._owned]
            if fresh:
                table, copier = getattr(self, name), self.OWN[name]
                self._put_many(name, {k: copier(table[k]) for k in fresh})
                self._owned.update((name, k) for k in fresh)

    def _adopt(self, name: str, key: Any) -> None:
        """Records that this object made table[key] itself (a fork never copies it)."""
        if self._owned is not None:
            self._owned.add((name, key))
