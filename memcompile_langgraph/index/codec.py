"""Snapshot payloads as data: a UserIndex (or a tail file's vectors) as NumPy arrays and one JSON document (the
payload form of index/payload.py; each part of the index, BM25Index, CellLayout, RouteIndex, PacketVectors, encodes
and decodes itself in it). Columns are stored, not objects: a descriptor's people are codes into the string table
cut by an offsets array, a BM25 posting list a slice of one flat array. Whatever a load can make again from the
records themselves (packet order, regrouped maps, routing postings, Cell indexes, route columns) is not stored, so
a file cannot hold them inconsistent.

A payload of another VERSION is refused like a damaged one (FormatError): nothing of it is migrated, the records
rebuild it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np

from ..address.bm25 import BM25Index
from ..address.cells import CellLayout
from ..model import Descriptor, SourcePacket, from_columns
from .payload import VERSION, FormatError, Reader, Writer, pick, strings_column, unique
from .termrows import TermRows
from .vectors import PacketVectors

if TYPE_CHECKING:
    from .user import UserIndex

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["VERSION", "FormatError", "decode_index", "decode_tail", "encode_index", "encode_tail"]


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


def encode_index(index: UserIndex) -> bytes:
    """The payload of a snapshot file: what decode_index needs to give back an equal UserIndex."""
    w = Writer("index")
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

    index.layout.encode(w, index.position)
    index.bm25.encode(w, "bm25")
    index.packet_bm25.encode(w, "packet_bm25")
    index.vectors.encode(w, index.packet_position)
    return w.payload()


@_decoding
def decode_index(payload: bytes | memoryview, template: UserIndex) -> UserIndex:
    """The UserIndex of an encode_index payload, with `template`'s user and config; else FormatError."""
    r = Reader(payload, "index")
    if r.value("user", str) != template.user_id:
        raise FormatError("another user's payload")
    index = type(template)(template.user_id, template.cfg)
    index.version, index.epoch = r.value("records_version", int), r.value("epoch", int)
    index.digest = r.value("digest", str)

    columns = r.value("packets", dict)
    order = strings_column(columns, "packet_id", None)
    n = len(order)
    values: dict[str, list[Any]] = {name: strings_column(columns, name, n) for name in _PACKET_TEXT}
    values |= {name: r.texts(f"packets.{name}", n, name in _NULLABLE) for name in _PACKET_CODED}
    values["session"] = r.array("packets.session", np.int64, (n,)).tolist()
    values["seq"] = r.array("packets.seq", np.int64, (n,)).tolist()
    packets = from_columns(SourcePacket, tuple(values[f.name] for f in fields(SourcePacket)))
    columns_of_packets = values

    columns = r.value("descriptors", dict)
    ids = strings_column(columns, "descriptor_id", None)
    m = len(ids)
    rows = r.array("descriptors.packet", np.int32, (m,), 0, n).tolist()
    values = {"descriptor_id": ids, "claim": strings_column(columns, "claim", m), "packet_id": pick(order, rows)}
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
    used, speakers = np.unique(r.codes("packets.speaker", n), return_inverse=True)
    index.make_columns(timed, pick(r.strings, used.tolist()), speakers.reshape(-1))
    for name in ("claim_terms", "key_terms"):
        codes = r.codes(name, None)
        setattr(index, name, TermRows.of(r.strings, codes, r.offsets(name, m, len(codes))))

    index.layout = CellLayout.decode(r, template.cfg, descriptors, ids)
    index.bm25 = BM25Index.decode(r, "bm25", template.cfg, m)
    index.packet_bm25 = BM25Index.decode(r, "packet_bm25", template.cfg, n)
    index.take_vectors(PacketVectors.decode(r, order))
    return index


# --- tail files --------------------------------------------------------------------------------------------------


def encode_tail(ids: list[str], matrix: np.ndarray) -> bytes:
    """A tail file's payload: packet ids and their vectors, one row each."""
    w = Writer("tail")
    w.doc["ids"] = list(ids)
    w.arrays["matrix"] = np.asarray(matrix, dtype=np.float32).reshape(len(ids), -1)
    return w.payload()


@_decoding
def decode_tail(payload: bytes | memoryview, template: object = None) -> tuple[list[str], np.ndarray]:
    """(ids, matrix) of an encode_tail payload, else FormatError."""
    r = Reader(payload, "tail")
    ids = r.list("ids", str)
    unique(ids, "ids")
    matrix = r.array("matrix", np.float32, (len(ids), None))
    if matrix.shape[1] < 1 or not np.isfinite(matrix).all():
        raise FormatError("tail vectors")
    return ids, matrix.copy()  # not a view that keeps the whole file in memory
