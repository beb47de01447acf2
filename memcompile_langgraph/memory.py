"""MemCompile: the public API. Runs go through the module-level graphs (query_graph, ingest_graph) with a
MemoryContext; the runtime (runtime/) holds the engine, the snapshot cache and the writers."""
from __future__ import annotations

import asyncio
import hashlib
import unicodedata
from pathlib import Path
from typing import Any, Iterable

from langchain_core.embeddings import Embeddings

from .config import DEFAULT_CONFIG, MemCompileConfig
from .evidence.schedule import DeterministicScheduler
from .evidence.scheduler import Scheduler
from .extract.base import Extractor
from .extract.heuristic import HeuristicExtractor
from .index import UserIndex
from .ingest_graph import ingest_graph
from .llm.store import LLMStore
from .query_graph import query_graph
from .records import CompiledContext
from .runtime.cache import IndexCache
from .runtime.consistency import reconcile, reembed
from .runtime.context import MemoryContext
from .runtime.engine import Engine
from .runtime.snapshot_file import SnapshotFiles
from .runtime.unit_of_work import UnitOfWork
from .store.protocols import StoredTurn
from .store.records import REEMBEDDING, RecordStore
from .store.vectors import VectorStore
from .users import validate_user_id

INGEST_BATCH = 256  # turns per ingest-graph run (one records transaction each)


class MemCompile:
    """Long-term memory for one store (a directory, or memory when path is None); users are separate namespaces."""

    query_graph = query_graph
    ingest_graph = ingest_graph

    def __init__(
        self, path: str | Path | None = None, embeddings: Embeddings | None = None, llm: Any = None,
        config: MemCompileConfig | None = None, *, chroma_url: str | None = None, extractor: Extractor | None = None,
        scheduler: Scheduler | None = None, dense: bool = True, answer_llm: Any = None, cache_size: int = 64,
    ):
        self.config = config = config or DEFAULT_CONFIG
        self.path = Path(path) if path is not None else None
        self.llm, self.answer_llm = llm, answer_llm if answer_llm is not None else llm
        records = RecordStore(self.path)
        # on a shared Chroma server, collections are named per store so two stores never meet
        vectors = VectorStore(self.path, url=chroma_url, namespace=f"mc{records.store_id()[:12]}" if chroma_url else None)
        embeddings = (embeddings or _default_embeddings()) if dense else None
        # cache and usage ledger of the LLM stages (llm.sqlite3 in the store dir), kept when a model is given or exists
        llm_store = LLMStore.open(self.path, create=self.answer_llm is not None)
        offline_extractor, offline_scheduler = HeuristicExtractor(config.max_keywords), DeterministicScheduler(config)
        llm_intent = None
        if llm is not None:
            from .address.llm_intent import LLMIntent
            from .evidence.llm_scheduler import LLMScheduler
            from .extract.llm import LLMExtractor

            client, count = llm_store.client(llm, config), records.add_counts
            extractor = extractor or LLMExtractor(client, config, offline_extractor, count)
            scheduler = scheduler or LLMScheduler(client, config, offline_scheduler, count)
            llm_intent = LLMIntent(client, config, count)
        self.engine = Engine(config, records, vectors, embeddings, extractor or offline_extractor,
                             scheduler or offline_scheduler, llm_intent, llm_store)
        files = SnapshotFiles(self.path / "snapshots", _snapshot_key(records), self.engine.embedding_id) if self.path else None
        self.engine.cache = IndexCache(self.engine, files, cache_size)

    @property
    def embeddings(self) -> Embeddings | None:
        return self.engine.embeddings

    def index(self, user_id: str = "default") -> UserIndex:
        """The user's newest published index snapshot (read-only: never change it)."""
        return self.engine.cache.snapshot(validate_user_id(user_id))

    def context(self, user_id: str = "default") -> MemoryContext:
        """The runtime context to run `query_graph` / `ingest_graph` yourself with (graph.invoke(..., context=...))."""
        return MemoryContext(user_id=validate_user_id(user_id), engine=self.engine)

    # --- build plane ---------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Any], user_id: str = "default", progress: bool = False) -> dict[str, int]:
        """Store turns (dicts or TurnInput); returns counts: stored, skipped_*, already_stored, descriptors."""
        validate_user_id(user_id)
        turns = list(turns)
        totals: dict[str, int] = {"stored": 0, "descriptors": 0}
        bars = _Progress(len(turns), progress, self.engine.embeddings is not None)
        if hasattr(self.engine.extractor, "progress"):
            self.engine.extractor.progress = progress
        try:
            with UnitOfWork(self.engine, self.engine.cache, user_id, bars.embedded) as unit:
                context = MemoryContext(user_id=user_id, engine=self.engine, writer=unit)
                for start in range(0, len(turns), INGEST_BATCH):
                    batch = turns[start : start + INGEST_BATCH]
                    out = ingest_graph.invoke({"turns": batch}, context=context)
                    totals["stored"] += len(out.get("packets", []))
                    totals["descriptors"] += len(out.get("descriptors", []))
                    for k, v in out.get("counts", {}).items():
                        totals[k] = totals.get(k, 0) + v
                    bars.extracted(len(batch), len(out.get("packets", [])))
        finally:
            bars.close()
        return totals

    async def aadd_turns(self, turns: Iterable[Any], user_id: str = "default", progress: bool = False) -> dict[str, int]:
        return await asyncio.to_thread(self.add_turns, list(turns), user_id, progress)

    # --- query plane ---------------------------------------------------------------------------
    def compile(self, query: str, user_id: str = "default", view: str = "bundle") -> CompiledContext:
        validate_user_id(user_id)
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        out = query_graph.invoke({"query": query, "view": view}, context=self.context(user_id))
        return CompiledContext(query=query, text=out.get("context", ""), packets=out.get("packets", []), trace=out.get("trace", {}))

    async def acompile(self, query: str, user_id: str = "default", view: str = "bundle") -> CompiledContext:
        return await asyncio.to_thread(self.compile, query, user_id, view)

    def answer(self, query: str, user_id: str = "default") -> tuple[str, CompiledContext]:
        """The answer model's reply over the compiled context (temporal prompt for a temporal intent)."""
        from .llm.answer import UNKNOWN, generate_answer

        client = self.llm_client(user_id=user_id)
        ctx = self.compile(query, user_id)
        if not ctx.packets:
            return UNKNOWN, ctx  # nothing to answer from: no request
        return generate_answer(client, query, ctx.text, bool(ctx.trace.get("intent", {}).get("temporal"))), ctx

    def llm_client(self, chat_model: Any = None, user_id: str = "default"):
        """An LLMClient over the store's response cache and usage ledger (default model: the answer model)."""
        model = chat_model if chat_model is not None else self.answer_llm
        if model is None:
            raise ValueError("no LLM given: pass llm= or answer_llm= to MemCompile")
        if self.engine.llm_store is None:
            self.engine.llm_store = LLMStore(self.path)
        return self.engine.llm_store.client(model, self.config, user_id)

    # --- records ---------------------------------------------------------------------------------
    def stats(self, user_id: str = "default") -> dict[str, Any]:
        validate_user_id(user_id)
        records = self.engine.records
        out: dict[str, Any] = dict(records.counts(user_id))
        out["counters"] = records.counters(user_id)
        out["vectors"] = len(self.engine.vectors.ids(user_id))
        # which model made them; stale ones are re-embedded at the user's next add_turns
        out["vector_model"] = {"recorded": records.embedding(user_id), "current": not self.engine.foreign_vectors(user_id)}
        out["usage"] = self.usage(user_id)
        return out

    def usage(self, user_id: str = "default") -> dict[str, Any]:
        """LLM token ledger per stage and phase (construction / query / evaluation); empty without LLM stages."""
        validate_user_id(user_id)
        store = self.engine.llm_store
        return store.usage(user_id) if store is not None else {"stages": {}, "total_tokens": 0}

    def users(self) -> list[str]:
        return self.engine.records.users()

    def turns(self, user_id: str = "default", dia_ids: Iterable[str] | None = None, limit: int | None = None, offset: int = 0) -> list[StoredTurn]:
        """Stored turns in dialogue order (all, or those with the given dia_ids), with when they were stored."""
        ids = None if dia_ids is None else [_nfc(d) for d in ([dia_ids] if isinstance(dia_ids, str) else dia_ids)]
        return self.engine.records.turns(validate_user_id(user_id), ids, limit, offset)

    def count(self, user_id: str, counts: dict[str, int]) -> None:
        """Adds to the user's counters (what `stats` shows), e.g. input lines a loader skipped."""
        self.engine.records.add_counts(validate_user_id(user_id), counts)

    def forget(self, user_id: str) -> None:
        """Remove every record, vector, snapshot file, cached LLM reply and ledger row of the user (idempotent:
        re-run after a crash)."""
        validate_user_id(user_id)
        engine = self.engine
        with engine.records.write_lock(user_id):
            engine.records.forget(user_id)
            engine.vectors.drop(user_id)
            if engine.llm_store is not None:
                engine.llm_store.delete_user(user_id, whole_user=True)
            engine.cache.invalidate(user_id)

    def delete_turns(self, user_id: str, dia_ids: Iterable[str]) -> int:
        """Remove single turns with their descriptors and Cell memberships; returns how many were removed."""
        validate_user_id(user_id)
        ids = [dia_ids] if isinstance(dia_ids, str) else list(dia_ids)  # one id, not its characters
        engine = self.engine
        with engine.records.write_lock(user_id):
            index = engine.cache.snapshot(user_id)
            pids = [index.by_dia[d] for d in dict.fromkeys(map(_nfc, ids)) if d in index.by_dia]
            if pids:
                engine.records.delete_packets(user_id, pids)
                engine.vectors.delete(user_id, pids)
                if engine.llm_store is not None:  # cached replies may quote the deleted turns
                    engine.llm_store.delete_user(user_id, whole_user=False)
                engine.cache.invalidate(user_id)
            return len(pids)

    def reembed(self, user_id: str = "default") -> int:
        """Embed every packet of the user again with this memory's model (what the next add_turns does anyway when
        the store's vectors came from another model); returns how many packets were embedded."""
        validate_user_id(user_id)
        engine = self.engine
        if engine.embeddings is None:
            return 0
        with engine.records.write_lock(user_id):
            made_by = engine.records.embedding(user_id) or ""
            # marked first: the load then neither repairs nor reads the vectors that are about to be replaced
            engine.records.set_embedding(user_id, REEMBEDDING)
            index = engine.cache.snapshot(user_id).fork()
            reembed(engine, index, made_by)
            engine.cache.invalidate(user_id)
            engine.cache.publish(index)
        return len(index.packets)

    def repair(self, user_id: str = "default") -> dict[str, int]:
        """Rebuild the user's vectors from the records when the vector store is damaged or out of step."""
        validate_user_id(user_id)
        engine = self.engine
        with engine.records.write_lock(user_id):
            index = engine.cache.snapshot(user_id).fork()
            before = len(engine.vectors.ids(user_id))
            if engine.foreign_vectors(user_id):
                reembed(engine, index)
            else:
                reconcile(engine, index, writer=True)
            engine.cache.invalidate(user_id)
            engine.cache.publish(index)
            return {"packets": len(index.packets), "vectors_before": before, "vectors": len(engine.vectors.ids(user_id))}

    # --- LangChain / LangGraph integrations (memcompile_langgraph.integrations) ----------------------
    def as_retriever(self, user_id: str = "default", k: int = 12):
        """A LangChain retriever: one Document per selected packet, in schedule order."""
        from .integrations.retriever import MemCompileRetriever

        return MemCompileRetriever(memory=self, user_id=user_id, k=k)

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

    def as_tool(self, user_id: str | None = None, k: int | None = None):
        """A `search_memory` tool; without user_id the user comes from each run's config or context."""
        from .integrations.tool import make_search_memory_tool

        return make_search_memory_tool(self, user_id=user_id, k=k)

    def close(self) -> None:
        self.engine.records.close()
        if self.engine.llm_store is not None:
            self.engine.llm_store.close()


def _nfc(dia_id: str) -> str:
    return unicodedata.normalize("NFC", dia_id) if isinstance(dia_id, str) else dia_id


def _default_embeddings() -> Embeddings:
    from .store.embeddings import default_embeddings

    return default_embeddings()


def _snapshot_key(records) -> bytes:
    """The key snapshot files are signed with: derived from the store's id and a secret kept with the records."""
    return hashlib.sha256(f"{records.store_id()}:{records.secret()}".encode()).digest()


class _Progress:
    """Two labelled bars in turns: extraction (the graph runs) and embedding (behind it); both end with the work."""

    def __init__(self, total: int, enabled: bool, embeds: bool):
        self._bars = []
        if enabled:
            from tqdm import tqdm

            self._bars = [tqdm(total=total, desc="extract", unit="turn", position=0)]
            if embeds:
                self._bars.append(tqdm(total=0, desc="embed  ", unit="turn", position=1))

    def extracted(self, turns: int, stored: int) -> None:
        if self._bars:
            self._bars[0].update(turns)
            if len(self._bars) > 1:
                self._bars[1].total += stored
                self._bars[1].refresh()

    def embedded(self, n: int) -> None:
        if len(self._bars) > 1:
            self._bars[1].update(n)

    def close(self) -> None:
        for bar in self._bars:
            bar.close()
