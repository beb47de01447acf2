"""The user's packet vectors as the index holds them: L2-normalized rows of one matrix, one per packet.

Chroma persists the vectors (and serves other processes); each process keeps the user's matrix in memory so the
dense channel (address/dense.py) is exact and every packet's cosine is at hand for the evidence plane.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from .growarray import GrowArray
from .payload import FormatError, Reader, Writer, pick
from .persistent import Forkable

_STAMPS = itertools.count()  # process-wide: a stamp names one matrix content across PacketVectors objects


class PacketVectors(Forkable):
    """A fork shares the ids and rows (persistent after the first fork) and the matrix (copy-on-write rows)."""

    SHARED = ("ids", "row")
    CHILDREN = ("_m",)

    def __init__(self, dim: int = 384):
        self.dim = dim
        self._m = GrowArray(np.float32, 256, (dim,))
        self.ids: list[str] = []
        self.row: dict[str, int] = {}
        self.stamp = next(_STAMPS)  # renewed whenever the matrix changes

    def __len__(self) -> int:
        return len(self.ids)

    def set(self, ids: list[str], vectors: npt.ArrayLike) -> None:
        if not len(ids):
            return
        arr = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        if len(self.ids) == 0 and arr.shape[1] != self.dim:
            self.dim, self._m = arr.shape[1], GrowArray(np.float32, 256, (arr.shape[1],))
        new = list(dict.fromkeys(i for i in ids if i not in self.row))
        known = [(k, i) for k, i in enumerate(ids) if i in self.row]
        if known:  # vectors made again for stored packets (a reconcile): rows change in place
            self._m.writable()[[self.row[i] for _, i in known]] = arr[[k for k, _ in known]]
        if new:
            start = len(self.ids)
            self._m.reserve(len(new))
            self._put_many("row", {pid: start + k for k, pid in enumerate(new)})
            self._push_all("ids", new)
            last = {i: k for k, i in enumerate(ids)}  # the last vector given for an id wins, as before
            self._m.data[start : start + len(new)] = arr[[last[i] for i in new]]
            self._m.n = len(self.ids)
        self.stamp = next(_STAMPS)

    def matrix(self) -> np.ndarray:
        """The vectors in row order (a view: read only)."""
        return self._m.view()

    def encode(self, w: Writer, packet_position: Mapping[str, int]) -> None:
        """Into a payload: each row's packet (by its position) and the matrix."""
        w.doc["dim"] = self.dim
        # a vector of a packet the index does not hold (never made) is written as -1, which no load accepts
        w.arrays["vectors.packets"] = np.fromiter((packet_position.get(p, -1) for p in self.ids), np.int32)
        w.arrays["vectors.matrix"] = self.matrix()

    @classmethod
    def decode(cls, r: Reader, order: list[str]) -> PacketVectors:
        """The vectors `encode` wrote, of the packets `order` names; else FormatError."""
        dim = r.value("dim", int)
        rows = r.array("vectors.packets", np.int32, (None,), 0, len(order)).tolist()
        matrix = r.array("vectors.matrix", np.float32, (len(rows), dim)).copy()
        if dim < 1 or not np.isfinite(matrix).all():
            raise FormatError("vectors")
        vectors = cls(dim)
        vectors.ids = pick(order, rows)
        vectors.row = dict(zip(vectors.ids, range(len(rows))))
        if len(vectors.row) != len(rows):
            raise FormatError("a packet's vector twice")
        vectors._m = GrowArray.of(matrix)
        return vectors
