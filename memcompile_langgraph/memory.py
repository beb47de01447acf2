"""MemCompile: the public entry point that owns the stores, the stage components and both graphs."""
from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

from langchain_core.embeddings import Embeddings

from .address.dense import PacketVectors
from .address.intent import offline_intent
from .config import DEFAULT_CONFIG, MemCompileConfig
from .embed_queue import embedding_in_background
from .evidence.budget import validate_max_tokens
from .evidence.schedule import DeterministicScheduler
from .evidence.scheduler import Scheduler
from .extract.base import Extractor
from .extract.heuristic import HeuristicExtractor
from .index import UserIndex, packet_document
from .llm.store import LLMStore
from .ingest_graph import build_ingest_graph
from .query_graph import build_query_graph
from .records import CompiledContext, Descriptor, Intent, SourcePacket
from .store.embeddings import default_embeddings
from .store.records import REEMBEDDING, RecordStore
from .store.vectors import VectorStore
from .users import validate_user_id

log = logging.getLogger(__name__)

INGEST_BATCH = 256  # turns per ingest-graph run (one SQLite transaction each)
REEMBED_CHUNK = 2048  # packets embedded and stored at a time when a user's vectors are made again
READER_REPAIR_LIMIT = 256  # missing vectors a read repairs on the spot (~1.4 s of embedding); more wait for a writer
_QUERY_USER = contextvars.ContextVar("memcompile_query_user", default="default")  # whose query the graph runs
# (user_id, index) the graph nodes of this context use: a query sees one index throughout, and an ingest builds
# on a private one, published when done. A published index is never changed in place (readers may be inside it).
_PINNED: contextvars.ContextVar[tuple[str, UserIndex] | None] = contextvars.ContextVar("memcompile_pinned", default=None)


class MemCompile:
    """Long-term memory for one store directory (or memory when path is None); users are separate namespaces."""

    def __init__(
        self,
        path: str | Path | None = None,
        embeddings: Embeddings | None = None,
        llm: Any = None,
        config: MemCompileConfig | None = None,
        *,
        chroma_url: str | None = None,
        extractor: Extractor | None = None,
        scheduler: Scheduler | None = None,
        dense: bool = True,
        answer_llm: Any = None,
    ):
        self.config = config or DEFAULT_CONFIG
        self.path = Path(path) if path is not None else None
        self.llm = llm
        self.answer_llm = answer_llm if answer_llm is not None else llm
        self.records = RecordStore(self.path)
        # on a shared Chroma server, collections are named per store so two stores never meet
        namespace = f"mc{self.records.store_id()[:12]}" if chroma_url else None
        self.vectors = VectorStore(self.path, url=chroma_url, namespace=namespace)
        self.embeddings = (embeddings or default_embeddings()) if dense else None
        self.embedding_id = embedding_identity(self.embeddings)
        offline_extractor, offline_scheduler = HeuristicExtractor(self.config.max_keywords), DeterministicScheduler(self.config)
        # cache and usage ledger of the LLM stages (llm.sqlite3 in the store dir), kept when a model is given or exists
        self.llm_store = LLMStore.open(self.path, create=self.answer_llm is not None)
        self._llm_intent = None
        if llm is not None:
            from .address.llm_intent import LLMIntent
            from .evidence.llm_scheduler import LLMScheduler
            from .extract.llm import LLMExtractor

            client, count = self.llm_client(llm), self.records.add_counts
            extractor = extractor or LLMExtractor(client, self.config, offline_extractor, count)
            scheduler = scheduler or LLMScheduler(client, self.config, offline_scheduler, count)
            self._llm_intent = LLMIntent(client, self.config, count)
        self.extractor: Extractor = extractor or offline_extractor
        self.scheduler: Scheduler = scheduler or offline_scheduler
        self._indexes: dict[str, UserIndex] = {}
        self._unreconciled: set[str] = set()  # users whose vectors a busy writer kept us from checking
        self._warned_foreign: set[str] = set()
        self._repair_pending: set[str] = set()  # users with more missing vectors than a read repairs
        self._index_lock = threading.RLock()
        self.ingest_graph = build_ingest_graph(self)
        self.query_graph = build_query_graph(self)

    # --- per-user in-memory view -------------------------------------------------------------
    def index(self, user_id: str, refresh: bool = False) -> UserIndex:
        """The user's index; with refresh, reloaded when another writer changed the store."""
        validate_user_id(user_id)
        pinned = _PINNED.get()
        if pinned is not None and pinned[0] == user_id:
            return pinned[1]
        with self._index_lock:
            index = self._indexes.get(user_id)
            if index is None or (refresh and index.version != self.records.version(user_id)):
                index = self._load(user_id)
                if index.packets or index.version:  # ids nobody stored anything for are not kept around
                    self._indexes[user_id] = index
            elif refresh and user_id in self._unreconciled:
                self._reconcile(index)
            return index

    def _load(self, user_id: str, writer: bool = False) -> UserIndex:
        version, packets, descriptors = self.records.load(user_id)
        index = UserIndex(user_id, self.config, version=version)
        for p in packets:
            index.add_packet(p)
        for d, cell in descriptors:
            index.add_descriptor(d, cell)
        index.index_packet_text(index.packet_order)
        self._reconcile(index, writer)
        if self.embeddings is not None and packets and not self.foreign_vectors(user_id):
            ids, vectors = self.vectors.vectors(user_id)
            known = [(i, v) for i, v in zip(ids, vectors) if i in index.packets]
            index.vectors.set([i for i, _ in known], [v for _, v in known])
        return index

    def _borrow(self, user_id: str) -> UserIndex | None:
        """The cached index for a writer to extend in place (no O(N) reload per add_turns), taken out of the cache
        only when it is current and nothing but the cache refers to it: no query or caller is reading it. Readers
        arriving meanwhile load their own snapshot; a failed write never puts it back. Else None."""
        with self._index_lock:
            index = self._indexes.get(user_id)
            # 3 = the cache, this local and getrefcount's argument (CPython reference counts are exact)
            if index is None or sys.getrefcount(index) > 3 or index.version != self.records.version(user_id):
                return None
            return self._indexes.pop(user_id)

    def invalidate(self, user_id: str) -> None:
        with self._index_lock:
            self._indexes.pop(user_id, None)

    # --- stage components --------------------------------------------------------------------
    def intent(self, query: str, known_people: Sequence[str], user_id: str | None = None) -> Intent:
        if self._llm_intent is not None:
            return self._llm_intent(query, known_people, user_id or _QUERY_USER.get())
        return offline_intent(query, known_people, self.config.max_keywords)

    def llm_client(self, chat_model: Any = None, user_id: str = "default"):
        """An LLMClient over the store's response cache and usage ledger (default model: the answer model)."""
        model = chat_model if chat_model is not None else self.answer_llm
        if model is None:
            raise ValueError("no LLM given: pass llm= or answer_llm= to MemCompile")
        if self.llm_store is None:
            self.llm_store = LLMStore(self.path)
        return self.llm_store.client(model, self.config, user_id)

    def embed_packets(self, user_id: str, items: list[tuple[SourcePacket, list[Descriptor]]], index: UserIndex | None = None) -> int:
        if self.embeddings is None or not items:
            return 0
        docs = [packet_document(p, claims)[: self.config.embed_max_chars] for p, claims in items]
        vectors = self.embeddings.embed_documents(docs)
        ids = [p.packet_id for p, _ in items]
        self.vectors.upsert(user_id, ids, vectors, [p.dia_id for p, _ in items])
        if index is not None:
            index.vectors.set(ids, vectors)
        return len(items)

    def _reconcile(self, index: UserIndex, writer: bool = False) -> None:
        """Chroma agrees with the records after a crash: missing vectors re-added, orphans removed.

        Only as the user's writer and only while the records are still the ones loaded: a reader comparing
        an older load with the vectors would delete the ones a live writer just added. When another writer
        holds the user, it is tried again at the next refresh."""
        user = index.user_id
        if self.embeddings is None or (not index.packets and not self.vectors.ids(user)):
            return  # nothing to repair (e.g. an unknown user): no lock taken, no lock file made
        with self.records.write_lock(user, blocking=False) as held:
            if not held or self.records.version(user) != index.version:
                self._unreconciled.add(user)
                return
            self._unreconciled.discard(user)
            stored = self.vectors.ids(user)
            if stored and not index.packets:
                self.vectors.drop(user)  # a forget interrupted between records and vectors
                return
            if self.foreign_vectors(user):
                return  # another model's vectors are replaced whole by the next writer (_reembed), not patched
            missing = [pid for pid in index.packet_order if pid not in stored]
            orphans = [pid for pid in stored if pid not in index.packets]
            if orphans:
                self.vectors.delete(user, orphans)
            if len(missing) > READER_REPAIR_LIMIT and not writer:
                self._repair_pending.add(user)  # a reader holds the index lock: many missing vectors wait for a writer
                return
            self._repair_pending.discard(user)
            if missing:
                log.info("re-embedding %d packets missing from the vector store", len(missing))
                self.embed_packets(user, [(index.packets[p], index.by_packet[p]) for p in missing], index)

    def foreign_vectors(self, user_id: str) -> bool:
        """The user's stored vectors were not made by this memory's model (or their maker is not recorded yet, or a
        re-embed is under way): they are never compared with this model's query vectors."""
        return self.embeddings is not None and self.records.embedding(user_id) != self.embedding_id

    def warn_foreign(self, user_id: str) -> None:
        if user_id not in self._warned_foreign:
            self._warned_foreign.add(user_id)
            log.warning("dense channel off for user %r: its vectors were made by %s; they are re-embedded at its next "
                        "add_turns (or MemCompile.reembed)", user_id, self.records.embedding(user_id) or "an unrecorded model")

    def _reembed(self, index: UserIndex, made_by: str | None = None) -> None:
        """As the user's writer: every packet embedded again with this memory's model. Until it is recorded as done,
        readers treat the vectors as foreign (a crash leaves them so, and the next writer starts over).
        made_by: what the old vectors were recorded as, when the caller already replaced it by the marker."""
        user = index.user_id
        if made_by is None:
            made_by = self.records.embedding(user)
        self.records.set_embedding(user, REEMBEDDING)
        self.vectors.drop(user)  # also whatever a forget interrupted before its vectors left behind
        index.vectors = PacketVectors()
        if index.packets:
            log.warning("re-embedding %d packets of user %r: its vectors were made by %s, this memory embeds with %s",
                        len(index.packets), user, made_by or "an unrecorded model", self.embedding_id)
            order = index.packet_order
            for start in range(0, len(order), REEMBED_CHUNK):  # bounded memory for a large user
                self.embed_packets(user, [(index.packets[p], index.by_packet[p]) for p in order[start : start + REEMBED_CHUNK]], index)
        # a new version: every cached index of this user (other processes too) is reloaded with the new vectors
        index.version = self.records.set_embedding(user, self.embedding_id, bump=True)

    def reembed(self, user_id: str = "default") -> int:
        """Embed every packet of the user again with this memory's model (what the next add_turns does anyway when
        the store's vectors came from another model); returns how many packets were embedded."""
        validate_user_id(user_id)
        if self.embeddings is None:
            return 0
        with self.records.write_lock(user_id):
            made_by = self.records.embedding(user_id) or ""
            # marked first: the load then neither repairs nor reads the vectors that are about to be replaced
            self.records.set_embedding(user_id, REEMBEDDING)
            index = self._load(user_id, writer=True)
            self._reembed(index, made_by)
            with self._index_lock:
                self._indexes[user_id] = index
        return len(index.packets)

    # --- build plane ---------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Any], user_id: str = "default", progress: bool = False) -> dict[str, int]:
        """Store turns (dicts or TurnInput); returns counts: stored, skipped_*, already_stored, descriptors."""
        validate_user_id(user_id)
        turns = list(turns)
        totals: dict[str, int] = {"stored": 0, "descriptors": 0}
        bar = _progress(len(turns), progress, "ingest")
        if hasattr(self.extractor, "progress"):
            self.extractor.progress = progress
        with self.records.write_lock(user_id):
            private = self._borrow(user_id) or self._load(user_id, writer=True)
            if user_id in self._repair_pending:  # a reader left many missing vectors to the next writer
                self._reconcile(private, writer=True)
            if self.foreign_vectors(user_id):  # before any vector of this model joins them
                self._reembed(private)
            token = _PINNED.set((user_id, private))
            try:
                with embedding_in_background(self):
                    for start in range(0, len(turns), INGEST_BATCH):
                        batch = turns[start : start + INGEST_BATCH]
                        out = self.ingest_graph.invoke({"user_id": user_id, "turns": batch})
                        totals["stored"] += len(out.get("packets", []))
                        totals["descriptors"] += len(out.get("descriptors", []))
                        for k, v in out.get("counts", {}).items():
                            totals[k] = totals.get(k, 0) + v
                        if bar:
                            bar.update(len(batch))
            finally:
                _PINNED.reset(token)
            with self._index_lock:
                self._indexes[user_id] = private  # only after success: a failed batch leaves the store the truth
        if bar:
            bar.close()
        return totals

    async def aadd_turns(self, turns: Iterable[Any], user_id: str = "default", progress: bool = False) -> dict[str, int]:
        return await asyncio.to_thread(self.add_turns, list(turns), user_id, progress)

    # --- query plane ---------------------------------------------------------------------------
    def compile(
        self, query: str, user_id: str = "default", view: str = "bundle", max_tokens: int | None = None
    ) -> CompiledContext:
        validate_user_id(user_id)
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        max_tokens = validate_max_tokens(max_tokens)
        token = _QUERY_USER.set(user_id)
        pin = _PINNED.set((user_id, self.index(user_id, refresh=True)))
        try:
            out = self.query_graph.invoke({"query": query, "user_id": user_id, "view": view, "max_tokens": max_tokens})
        finally:
            _PINNED.reset(pin)
            _QUERY_USER.reset(token)
        return CompiledContext(query=query, text=out.get("context", ""), packets=out.get("packets", []), trace=out.get("trace", {}))

    async def acompile(
        self, query: str, user_id: str = "default", view: str = "bundle", max_tokens: int | None = None
    ) -> CompiledContext:
        return await asyncio.to_thread(self.compile, query, user_id, view, max_tokens)

    def answer(self, query: str, user_id: str = "default") -> tuple[str, "CompiledContext"]:
        """The answer model's reply over the compiled context (temporal prompt for a temporal intent)."""
        from .llm.answer import UNKNOWN, generate_answer

        client = self.llm_client(user_id=user_id)
        ctx = self.compile(query, user_id)
        if not ctx.packets:
            return UNKNOWN, ctx  # nothing to answer from: no request
        return generate_answer(client, query, ctx.text, bool(ctx.trace.get("intent", {}).get("temporal"))), ctx

    # --- records ---------------------------------------------------------------------------------
    def stats(self, user_id: str = "default") -> dict[str, Any]:
        validate_user_id(user_id)
        out: dict[str, Any] = dict(self.records.counts(user_id))
        out["counters"] = self.records.counters(user_id)
        out["vectors"] = len(self.vectors.ids(user_id)) if self.embeddings is not None else 0
        # which model made them; stale ones are re-embedded at the user's next add_turns
        out["vector_model"] = {"recorded": self.records.embedding(user_id), "current": not self.foreign_vectors(user_id)}
        out["usage"] = self.usage(user_id)
        return out

    def usage(self, user_id: str = "default") -> dict[str, Any]:
        """LLM token ledger per stage and phase (construction / query / evaluation); empty without LLM stages."""
        validate_user_id(user_id)
        return self.llm_store.usage(user_id) if self.llm_store is not None else {"stages": {}, "total_tokens": 0}

    def users(self) -> list[str]:
        return self.records.users()

    def forget(self, user_id: str) -> None:
        """Remove every record, vector, cached LLM reply and ledger row of the user (idempotent: re-run after a crash)."""
        validate_user_id(user_id)
        with self.records.write_lock(user_id):
            self.records.forget(user_id)
            self.vectors.drop(user_id)
            self._purge_llm(user_id, whole_user=True)
            self.invalidate(user_id)

    def delete_turns(self, user_id: str, dia_ids: Iterable[str]) -> int:
        """Remove single turns with their descriptors and Cell memberships; returns how many were removed."""
        validate_user_id(user_id)
        if isinstance(dia_ids, str):
            dia_ids = [dia_ids]  # one id, not its characters
        with self.records.write_lock(user_id):
            index = self.index(user_id, refresh=True)
            pids = [index.by_dia[d] for d in dict.fromkeys(dia_ids) if d in index.by_dia]
            if pids:
                self.records.delete_packets(user_id, pids)
                self.vectors.delete(user_id, pids)
                self._purge_llm(user_id, whole_user=False)  # cached replies may quote the deleted turns
                self.invalidate(user_id)
            return len(pids)

    def _purge_llm(self, user_id: str, whole_user: bool) -> None:
        """The user's cached LLM replies (and with the whole user, ledger rows), overwritten on disk rather than
        left in free pages or the WAL."""
        if self.llm_store is None:
            return
        db = self.llm_store.db
        db.execute("PRAGMA secure_delete=ON")
        if whole_user:
            self.llm_store.delete_user(user_id)
        else:
            self.llm_store.cache.delete_user(user_id)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # --- LangChain / LangGraph integrations (memcompile_langgraph.integrations) ----------------------
    def as_retriever(self, user_id: str = "default", k: int = 12, max_tokens: int | None = None):
        """A LangChain retriever: one Document per selected packet, in schedule order."""
        from .integrations.retriever import MemCompileRetriever

        return MemCompileRetriever(memory=self, user_id=user_id, k=k, max_tokens=max_tokens)

    @property
    def recall_node(self):
        """MessagesState node: a system message with the memory compiled for the last human message."""
        from .integrations.memory_nodes import make_recall_node

        return make_recall_node(self)

    @property
    def remember_node(self):
        """MessagesState node: stores the exchange since the last remember as turns (make_remember_node for names)."""
        from .integrations.memory_nodes import make_remember_node

        return make_remember_node(self)

    def as_tool(self, user_id: str | None = None, k: int | None = None, max_tokens: int | None = None):
        """A `search_memory` tool; without user_id the user comes from each run's config or context."""
        from .integrations.tool import make_search_memory_tool

        return make_search_memory_tool(self, user_id=user_id, k=k, max_tokens=max_tokens)

    def close(self) -> None:
        self.records.close()
        if self.llm_store is not None:
            self.llm_store.close()


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


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="turn")
