"""Append-only rows of terms held as one column of codes into a string table.

Each descriptor keeps the distinct terms of its claim and of its keywords. A tuple per row would cost two tuple
objects and their pointers per descriptor; here a row is its int32 codes in one flat array, cut by an offsets
array, and each distinct term is one string of the table. A row is made a tuple when it is read (a query reads a
few hundred, each cheap).

Forks share everything: both arrays are GrowArrays (appends past every view's rows are invisible to the others) and
the table only ever gains terms, so a term another fork added is one no row of this one names.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np

from .growarray import GrowArray
from .persistent import Forkable


class TermTable:
    """Terms by code and codes by term, appended under a lock (two forks of one snapshot may write at once)."""

    __slots__ = ("strings", "codes", "lock")

    def __init__(self, strings: Iterable[str] = ()):
        self.strings: list[str] = list(strings)
        self.codes: dict[str, int] = dict(zip(self.strings, range(len(self.strings))))
        self.lock = threading.Lock()

    def encode(self, terms: Iterable[str]) -> list[int]:
        codes, out = self.codes, []
        for term in terms:
            code = codes.get(term)
            if code is None:
                with self.lock:
                    code = codes.get(term)
                    if code is None:
                        code = codes[term] = len(self.strings)
                        self.strings.append(term)
            out.append(code)
        return out


class TermRows(Forkable):
    """What UserIndex.claim_terms and key_terms are: row i is the tuple of descriptor i's distinct terms. A fork
    shares the table (it only gains terms) and forks both arrays."""

    CHILDREN = ("_codes", "_offsets")

    def __init__(self) -> None:
        self.table = TermTable()
        self._codes = GrowArray(np.int32, 1024)
        self._offsets = GrowArray(np.int64, 1024)
        self._offsets.append(0)

    @classmethod
    def of(cls, strings: list[str], codes: np.ndarray, offsets: np.ndarray) -> TermRows:
        """Rows of codes into `strings` cut at `offsets` (n + 1 ascending, from 0), kept as they are: only the terms
        they name go into the table."""
        used, compact = np.unique(codes, return_inverse=True)
        out = object.__new__(cls)
        out.table = TermTable(map(strings.__getitem__, used.tolist()))
        out._codes = GrowArray.of(compact.astype(np.int32).reshape(-1))
        out._offsets = GrowArray.of(np.array(offsets, dtype=np.int64))  # a copy: not a view of the file
        return out

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _row(self, i: int) -> tuple[str, ...]:
        offsets = self._offsets.data
        return tuple(map(self.table.strings.__getitem__, self._codes.data[offsets[i] : offsets[i + 1]].tolist()))

    @overload
    def __getitem__(self, i: int) -> tuple[str, ...]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[str, ...]]: ...
    def __getitem__(self, i: int | slice) -> tuple[str, ...] | list[tuple[str, ...]]:
        n = len(self)
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("TermRows index out of range")
        return self._row(i)

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        return (self._row(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (TermRows, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == tuple(b) for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def extend(self, rows: Sequence[Sequence[str]]) -> None:
        """Appends rows in place (a fork's appends stay its own: see GrowArray)."""
        if not rows:
            return
        self._codes.extend(self.table.encode(t for row in rows for t in row))
        ends = np.cumsum([len(row) for row in rows], dtype=np.int64) + self._offsets.data[len(self._offsets) - 1]
        self._offsets.extend(ends)

    def flat(self) -> tuple[list[str], np.ndarray]:
        """(every row's terms in a row, offsets): what a snapshot file stores."""
        strings = self.table.strings
        return list(map(strings.__getitem__, self._codes.view().tolist())), self._offsets.view()
