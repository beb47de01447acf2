"""Snapshot payloads as data: a UserIndex (or a tail file's vectors) as NumPy arrays and one JSON document.

A payload is a run of .npy records (np.save; read back as views by numpy's header parser and np.frombuffer, object
arrays refused, so nothing is ever unpickled): first a uint8 array holding the JSON document (kind, version,
scalars, the unique text columns and one interned string table), then the arrays it names, in its order. Columns
are stored, not objects: a descriptor's people are codes into the string table cut by an offsets array, a BM25
posting list a slice of one flat array. Whatever a load can make
again from the records themselves (packet order, regrouped maps, routing postings, Cell indexes, route columns)
is not stored, so a file cannot hold them inconsistent.

Decoding reads untrusted bytes: every array's dtype and shape, every id's range and every JSON value's type is
checked, and anything else raises FormatError (the caller then rebuilds from the records). A payload of another
VERSION is refused the same way: nothing of it is migrated, the records rebuild it.
"""

from __future__ import annotations

import builtins
import io
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np

from ..address.bm25 import BM25Index
from ..address.cells import CellLayout, _counters
from ..config import MemCompileConfig
from ..model import Cell, Descriptor, SourcePacket, from_columns
from .growarray import GrowArray
from .persistent import Rows
from .termrows import TermRows, TermTable
from .user import asks_only
from .vectors import PacketVectors

if TYPE_CHECKING:
    from .user import UserIndex

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

VERSION = 2  # 2: BM25 postings as int32
_HEADER_MAX = 10000  # np.load's own bound on a header
NAME = "memcompile-index"
_NULL = -1  # code of None in a nullable string column (the table is read with None appended)


class FormatError(ValueError):
    """A payload that is not a well-formed one of this VERSION."""


class _Writer:
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


class _Reader:
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
        """values cut into rows by the offsets array (each row made in C: ~190k rows per column at 100k turns)."""
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


def _decoding(decode: Callable[P, R]) -> Callable[P, R]:
    """Any failure of a decoder is a FormatError: damaged content never escapes as another exception."""

    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return decode(*args, **kwargs)
        except FormatError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as exc:
            raise FormatError(f"malformed payload: {type(exc).__name__}: {exc}") from None

    guarded.__name__, guarded.__doc__ = decode.__name__, decode.__doc__
    return guarded


# --- the index ---------------------------------------------------------------------------------------------------

# SourcePacket / Descriptor string fields stored as codes into the string table (they repeat); the others are unique
_PACKET_CODED: tuple[str, ...] = ("user_id", "dia_id", "speaker", "session_label", "session_time", "session_time_raw")
_PACKET_CODED += ("image_caption", "image_query")
_PACKET_TEXT = ("packet_id", "text", "content_hash")
_DESCRIPTOR_CODED = ("dia_id", "speaker", "session_time", "event_time", "interaction_time")
_DESCRIPTOR_INT = ("session", "n_tokens", "seq")
_NULLABLE = ("session_time",)
_COUNTED = ("keyword_counts", "person_counts", "dia_counts")


def encode_index(index: UserIndex) -> bytes:
    """The payload of a snapshot file: what decode_index needs to give back an equal UserIndex."""
    w = _Writer("index")
    packets = [index.packets[p] for p in index.packet_order]
    descriptors = list(index.descriptors)
    n, m = len(packets), len(descriptors)
    w.doc |= {"user": index.user_id, "records_version": index.version, "epoch": index.epoch, "digest": index.digest}
    w.doc["people"] = list(index.people)
    w.doc["packets"] = {name: [getattr(p, name) for p in packets] for name in _PACKET_TEXT}
    for name in _PACKET_CODED:
        w.arrays[f"packets.{name}"] = w.code([getattr(p, name) for p in packets])
    w.arrays["packets.session"] = np.fromiter((p.session for p in packets), np.int64, n)
    w.arrays["packets.seq"] = np.fromiter((p.seq for p in packets), np.int64, n)
    w.arrays["packets.timed"] = np.fromiter(index.packet_timed, np.bool_, n)

    w.doc["descriptors"] = {name: [getattr(d, name) for d in descriptors] for name in ("descriptor_id", "claim")}
    w.arrays["descriptors.packet"] = np.fromiter(index.claim_packets, np.int32, m)
    for name in _DESCRIPTOR_CODED:
        w.arrays[f"descriptors.{name}"] = w.code([getattr(d, name) for d in descriptors])
    for name in _DESCRIPTOR_INT:
        w.arrays[f"descriptors.{name}"] = np.fromiter((getattr(d, name) for d in descriptors), np.int64, m)
    w.arrays["descriptors.negated"] = np.fromiter((d.negated for d in descriptors), np.bool_, m)
    for name in ("people", "keywords"):
        w.ragged(f"descriptors.{name}", [getattr(d, name) for d in descriptors], w.code)
    for name in ("claim_terms", "key_terms"):
        terms, offsets = getattr(index, name).flat()
        w.arrays[name], w.arrays[name + ".offsets"] = w.code(terms), offsets

    _encode_layout(w, index.layout, index.position)
    _encode_bm25(w, "bm25", index.bm25)
    _encode_bm25(w, "packet_bm25", index.packet_bm25)
    _encode_vectors(w, index.vectors, index.packet_position)
    return w.payload()


@_decoding
def decode_index(payload: bytes | memoryview, template: UserIndex) -> UserIndex:
    """The UserIndex of an encode_index payload, with `template`'s user and config; else FormatError."""
    r = _Reader(payload, "index")
    if r.value("user", str) != template.user_id:
        raise FormatError("another user's payload")
    index = type(template)(template.user_id, template.cfg)
    index.version, index.epoch = r.value("records_version", int), r.value("epoch", int)
    index.digest = r.value("digest", str)

    columns = r.value("packets", dict)
    order = _strings(columns, "packet_id", None)
    n = len(order)
    values: dict[str, list[Any]] = {name: _strings(columns, name, n) for name in _PACKET_TEXT}
    values |= {name: r.texts(f"packets.{name}", n, name in _NULLABLE) for name in _PACKET_CODED}
    values["session"] = r.array("packets.session", np.int64, (n,)).tolist()
    values["seq"] = r.array("packets.seq", np.int64, (n,)).tolist()
    packets = from_columns(SourcePacket, tuple(values[f.name] for f in fields(SourcePacket)))
    columns_of_packets = values

    columns = r.value("descriptors", dict)
    ids = _strings(columns, "descriptor_id", None)
    m = len(ids)
    rows = r.array("descriptors.packet", np.int32, (m,), 0, n).tolist()
    values = {"descriptor_id": ids, "claim": _strings(columns, "claim", m), "packet_id": _pick(order, rows)}
    values |= {name: r.texts(f"descriptors.{name}", m, name in _NULLABLE) for name in _DESCRIPTOR_CODED}
    values |= {name: r.array(f"descriptors.{name}", np.int64, (m,)).tolist() for name in _DESCRIPTOR_INT}
    values["negated"] = r.array("descriptors.negated", np.bool_, (m,)).tolist()
    for name in ("people", "keywords"):
        values[name] = r.ragged(f"descriptors.{name}", m, r.texts(f"descriptors.{name}", None))
    descriptors = from_columns(Descriptor, tuple(values[f.name] for f in fields(Descriptor)))

    # what add_packet and register keep, made again from the records (and their columns)
    values = columns_of_packets
    index.packets = dict(zip(order, packets))
    index.packet_order = order
    index.packet_position = dict(zip(order, range(n)))
    index.by_dia = dict(zip(values["dia_id"], order))
    index.hashes = dict(zip(values["content_hash"], order))
    index.packet_sessions = values["session"]
    index.packet_speakers = values["speaker"]
    timed = r.array("packets.timed", np.bool_, (n,))
    index.packet_timed = timed.tolist()
    for session, label, time in zip(values["session"], values["session_label"], values["session_time"]):
        if session not in index.sessions:
            index.sessions[session] = (label, time)
    index.session_packets = dict(Counter(index.packet_sessions))
    index.last_session = max(index.packet_sessions, default=None)
    index.people = dict.fromkeys(r.list("people", str))
    index.descriptors = descriptors
    index.position = dict(zip(ids, range(m)))
    if len(index.packet_position) != n or len(index.position) != m:
        raise FormatError("duplicate packet or descriptor ids")
    index.claim_packets = rows
    index.by_packet = {pid: [] for pid in order}
    for d in descriptors:
        index.by_packet[d.packet_id].append(d)
    # the columns queries read as arrays (UserIndex.COLUMNS), made here as the writes that add rows make them
    index._sessions = GrowArray.of(np.array(index.packet_sessions, dtype=np.int64))
    index._claim_rows = GrowArray.of(np.array(rows, dtype=np.int64))
    index._timed = GrowArray.of(timed.astype(np.float64))
    used, speakers = np.unique(r.codes("packets.speaker", n), return_inverse=True)
    index._speaker_codes = TermTable(_pick(r.strings, used.tolist()))
    index._speakers = GrowArray.of(speakers.astype(np.int32).reshape(-1))
    index._asking = GrowArray.of(np.fromiter(map(asks_only, packets), np.float64, n))
    index._spans = GrowArray.of(index.time_spans(range(n)))
    for name in ("claim_terms", "key_terms"):
        codes = r.codes(name, None)
        setattr(index, name, TermRows.of(r.strings, codes, r.offsets(name, m, len(codes))))

    index.layout = _decode_layout(r, template.cfg, descriptors, ids)
    index.bm25 = _decode_bm25(r, "bm25", template.cfg, m)
    index.packet_bm25 = _decode_bm25(r, "packet_bm25", template.cfg, n)
    index.vectors = _decode_vectors(r, order)
    return index


def _strings(columns: dict[str, Any], name: str, n: int | None) -> list[str]:
    values = columns.get(name)
    if not isinstance(values, list) or not set(map(type, values)) <= {str} or n not in (None, len(values)):
        raise FormatError(f"{name}: expected {n} strings")
    return values


def _unique(values: list[Any], what: str) -> None:
    if len(set(values)) != len(values):
        raise FormatError(f"duplicate {what}")


def _pick(values: Sequence[T], rows: list[int]) -> list[T]:
    return list(map(values.__getitem__, rows))


# --- Cells and their routing -------------------------------------------------------------------------------------


def _encode_layout(w: _Writer, layout: CellLayout, position: Mapping[str, int]) -> None:
    cells = sorted(layout.cells.values(), key=lambda c: c.seq)  # a persistent map iterates in hash order
    w.doc["layout"] = {
        "cell_id": [c.cell_id for c in cells],
        "title": [c.title for c in cells],
        "session_min": [c.session_min for c in cells],
        "session_max": [c.session_max for c in cells],
        "next": layout._next,
    }
    w.ragged(
        "cells.descriptors",
        [c.descriptor_ids for c in cells],
        lambda ids: np.fromiter(map(position.__getitem__, ids), np.int32, len(ids)),
    )
    w.arrays["cells.tokens"] = np.fromiter((c.tokens for c in cells), np.int64, len(cells))
    w.arrays["cells.has_time"] = np.fromiter((c.has_time for c in cells), np.bool_, len(cells))
    for name in _COUNTED:
        counters = [getattr(c, name) for c in cells]
        w.ragged(f"cells.{name}", [list(c) for c in counters], w.code)
        w.arrays[f"cells.{name}.counts"] = np.fromiter((v for c in counters for v in c.values()), np.int64)
    route = layout.route  # its Cell numbers are the Cells' seq, the order of layout.cells
    w.ragged("route.key_terms", [list(s) for s in route.key_terms()], w.code)
    w.ragged("route.title_terms", [list(s) for s in route._title_terms], w.code)


def _decode_layout(r: _Reader, cfg: MemCompileConfig, descriptors: list[Descriptor], ids: list[str]) -> CellLayout:
    doc = r.value("layout", dict)
    cids = _strings(doc, "cell_id", None)
    k, m = len(cids), len(descriptors)
    titles = _strings(doc, "title", k)
    bounds = [doc.get(f"session_{e}") for e in ("min", "max")]
    if not all(isinstance(b, list) and len(b) == k and set(map(type, b)) <= {int, type(None)} for b in bounds):
        raise FormatError("session bounds")
    placed = r.array("cells.descriptors", np.int32, (None,), 0, m)
    if placed.size and np.bincount(placed).max() > 1:
        raise FormatError("a descriptor in two Cells")
    placed_list = placed.tolist()
    members = r.ragged("cells.descriptors", k, _pick(descriptors, placed_list), list)
    descriptor_ids = r.ragged("cells.descriptors", k, _pick(ids, placed_list), list)
    counters: dict[str, list[Counter[str]]] = {}
    for name in _COUNTED:
        keys = r.texts(f"cells.{name}", None)
        counts = r.array(f"cells.{name}.counts", np.int64, (len(keys),), 1).tolist()
        dicts = list(map(dict, map(zip, r.ragged(f"cells.{name}", k, keys), r.ragged(f"cells.{name}", k, counts))))
        if sum(map(len, dicts)) != len(keys):
            raise FormatError(f"{name}: a key twice in one Cell")
        counters[name] = _counters(dicts)
    tokens = r.array("cells.tokens", np.int64, (k,), 0)
    has_time = r.array("cells.has_time", np.bool_, (k,))
    columns = {
        "cell_id": cids,
        "seq": list(range(k)),
        "descriptor_ids": descriptor_ids,
        "tokens": tokens.tolist(),
        "session_min": bounds[0],
        "session_max": bounds[1],
        "has_time": has_time.tolist(),
        "title": titles,
        **counters,
    }
    cells = from_columns(Cell, tuple(columns[f.name] for f in fields(Cell)))

    layout = CellLayout(cfg)
    layout.cells = dict(zip(cids, cells))
    if len(layout.cells) != k:
        raise FormatError("duplicate Cell ids")
    layout.members = dict(zip(cids, members))
    sizes = np.diff(r.offsets("cells.descriptors", k, len(placed)))
    cell_of = np.full(m, -1, dtype=np.int64)
    cell_of[placed] = np.repeat(np.arange(k), sizes)
    held = np.flatnonzero(cell_of >= 0)
    layout.of_descriptor = dict(zip(_pick(ids, held.tolist()), _pick(cids, cell_of[held].tolist())))
    room = sizes < cfg.cell_item_capacity  # a full Cell leaves the candidate index (_unindex_if_full)
    layout._by_key = _inverse(r, "cells.keyword_counts", k, cids, room)
    layout._by_person = _inverse(r, "cells.person_counts", k, cids, room)
    layout._next = doc.get("next")
    if type(layout._next) is not int:
        raise FormatError("next Cell number")

    route = layout.route
    route.ids = list(cids)
    route._title_terms = r.ragged("route.title_terms", k, r.texts("route.title_terms", None), frozenset)
    route._cols = np.zeros((5, max(64, k)), dtype=np.int64)  # RouteIndex grows it by doubling
    route._cols[:, :k] = np.array(
        [
            np.diff(r.offsets("route.key_terms", k, len(r.codes("route.key_terms", None)))),
            list(map(len, counters["person_counts"])),
            list(map(len, route._title_terms)),
            sizes,
            has_time,
        ]
    )
    for name, source in (("key_post", "route.key_terms"), ("people_post", "cells.person_counts")):
        getattr(route, name)._cells = _inverse(r, source, k)
    if sum(map(len, route.key_post._cells.values())) != route._cols[0, :k].sum():
        raise FormatError("a key term twice in one Cell")
    route.title_post._cells = _inverse(r, "route.title_terms", k)
    return layout


def _inverse(
    r: _Reader, name: str, rows: int, values: list[str] | None = None, keep: np.ndarray | None = None
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
    owners = owner.tolist() if values is None else _pick(values, owner.tolist())
    keys = _pick(r.strings, codes[starts].tolist())
    return dict(zip(keys, map(set, map(owners.__getitem__, map(slice, starts, ends)))))


# --- BM25 and vectors --------------------------------------------------------------------------------------------


def _encode_bm25(w: _Writer, name: str, bm25: BM25Index) -> None:
    vocab: list[str] = [""] * len(bm25._df)
    for term, tid in bm25._term_ids.items():  # a persistent map does not iterate in id order
        vocab[tid] = term
    w.arrays[f"{name}.terms"] = w.code(vocab)
    w.arrays[f"{name}.df"] = np.fromiter(bm25._df, np.int64, len(vocab))
    docs, tfs = [g.view() for g in bm25._post_docs], [g.view() for g in bm25._post_tfs]
    w.arrays[f"{name}.docs"] = np.concatenate([np.zeros(0, np.int32), *docs])
    w.arrays[f"{name}.docs.offsets"] = np.cumsum([0, *map(len, docs)], dtype=np.int64)
    w.arrays[f"{name}.tfs"] = np.concatenate([np.zeros(0, np.int32), *tfs])
    w.arrays[f"{name}.doc_len"] = bm25._doc_len.view()
    w.doc[name] = {"open": bm25._open, "open_len": bm25._open_len, "total_len": bm25._total_len}


def _decode_bm25(r: _Reader, name: str, cfg: MemCompileConfig, documents: int) -> BM25Index:
    bm25 = BM25Index(cfg.bm25_k1, cfg.bm25_b, cfg.bm25_epsilon)
    vocab = r.texts(f"{name}.terms", None)
    term_ids = dict(zip(vocab, range(len(vocab))))
    if len(term_ids) != len(vocab):
        raise FormatError(f"{name}: a term twice")
    df = r.array(f"{name}.df", np.int64, (len(vocab),), 0)
    doc_len = r.array(f"{name}.doc_len", np.float64, (None,)).copy()
    doc = r.value(name, dict)
    open_, open_len, total_len = doc.get("open"), doc.get("open_len"), doc.get("total_len")
    if open_ is not None and (
        not isinstance(open_, dict)
        or not set(map(type, open_.values())) <= {int}
        or not all(map(term_ids.__contains__, open_))
        or min(open_.values(), default=1) < 1
    ):
        raise FormatError(f"{name}: open document")
    closed = len(doc_len)
    docs = r.array(f"{name}.docs", np.int32, (None,), 0, closed).copy()  # GrowArrays hold them: their own memory
    tfs = r.array(f"{name}.tfs", np.int32, (len(docs),), 1).copy()
    offsets = r.offsets(f"{name}.docs", len(vocab), len(docs))
    first = np.zeros(len(docs), dtype=bool)  # each posting list ascends
    first[offsets[:-1][offsets[:-1] < len(docs)]] = True
    in_open = np.zeros(len(vocab), dtype=np.int64)
    in_open[[term_ids[t] for t in open_ or ()]] = 1
    if (
        closed + (open_ is not None) != documents
        or not np.all(np.diff(docs)[~first[1:]] > 0)
        or not np.array_equal(np.bincount(docs, tfs, closed), doc_len)  # a document's counts add up to its length
        or not np.array_equal(np.diff(offsets) + in_open, df)
        or type(open_len) is not int
        or type(total_len) is not int
        or open_len != sum((open_ or {}).values())
        or total_len != int(doc_len.sum()) + open_len
    ):
        raise FormatError(f"{name}: postings, frequencies and lengths disagree")
    bounds = offsets.tolist()
    spans = list(map(slice, bounds[:-1], bounds[1:]))
    bm25._term_ids, bm25._df = term_ids, df.tolist()
    bm25._post_docs = list(map(GrowArray.of, map(docs.__getitem__, spans)))
    bm25._post_tfs = list(map(GrowArray.of, map(tfs.__getitem__, spans)))
    bm25._doc_len = GrowArray.of(doc_len)
    bm25._open, bm25._open_len, bm25._total_len = open_, open_len, total_len
    bm25._avg_idf = bm25._average_idf()
    return bm25


def _encode_vectors(w: _Writer, vectors: PacketVectors, packet_position: Mapping[str, int]) -> None:
    w.doc["dim"] = vectors.dim
    # a vector of a packet the index does not hold (never made) is written as -1, which no load accepts
    w.arrays["vectors.packets"] = np.fromiter((packet_position.get(p, -1) for p in vectors.ids), np.int32)
    w.arrays["vectors.matrix"] = vectors.matrix()


def _decode_vectors(r: _Reader, order: list[str]) -> PacketVectors:
    dim = r.value("dim", int)
    rows = r.array("vectors.packets", np.int32, (None,), 0, len(order)).tolist()
    matrix = r.array("vectors.matrix", np.float32, (len(rows), dim)).copy()
    if dim < 1 or not np.isfinite(matrix).all():
        raise FormatError("vectors")
    vectors = PacketVectors(dim)
    vectors.ids = _pick(order, rows)
    vectors.row = dict(zip(vectors.ids, range(len(rows))))
    if len(vectors.row) != len(rows):
        raise FormatError("a packet's vector twice")
    vectors._m = GrowArray.of(matrix)
    return vectors


# --- tail files --------------------------------------------------------------------------------------------------


def encode_tail(ids: list[str], matrix: np.ndarray) -> bytes:
    """A tail file's payload: packet ids and their vectors, one row each."""
    w = _Writer("tail")
    w.doc["ids"] = list(ids)
    w.arrays["matrix"] = np.asarray(matrix, dtype=np.float32).reshape(len(ids), -1)
    return w.payload()


@_decoding
def decode_tail(payload: bytes | memoryview, template: object = None) -> tuple[list[str], np.ndarray]:
    """(ids, matrix) of an encode_tail payload, else FormatError."""
    r = _Reader(payload, "tail")
    ids = r.list("ids", str)
    _unique(ids, "ids")
    matrix = r.array("matrix", np.float32, (len(ids), None))
    if matrix.shape[1] < 1 or not np.isfinite(matrix).all():
        raise FormatError("tail vectors")
    return ids, matrix.copy()  # not a view that keeps the whole file in memory
