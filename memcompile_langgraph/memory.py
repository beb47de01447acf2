"""MemCompile: the public entry point that owns the stores, the stage components and both graphs."""
from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

from langchain_core.embeddings import Embeddings

from .address.intent import offline_intent
from .config import DEFAULT_CONFIG, MemCompileConfig
from .evidence.schedule import DeterministicScheduler
from .evidence.scheduler import Scheduler
from .extract.base import Extractor
from .extract.heuristic import HeuristicExtractor
from .index import UserIndex, packet_document
from .ingest_graph import build_ingest_graph
from .query_graph import build_query_graph
from .records import CompiledContext, Descriptor, Intent, SourcePacket
from .store.embeddings import default_embeddings
from .store.records import RecordStore
from .store.vectors import VectorStore
from .users import validate_user_id

log = logging.getLogger(__name__)

INGEST_BATCH = 256  # turns per ingest-graph run (one SQLite transaction each)


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
    ):
        self.config = config or DEFAULT_CONFIG
        self.path = Path(path) if path is not None else None
        self.llm = llm
        self.records = RecordStore(self.path)
        self.vectors = VectorStore(self.path, url=chroma_url)
        self.embeddings = (embeddings or default_embeddings()) if dense else None
        self.extractor: Extractor = extractor or HeuristicExtractor(self.config.max_keywords)
        self.scheduler: Scheduler = scheduler or DeterministicScheduler(self.config)
        self._indexes: dict[str, UserIndex] = {}
        self._index_lock = threading.RLock()
        self.ingest_graph = build_ingest_graph(self)
        self.query_graph = build_query_graph(self)

    # --- per-user in-memory view -------------------------------------------------------------
    def index(self, user_id: str, refresh: bool = False) -> UserIndex:
        """The user's index; with refresh, reloaded when another writer changed the store."""
        validate_user_id(user_id)
        with self._index_lock:
            index = self._indexes.get(user_id)
            if index is None or (refresh and index.version != self.records.version(user_id)):
                index = self._load(user_id)
                self._indexes[user_id] = index
            return index

    def _load(self, user_id: str) -> UserIndex:
        version, packets, descriptors = self.records.load(user_id)
        index = UserIndex(user_id, self.config, version=version)
        for p in packets:
            index.add_packet(p)
        for d, cell in descriptors:
            index.add_descriptor(d, cell)
        if packets:
            self._reconcile(index)
        return index

    def invalidate(self, user_id: str) -> None:
        with self._index_lock:
            self._indexes.pop(user_id, None)

    # --- stage components --------------------------------------------------------------------
    def intent(self, query: str, known_people: Sequence[str]) -> Intent:
        return offline_intent(query, known_people, self.config.max_keywords)

    def embed_packets(self, user_id: str, items: list[tuple[SourcePacket, list[Descriptor]]]) -> int:
        if self.embeddings is None or not items:
            return 0
        docs = [packet_document(p, claims)[: self.config.embed_max_chars] for p, claims in items]
        vectors = self.embeddings.embed_documents(docs)
        self.vectors.upsert(user_id, [p.packet_id for p, _ in items], vectors, [p.dia_id for p, _ in items])
        return len(items)

    def _reconcile(self, index: UserIndex) -> None:
        """Chroma agrees with the records: missing vectors re-added, orphans removed."""
        if self.embeddings is None:
            return
        stored = self.vectors.ids(index.user_id)
        missing = [pid for pid in index.packet_order if pid not in stored]
        orphans = [pid for pid in stored if pid not in index.packets]
        if orphans:
            self.vectors.delete(index.user_id, orphans)
        if missing:
            log.info("re-embedding %d packets missing from the vector store", len(missing))
            self.embed_packets(index.user_id, [(index.packets[p], index.by_packet[p]) for p in missing])

    # --- build plane ---------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Any], user_id: str = "default", progress: bool = False) -> dict[str, int]:
        """Store turns (dicts or TurnInput); returns counts: stored, skipped_*, already_stored, descriptors."""
        validate_user_id(user_id)
        turns = list(turns)
        totals: dict[str, int] = {"stored": 0, "descriptors": 0}
        bar = _progress(len(turns), progress, "ingest")
        with self.records.write_lock(user_id):
            for start in range(0, len(turns), INGEST_BATCH):
                batch = turns[start : start + INGEST_BATCH]
                out = self.ingest_graph.invoke({"user_id": user_id, "turns": batch})
                totals["stored"] += len(out.get("packets", []))
                totals["descriptors"] += len(out.get("descriptors", []))
                for k, v in out.get("counts", {}).items():
                    totals[k] = totals.get(k, 0) + v
                if bar:
                    bar.update(len(batch))
        if bar:
            bar.close()
        return totals

    async def aadd_turns(self, turns: Iterable[Any], user_id: str = "default", progress: bool = False) -> dict[str, int]:
        return await asyncio.to_thread(self.add_turns, list(turns), user_id, progress)

    # --- query plane ---------------------------------------------------------------------------
    def compile(self, query: str, user_id: str = "default", view: str = "bundle") -> CompiledContext:
        validate_user_id(user_id)
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        out = self.query_graph.invoke({"query": query, "user_id": user_id, "view": view})
        return CompiledContext(query=query, text=out.get("context", ""), packets=out.get("packets", []), trace=out.get("trace", {}))

    async def acompile(self, query: str, user_id: str = "default", view: str = "bundle") -> CompiledContext:
        return await asyncio.to_thread(self.compile, query, user_id, view)

    # --- records ---------------------------------------------------------------------------------
    def stats(self, user_id: str = "default") -> dict[str, Any]:
        validate_user_id(user_id)
        out: dict[str, Any] = dict(self.records.counts(user_id))
        out["counters"] = self.records.counters(user_id)
        out["vectors"] = len(self.vectors.ids(user_id)) if self.embeddings is not None else 0
        return out

    def users(self) -> list[str]:
        return self.records.users()

    def forget(self, user_id: str) -> None:
        """Remove every record and vector of the user."""
        validate_user_id(user_id)
        with self.records.write_lock(user_id):
            self.records.forget(user_id)
            self.vectors.drop(user_id)
            self.invalidate(user_id)

    def delete_turns(self, user_id: str, dia_ids: Iterable[str]) -> int:
        """Remove single turns with their descriptors and Cell memberships; returns how many were removed."""
        validate_user_id(user_id)
        with self.records.write_lock(user_id):
            index = self.index(user_id, refresh=True)
            pids = [index.by_dia[d] for d in dict.fromkeys(dia_ids) if d in index.by_dia]
            if pids:
                self.records.delete_packets(user_id, pids)
                self.vectors.delete(user_id, pids)
                self.invalidate(user_id)
            return len(pids)

    def close(self) -> None:
        self.records.close()


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="turn")
