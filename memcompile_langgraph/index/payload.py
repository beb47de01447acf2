"""The payload form the index's classes encode themselves in: a run of .npy records (np.save; read back as views by
numpy's header parser and np.frombuffer, object arrays refused, so nothing is ever unpickled): first a uint8 array
holding the JSON document (kind, version, scalars, the unique text columns and one interned string table), then the
arrays it names, in its order. index/codec.py says what a snapshot file holds.

A Reader reads untrusted bytes: every array's dtype and shape, every id's range and every JSON value's type is
checked, and anything else raises FormatError (the caller then rebuilds from the records)."""

from __future__ import annotations

import builtins
import io
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from .persistent import Rows

T = TypeVar("T")

VERSION = 2  # 2: BM25 postings as int32
_HEADER_MAX = 10000  # np.load's own bound on a header
NAME = "memcompile-index"
_NULL = -1  # code of None in a nullable string column (the table is read with None appended)


class FormatError(ValueError):
    """A payload that is not a well-formed one of this VERSION."""


class Writer:
    def __init__(self, kind: str):
        self.doc: dict[str, Any] = {"format": NAME, "version": VERSION, "kind": kind}
        self.arrays: dict[str, np.ndarray] = {}
        self._codes: dict[str, int] = {}

    def code(self, values: Sequence[str | None]) -> np.ndarray:
        """Codes into the string table (None: _NULL)."""
        codes = self._codes
        return np.fromiter(
            (_NULL if v is None else codes.setdefault(v, len(codes)) for v in values), np.int32, len(values)
        )

    def ragged(self, name: str, rows: Rows[Sequence[Any]], encode: Callable[[list[Any]], np.ndarray]) -> None:
        flat = [x for row in rows for x in row]
        self.arrays[name] = encode(flat)
        self.arrays[name + ".offsets"] = np.cumsum([0, *map(len, rows)], dtype=np.int64)

    def payload(self) -> bytes:
        self.doc["strings"] = list(self._codes)
        self.doc["arrays"] = list(self.arrays)
        out = io.BytesIO()
        # ASCII with escapes: a lone surrogate in a turn's text survives (UTF-8 could not encode it)
        np.save(out, np.frombuffer(json.dumps(self.doc).encode(), np.uint8), allow_pickle=False)
        for array in self.arrays.values():
            np.save(out, np.ascontiguousarray(array), allow_pickle=False)
        return out.getvalue()


class Reader:
    def __init__(self, payload: bytes | memoryview, kind: str):
        view = memoryview(payload)
        text, at = _record(view, 0)
        if text.dtype != np.uint8 or text.ndim != 1:
            raise FormatError("no document")
        doc = json.loads(text.tobytes())
        if not isinstance(doc, dict) or doc.get("format") != NAME:
            raise FormatError("not an index snapshot payload")
        if doc.get("version") != VERSION or doc.get("kind") != kind:
            raise FormatError(f"a {doc.get('kind')!r} payload of version {doc.get('version')!r}")
        self.doc = doc
        self.strings = self.list("strings", str)
        self._table = np.array([*self.strings, None], dtype=object)  # _NULL (-1) reads as None
        self.arrays = {}
        for name in self.list("arrays", str):
            self.arrays[name], at = _record(view, at)
        if at != len(view):
            raise FormatError("trailing bytes")

    def value(self, key: str, kind: type | tuple[type, ...]) -> Any:
        value = self.doc.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise FormatError(f"{key}: expected {kind}")
        return value

    def list(self, key: str, kind: type | tuple[type, ...], n: int | None = None) -> builtins.list[Any]:
        values: builtins.list[Any] = self.value(key, list)
        if not set(map(type, values)) <= (set(kind) if isinstance(kind, tuple) else {kind}):
            raise FormatError(f"{key}: expected a list of {kind}")
        if n is not None and len(values) != n:
            raise FormatError(f"{key}: {len(values)} values, expected {n}")
        return values

    def array(
        self, name: str, dtype: type, shape: tuple[int | None, ...], low: int | None = None, high: int | None = None
    ) -> np.ndarray:
        """The named array, checked: exact dtype, shape (None: any length), integer values in [low, high)."""
        a = self.arrays.get(name)
        if a is None or a.dtype != np.dtype(dtype) or a.ndim != len(shape):
            raise FormatError(f"{name}: missing or of another type")
        if any(want is not None and got != want for got, want in zip(a.shape, shape)):
            raise FormatError(f"{name}: shape {a.shape}, expected {shape}")
        if a.size and ((low is not None and a.min() < low) or (high is not None and a.max() >= high)):
            raise FormatError(f"{name}: values out of range")
        return a

    def codes(self, name: str, n: int | None, nullable: bool = False) -> np.ndarray:
        return self.array(name, np.int32, (n,), _NULL if nullable else 0, len(self.strings))

    def texts(self, name: str, n: int | None, nullable: bool = False) -> builtins.list[Any]:
        texts: builtins.list[Any] = self._table[self.codes(name, n, nullable)].tolist()  # references taken in C
        return texts

    def offsets(self, name: str, rows: int, flat: int) -> np.ndarray:
        off = self.array(name + ".offsets", np.int64, (rows + 1,))
        if off[0] != 0 or off[-1] != flat or (np.diff(off) < 0).any():
            raise FormatError(f"{name}: bad offsets")
        return off

    def ragged(
        self, name: str, rows: int, values: builtins.list[Any] | np.ndarray, row: Callable[[Any], Any] = tuple
    ) -> builtins.list[Any]:
        """values cut into rows by the offsets array (each row made in C: a large user has hundreds of thousands)."""
        off = self.offsets(name, rows, len(values)).tolist()
        spans = map(slice, off[:-1], off[1:])
        if row is tuple or row is list:  # a slice of a tuple (list) is the row itself: one object per row
            return list(map((values if type(values) is row else row(values)).__getitem__, spans))
        return list(map(row, map(values.__getitem__, spans)))


def _record(view: memoryview, at: int) -> tuple[np.ndarray, int]:
    """The .npy record (np.save) at `at`, read only, and where the next one starts. The header is parsed by numpy's
    own reader; the data is a view of the payload, not a copy (np.load reads through a file object: the whole
    payload would be copied twice). Object arrays are refused: nothing is ever unpickled."""
    head = io.BytesIO(view[at : at + 12 + _HEADER_MAX])
    try:
        major, _ = np.lib.format.read_magic(head)
        read = {1: np.lib.format.read_array_header_1_0, 2: np.lib.format.read_array_header_2_0}.get(major)
        if read is None:
            raise FormatError(f"npy version {major}")
        shape, fortran, dtype = read(head, max_header_size=_HEADER_MAX)
    except (ValueError, EOFError) as exc:  # truncated, not .npy, a header that is not a literal
        raise FormatError(f"unreadable array: {exc}") from None
    if dtype.hasobject or fortran or min(shape, default=0) < 0:
        raise FormatError("an object, Fortran-ordered or negative-shaped array")
    start, count = at + head.tell(), math.prod(shape)
    end = start + count * dtype.itemsize
    if end > len(view):
        raise FormatError("truncated")
    return np.frombuffer(view, dtype, count, start).reshape(shape), end


def strings_column(columns: dict[str, Any], name: str, n: int | None) -> list[str]:
    values = columns.get(name)
    if not isinstance(values, list) or not set(map(type, values)) <= {str} or n not in (None, len(values)):
        raise FormatError(f"{name}: expected {n} strings")
    return values


def unique(values: list[Any], what: str) -> None:
    if len(set(values)) != len(values):
        raise FormatError(f"duplicate {what}")


def pick(values: Sequence[T], rows: list[int]) -> list[T]:
    return list(map(values.__getitem__, rows))


def inverse(
    r: Reader, name: str, rows: int, values: list[str] | None = None, keep: np.ndarray | None = None
) -> dict[str, set[Any]]:
    """The ragged column `name` inverted: each string -> the set of rows holding it (or values[row]), over the rows
    `keep` marks. Grouped with one sort instead of a Python loop over every (row, string) pair."""
    codes = r.codes(name, None)
    owner = np.repeat(np.arange(rows), np.diff(r.offsets(name, rows, len(codes))))
    if keep is not None:
        codes, owner = codes[keep[owner]], owner[keep[owner]]
    if not len(codes):
        return {}
    order = np.argsort(codes, kind="stable")
    codes, owner = codes[order], owner[order]
    cuts = (np.flatnonzero(np.diff(codes)) + 1).tolist()
    starts, ends = [0, *cuts], [*cuts, len(codes)]
    owners = owner.tolist() if values is None else pick(values, owner.tolist())
    keys = pick(r.strings, codes[starts].tolist())
    return dict(zip(keys, map(set, map(owners.__getitem__, map(slice, starts, ends)))))
