"""Raw-turn baselines over the very turns the store holds: BM25 top-K and dense (cosine) top-K.

The dense one is what a plain vector store's semantic search over raw turns returns (e.g. LangGraph's store
search): same embeddings object as the system, no claims, no Cells, no budget normalization.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings
from rank_bm25 import BM25Okapi

from ..index.user import UserIndex
from ..model import SourcePacket
from ..text.terms import one_line, terms

BASELINES = {"bm25": "raw-turn BM25", "dense": "raw-turn dense"}
BASELINE_KS = (10, 12)  # top-K the report compares: K0 = 10 and the full packet budget of 12


def raw_turn_document(p: SourcePacket) -> str:
    """The turn as the raw reader view shows it: speaker, text and a shared image."""
    doc = f"{one_line(p.speaker)}: {one_line(p.text)}"
    if p.image_caption or p.image_query:
        doc += " " + one_line(f"(shared image: {p.image_caption} {p.image_query})")
    return doc


def top_k(scores: np.ndarray, ids: Sequence[str], k: int) -> list[str]:
    """Highest scores first; ties keep dialogue order."""
    order = np.argsort(-scores, kind="stable")[:k]
    return [ids[i] for i in order]


class RawTurnBaselines:
    """Rankings of one user's raw turns for a batch of questions, as dia_ids, best first."""

    def __init__(self, index: UserIndex, embeddings: Embeddings | None, depth: int = max(BASELINE_KS)):
        packets = [index.packets[pid] for pid in index.packet_order]
        self.dia_ids = [p.dia_id for p in packets]
        self.depth = depth
        docs = [raw_turn_document(p) for p in packets]
        # BM25Okapi cannot take an empty corpus or an empty document; "_" never matches a query term
        self.bm25 = BM25Okapi([terms(d) or ["_"] for d in docs]) if docs else None
        self.embeddings = embeddings
        self.vectors = (
            _unit(np.asarray(embeddings.embed_documents(docs), dtype=np.float32))
            if embeddings is not None and docs
            else None
        )

    def rank(self, questions: Sequence[str]) -> list[dict[str, list[str]]]:
        """Per question {"bm25": [...], "dense": [...]} (dense only when an embedding model is present)."""
        out = []
        for q in questions:
            row = {"bm25": top_k(self.bm25.get_scores(terms(q)), self.dia_ids, self.depth) if self.bm25 else []}
            if self.embeddings is not None:
                sims = (
                    self.vectors @ _unit(np.asarray([self.embeddings.embed_query(q)], dtype=np.float32))[0]
                    if self.vectors is not None
                    else np.zeros(0)
                )
                row["dense"] = top_k(sims, self.dia_ids, self.depth)
            out.append(row)
        return out


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.clip(np.linalg.norm(m, axis=1, keepdims=True), 1e-12, None)
