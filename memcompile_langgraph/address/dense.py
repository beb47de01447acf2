"""The dense packet channel (Sec. 3.2.4, App. C.2): L2-normalized packet vectors, cosine = a matrix-vector product.

Chroma persists the vectors (and serves other processes); each process keeps the user's matrix in memory so
D_q is exact and every packet's cosine is at hand for the evidence plane.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..index.growarray import GrowArray
from ..index.persistent import Forkable
from ..model import DenseHit

_STAMPS = itertools.count()  # process-wide: a stamp names one matrix content across PacketVectors objects


def top_positions(x: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest values, best first, ties in position order (no full sort of x)."""
    if k <= 0 or not len(x):
        return np.zeros(0, dtype=np.int64)
    if k < len(x):
        cut = np.partition(x, len(x) - k)[len(x) - k]
        idx = np.flatnonzero(x >= cut)
    else:
        idx = np.arange(len(x))
    return idx[np.lexsort((idx, -x[idx]))][:k]


class QuerySimilarities:
    """Cosine of each query vector with every stored packet (row order), computed once per query: the dense
    channel ranks D_q from the first array and offline fusion reads them all."""

    __slots__ = ("stamp", "arrays")

    def __init__(self, stamp: int, arrays: tuple[np.ndarray, ...]):
        self.stamp = stamp  # PacketVectors.stamp of the matrix they were computed on
        self.arrays = arrays  # float32, one per query vector

    def _asdict(self) -> dict[str, int]:
        """What JSON views of a run (LangGraph Studio's stream) show: sizes, not a float per packet."""
        return {"packets": len(self.arrays[0]) if self.arrays else 0, "query_vectors": len(self.arrays)}


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

    def set(self, ids: list[str], vectors) -> None:
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

    def similarities(self, query: Any) -> np.ndarray:
        """Cosine of the query with every stored packet, in row order."""
        return self._m.view() @ np.asarray(query, dtype=np.float32)

    def query_similarities(self, queries: Sequence[Any], known: QuerySimilarities | None = None) -> QuerySimilarities:
        """The similarity arrays of the query vectors; `known` is reused when it was computed on this matrix as it
        is now (a graph run not pinned to one index may meet a newer one between the dense and evidence stages)."""
        if known is not None and known.stamp == self.stamp and len(known.arrays) == len(queries):
            return known
        return QuerySimilarities(self.stamp, tuple(self.similarities(q) for q in queries))

    def top(self, query: np.ndarray, k: int) -> list[DenseHit]:
        """D_q of one query vector."""
        return self.top_from(self.similarities(query), k)

    def top_from(self, sims: np.ndarray, k: int) -> list[DenseHit]:
        """D_q from a similarity array of this matrix: the k packets of highest cosine; ties keep storage order, at
        the cutoff too (argpartition alone would pick among equal cosines arbitrarily)."""
        return [DenseHit(self.ids[i], float(sims[i])) for i in top_positions(sims, k)]
