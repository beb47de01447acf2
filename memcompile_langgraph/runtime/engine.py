"""Engine: the stores and stage components of one memory, which graph runs reach through their runtime context."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from langchain_core.embeddings import Embeddings

from ..address.intent import offline_intent
from ..config import MemCompileConfig
from ..evidence.scheduler import Scheduler
from ..extract.base import Extractor
from ..index import UserIndex, packet_document
from ..llm.store import LLMStore
from ..records import Descriptor, Intent, SourcePacket
from ..store.protocols import RecordsStore, VectorsStore

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Engine:
    config: MemCompileConfig
    records: RecordsStore
    vectors: VectorsStore
    embeddings: Embeddings | None
    extractor: Extractor
    scheduler: Scheduler
    llm_intent: Any = None  # address/llm_intent.LLMIntent when a model runs the intent stage
    llm_store: LLMStore | None = None
    embedding_id: str | None = field(init=False)
    cache: Any = field(default=None, init=False)  # runtime/cache.IndexCache, attached by MemCompile
    _warned: set[str] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self.embedding_id = embedding_identity(self.embeddings)

    def intent(self, query: str, known_people: Sequence[str], user_id: str) -> Intent:
        if self.llm_intent is not None:
            return self.llm_intent(query, known_people, user_id)
        return offline_intent(query, known_people, self.config.max_keywords)

    def embed_packets(self, user_id: str, items: list[tuple[SourcePacket, list[Descriptor]]], index: UserIndex | None = None) -> int:
        """Embeds packet documents z(p) and stores them; with index, its matrix gains them too."""
        if self.embeddings is None or not items:
            return 0
        docs = [packet_document(p, claims)[: self.config.embed_max_chars] for p, claims in items]
        vectors = self.embeddings.embed_documents(docs)
        ids = [p.packet_id for p, _ in items]
        self.vectors.upsert(user_id, ids, vectors, [p.dia_id for p, _ in items])
        if index is not None:
            index.vectors.set(ids, vectors)
        return len(items)

    def foreign_vectors(self, user_id: str) -> bool:
        """The user's stored vectors were not made by this memory's model (or their maker is not recorded yet, or a
        re-embed is under way): they are never compared with this model's query vectors."""
        return self.embeddings is not None and self.records.embedding(user_id) != self.embedding_id

    def warn_foreign(self, user_id: str) -> None:
        if user_id not in self._warned:
            self._warned.add(user_id)
            log.warning("dense channel off for user %r: its vectors were made by %s; they are re-embedded at its next "
                        "add_turns (or MemCompile.reembed)", user_id, self.records.embedding(user_id) or "an unrecorded model")


def embedding_identity(embeddings: Embeddings | None) -> str | None:
    """What the stored vectors are recorded as made by: the model's own identity, else its class and model name."""
    if embeddings is None:
        return None
    identity = getattr(embeddings, "identity", None)
    if identity:
        return str(identity)
    # the fields that change what a LangChain embedder returns (model, output size), where it has them
    fields = ("model", "model_name", "deployment", "dimensions", "size", "dim")
    named = [f"{f}={getattr(embeddings, f)}" for f in fields if getattr(embeddings, f, None) not in (None, "")]
    return ":".join([f"{type(embeddings).__module__}.{type(embeddings).__qualname__}", *named])
