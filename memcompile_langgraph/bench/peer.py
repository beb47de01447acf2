"""The peer the bench compares with: LangGraph's InMemoryStore with the same embeddings, one item per turn."""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

NAME = "langgraph.store.memory.InMemoryStore"
NAMESPACE = ("bench", "turns")


class PeerStore:
    """Turns go in batched (as the MemCompile ingest does), questions come back as the top `limit` turns."""

    def __init__(self, embeddings: Embeddings, dims: int = 384, limit: int = 12):
        self.store = InMemoryStore(index={"embed": embeddings, "dims": dims, "fields": ["text"]})
        self.limit = limit

    def add(self, turns: list[dict[str, Any]], batch: int) -> None:
        ops: list[PutOp] = []
        texts: set[str] = set()
        for t in turns:
            text = f"{t['speaker']}: {t['text']}"
            # InMemoryStore embeds each distinct text of a batch once, then fails on the count ("Number of
            # embeddings (255) does not match number of indices (256)", langgraph issue #8822): a repeated text
            # starts a new batch
            if len(ops) == batch or text in texts:
                self.store.batch(ops)
                ops, texts = [], set()
            ops.append(PutOp(NAMESPACE, t["dia_id"], {"text": text, "time": t.get("time", "")}))
            texts.add(text)
        if ops:
            self.store.batch(ops)  # one embed_documents call per batch

    def search(self, query: str) -> list[str]:
        return [item.key for item in self.store.search(NAMESPACE, query=query, limit=self.limit)]
