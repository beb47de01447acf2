"""The dense packet channel (Sec. 3.2.4, App. C.2): L2-normalized packet vectors, cosine = a matrix-vector product.

Chroma persists the vectors (and serves other processes); each process keeps the user's matrix in memory so
D_q is exact and every packet's cosine is at hand for the evidence plane.
"""
from __future__ import annotations

import numpy as np

from ..records import DenseHit


class PacketVectors:
    def __init__(self, dim: int = 384):
        self.dim = dim
        self._m = np.zeros((0, dim), dtype=np.float32)
        self.ids: list[str] = []
        self.row: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def set(self, ids: list[str], vectors) -> None:
        if not len(ids):
            return
        arr = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        if len(self.ids) == 0 and arr.shape[1] != self.dim:
            self.dim, self._m = arr.shape[1], np.zeros((0, arr.shape[1]), dtype=np.float32)
        new = [i for i in ids if i not in self.row]
        need = len(self.ids) + len(new)
        if need > self._m.shape[0]:  # grow by doubling: appends stay amortized O(1)
            grown = np.zeros((max(need, 2 * self._m.shape[0], 256), self.dim), dtype=np.float32)
            grown[: len(self.ids)] = self._m[: len(self.ids)]
            self._m = grown
        for pid in new:
            self.row[pid] = len(self.ids)
            self.ids.append(pid)
        rows = [self.row[i] for i in ids]
        self._m[rows] = arr

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine of the query with every stored packet, in row order."""
        return self._m[: len(self.ids)] @ np.asarray(query, dtype=np.float32)

    def top(self, query: np.ndarray, k: int) -> list[DenseHit]:
        """D_q: the k packets of highest cosine; ties keep storage order."""
        sims = self.similarities(query)
        if not len(sims):
            return []
        k = min(k, len(sims))
        idx = np.argpartition(-sims, k - 1)[:k]
        idx = idx[np.lexsort((idx, -sims[idx]))]
        return [DenseHit(self.ids[i], float(sims[i])) for i in idx]
