"""The dense packet channel (Sec. 3.2.4, App. C.2): cosine with the L2-normalized packet vectors (index/vectors.py)
is a matrix-vector product, so D_q is exact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model import DenseHit

if TYPE_CHECKING:
    from ..index.vectors import PacketVectors


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


def similarities(vectors: PacketVectors, query: Any) -> np.ndarray:
    """Cosine of the query with every stored packet, in row order."""
    return vectors.matrix() @ np.asarray(query, dtype=np.float32)


def query_similarities(
    vectors: PacketVectors, queries: Sequence[Any], known: QuerySimilarities | None = None
) -> QuerySimilarities:
    """The similarity arrays of the query vectors; `known` is reused when it was computed on this matrix as it is
    now (a graph run not pinned to one index may meet a newer one between the dense and evidence stages)."""
    if known is not None and known.stamp == vectors.stamp and len(known.arrays) == len(queries):
        return known
    return QuerySimilarities(vectors.stamp, tuple(similarities(vectors, q) for q in queries))


def top(vectors: PacketVectors, query: np.ndarray, k: int) -> list[DenseHit]:
    """D_q of one query vector."""
    return top_from(vectors, similarities(vectors, query), k)


def top_from(vectors: PacketVectors, sims: np.ndarray, k: int) -> list[DenseHit]:
    """D_q from a similarity array of this matrix: the k packets of highest cosine; ties keep storage order, at the
    cutoff too (argpartition alone would pick among equal cosines arbitrarily)."""
    return [DenseHit(vectors.ids[i], float(sims[i])) for i in top_positions(sims, k)]
