"""Append-only numpy rows that index snapshots share copy-on-write.

A published index snapshot is never changed; a writer forks it and extends the fork. Forks share the buffer: a
view may write in place only rows past the highest row any view of the buffer has written (its high-water mark),
so appends cost nothing extra and never show in another view; changing an existing row, or appending behind a
sibling fork that already wrote further, copies the buffer first.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .persistent import Forkable


class _Mark:
    __slots__ = ("n", "forked", "lock")

    def __init__(self, n: int):
        self.n = n  # rows written by any view of this buffer
        self.forked = False
        self.lock = threading.Lock()  # two forks of one snapshot may append at once (optimistic ingest runs)


class GrowArray(Forkable):
    """A leaf of the fork mechanism (persistent.Forkable): its own fork() shares the buffer."""

    __slots__ = ("data", "n", "_mark", "_from")

    def __init__(self, dtype: type, capacity: int = 4, row: tuple[int, ...] = ()):
        self.data: np.ndarray = np.zeros((max(capacity, 1), *row), dtype=dtype)
        self.n = 0
        self._mark = _Mark(0)
        self._from = 0  # rows from here on were written by this view alone (put changes them in place)

    def __len__(self) -> int:
        return self.n

    @classmethod
    def of(cls, rows: np.ndarray) -> GrowArray:
        """A view holding `rows` itself, not a copy (views of one loaded array): being full, its first append copies."""
        out = object.__new__(cls)
        out.data, out.n, out._mark, out._from = rows, len(rows), _Mark(len(rows)), 0
        return out

    def fork(self) -> GrowArray:
        out = object.__new__(GrowArray)
        out.data, out.n, out._mark, out._from = self.data, self.n, self._mark, self.n
        self._mark.forked = True
        self._from = self.n  # its rows are the fork's to read now
        return out

    def view(self) -> np.ndarray:
        return self.data[: self.n]

    def _copy(self, capacity: int) -> None:
        data = np.zeros((max(capacity, 1), *self.data.shape[1:]), dtype=self.data.dtype)
        data[: self.n] = self.data[: self.n]
        self.data, self._mark, self._from = data, _Mark(self.n), 0

    def reserve(self, rows: int) -> None:
        """Makes rows [n, n + rows) writable by this view alone."""
        need = self.n + rows
        with self._mark.lock:
            if self._mark.n == self.n and need <= len(self.data):
                self._mark.n = need
                return
        # x1.5: appends stay amortized O(1), and a buffer holds a third spare at most (doubling: a half; the
        # packet vectors and postings are most of an index)
        self._copy(max(need, len(self.data) + len(self.data) // 2 + 1))
        self._mark.n = need

    def append(self, value: npt.ArrayLike) -> None:
        self.reserve(1)
        self.data[self.n] = value
        self.n += 1

    def extend(self, values: Sequence[Any] | np.ndarray) -> None:
        self.reserve(len(values))
        self.data[self.n : self.n + len(values)] = values
        self.n += len(values)

    def writable(self) -> np.ndarray:
        """The buffer, to change rows < n in place: copied first when another view may read them."""
        if self._mark.forked:
            self._copy(len(self.data))
        return self.data

    def put(self, i: int, value: npt.ArrayLike) -> None:
        """Row i < n set: in place when this view appended it itself, else in a copy of the buffer."""
        (self.data if i >= self._from else self.writable())[i] = value

    def insert(self, i: int, value: npt.ArrayLike) -> None:
        self.reserve(1)
        data = self.writable()
        data[i + 1 : self.n + 1] = data[i : self.n]  # numpy copies overlapping slices safely
        data[i] = value
        self.n += 1

    def delete(self, i: int) -> None:
        data = self.writable()
        data[i : self.n - 1] = data[i + 1 : self.n]
        self.n -= 1
        self._mark.n = self.n  # writable() left this view the buffer's only one
