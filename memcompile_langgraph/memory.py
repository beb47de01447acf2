"""MemCompile: the public API. Runs go through the module-level graphs (query_graph, ingest_graph) with a
MemoryContext; the runtime (runtime/) holds the engine, the snapshot cache and the writers. Reading the records
back and maintaining them: upkeep.py; the LangChain / LangGraph surfaces: surfaces.py."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from .config import DEFAULT_CONFIG, MemCompileConfig
from .evidence.budget import validate_max_tokens
from .evidence.fusion_model import with_fusion_model
from .evidence.render import validate_view
from .evidence.scheduler import Scheduler
from .extract.base import Extractor
from .index.user import UserIndex
from .ingest.turn_input import occurrences
from .model import CompiledContext, SelectedPacket, SourcePacket
from .query_graph import query_graph
from .runtime import telemetry
from .runtime.context import MemoryContext
from .runtime.host import open_host
from .settings import store_settings, vectors_per_process
from .store.chroma_server import chroma_unreachable
from .store.layout import check_store_path
from .store.protocols import Expiry
from .surfaces import Surfaces
from .text.terms import clean_query
from .text.timeparse import validate_as_of
from .upkeep import Upkeep
from .users import validate_user_id

log = logging.getLogger(__name__)


def check_ttl(minutes: Any) -> float:
    """A time to live in minutes: a positive finite number; ValueError (one line) otherwise."""
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes <= 0:
        raise ValueError(f"ttl must be a positive number of minutes, got {minutes!r}")
    return float(minutes)


class MemCompile(Upkeep, Surfaces):
    """Long-term memory for one store; users are separate namespaces. path, records_url and chroma_url not given are
    read from $MEMCOMPILE_STORE, $MEMCOMPILE_RECORDS_URL and $MEMCOMPILE_CHROMA_URL (settings.py); with none, the
    store is kept in memory. An empty string means none, whatever the environment says."""

    query_graph = query_graph

    @property
    def ingest_graph(self):
        """The build plane's graph, imported on first use: a process that only queries never builds it."""
        from .ingest_graph import ingest_graph

        return ingest_graph

    def __init__(
        self,
        path: str | Path | None = None,
        embeddings: Embeddings | None = None,
        llm: Any = None,
        config: MemCompileConfig | None = None,
        *,
        chroma_url: str | None = None,
        records_url: str | None = None,
        extractor: Extractor | None = None,
        scheduler: Scheduler | None = None,
        dense: bool = True,
        answer_llm: Any = None,
        cache_size: int = 64,
    ):
        config = with_fusion_model(config or DEFAULT_CONFIG)  # a fitted model's weights, once
        self.settings = store_settings(path, records_url, chroma_url)
        self.path = check_store_path(self.settings.path) if self.settings.path is not None else None
        if self.settings.chroma_url and (why := chroma_unreachable(self.settings.chroma_url)):
            log.warning(
                "Chroma server %s unreachable (%s): queries answer from snapshot files only, writes fail",
                self.settings.chroma_url,
                why,
            )
        if note := vectors_per_process(self.settings):
            log.warning("%s", note)
        self.llm, self.answer_llm = llm, answer_llm if answer_llm is not None else llm
        self.host = open_host(
            self.path,
            config,
            embeddings=embeddings,
            llm=llm,
            answer_llm=self.answer_llm,
            chroma_url=self.settings.chroma_url,
            records_url=self.settings.records_url or "",  # resolved: "" is SQLite, never the environment again
            extractor=extractor,
            scheduler=scheduler,
            dense=dense,
            cache_size=cache_size,
        )
        self.finish_removals()

    @property
    def config(self) -> MemCompileConfig:
        """The config as the memory runs it: the one given, with what opening settled (a fitted fusion model's
        weights, the session spread for whether the pool reader loaded)."""
        return self.engine.config

    @property
    def embeddings(self) -> Embeddings | None:
        return self.engine.embeddings

    def index(self, user_id: str = "default") -> UserIndex:
        """The user's newest published index snapshot (read-only: never change it)."""
        return self.host.cache.snapshot(validate_user_id(user_id))

    def context(self, user_id: str = "default") -> MemoryContext:
        """The runtime context to run `query_graph` / `ingest_graph` yourself with (graph.invoke(..., context=...))."""
        return MemoryContext(user_id=validate_user_id(user_id), host=self.host)

    # --- build plane ---------------------------------------------------------------------------
    def warm_up(self) -> None:
        """For a process that writes (a server, an agent's worker), called once after opening, before it takes
        requests: opens the vector store and imports the ingest graph now (most of it chromadb's import) and starts
        loading the model, which the first add after opening would otherwise wait for. A process that only reads
        should not call it (it would load Chroma for nothing)."""
        from .warm import open_for_writes

        open_for_writes(self.host.engine)

    def add_turns(
        self, turns: Iterable[Any], user_id: str = "default", progress: bool = False, ttl: float | None = None
    ) -> dict[str, int]:
        """Store turns (dicts or TurnInput); returns counts: stored, skipped_*, already_stored, descriptors. With
        `ttl` (minutes), the turns stored expire then: `sweep_expired` removes them as delete_turns does."""
        from .add_turns import ingest_turns  # imports the ingest graph: a process that only queries never does
        from .ingest.build import given_expiries

        user_id, numbered = validate_user_id(user_id), occurrences(turns)
        default = None if ttl is None else time.time() + check_ttl(ttl) * 60
        # an export's turns carry their end: one whose time passed is not stored again, the others keep theirs
        numbered, ends, expired = given_expiries(numbered, time.time())
        rows = None
        if ends or default is not None:

            def rows(packets: list[SourcePacket]) -> tuple[dict[str, str], dict[str, Expiry]]:
                at = {p.packet_id: ends.get(p.content_hash, default) for p in packets}
                return {}, {pid: Expiry(end, None) for pid, end in at.items() if end is not None}

        with telemetry.create_memory(user_id, numbered) as span:
            totals = ingest_turns(self.host, user_id, numbered, progress, rows)
            span.counts("add_turns", totals)
        if expired:
            totals.update(expired)
            self.count(user_id, dict(expired))
        return totals

    async def aadd_turns(
        self, turns: Iterable[Any], user_id: str = "default", progress: bool = False, ttl: float | None = None
    ) -> dict[str, int]:
        return await asyncio.to_thread(self.add_turns, list(turns), user_id, progress, ttl)

    # --- query plane ---------------------------------------------------------------------------
    def compile(
        self,
        query: str,
        user_id: str = "default",
        view: str = "bundle",
        max_tokens: int | None = None,
        as_of: str | date | None = None,
    ) -> CompiledContext:
        """The compiled context for `query`; with `as_of` (a date, a datetime or an ISO 8601 string; a date means
        its whole day) only from what had been said by then, with the facts that were current then."""
        user_id = validate_user_id(user_id)
        query = clean_query(query)  # ValueError when nothing usable is left
        max_tokens = validate_max_tokens(max_tokens)
        state = {"query": query, "view": validate_view(view), "max_tokens": max_tokens, "as_of": validate_as_of(as_of)}
        with telemetry.search_memory(user_id, query, view, max_tokens) as span:
            out = query_graph.invoke(state, context=self.context(user_id))
            packets = [SelectedPacket.from_dict(p) for p in out.get("packets", [])]
            span.found(packets, lambda: self.index(user_id))
        return CompiledContext(query=query, text=out.get("context", ""), packets=packets, trace=out.get("trace", {}))

    async def acompile(
        self,
        query: str,
        user_id: str = "default",
        view: str = "bundle",
        max_tokens: int | None = None,
        as_of: str | date | None = None,
    ) -> CompiledContext:
        return await asyncio.to_thread(self.compile, query, user_id, view, max_tokens, as_of)

    def answer(
        self, query: str, user_id: str = "default", as_of: str | date | None = None
    ) -> tuple[str, CompiledContext]:
        """The answer model's reply over the compiled context (temporal prompt for a temporal intent); `as_of` as
        compile takes it."""
        from .llm.answer import UNKNOWN, generate_answer

        client = self.llm_client(user_id=user_id)
        ctx = self.compile(query, user_id, as_of=as_of)
        if not ctx.packets:
            return UNKNOWN, ctx  # nothing to answer from: no request
        return generate_answer(client, query, ctx.text, bool(ctx.trace.get("intent", {}).get("temporal"))), ctx

    def llm_client(self, chat_model: Any = None, user_id: str = "default"):
        """An LLMClient over the store's response cache and usage ledger (default model: the answer model)."""
        model = chat_model if chat_model is not None else self.answer_llm
        if model is None:
            raise ValueError("no LLM given: pass llm= or answer_llm= to MemCompile")
        return self.host.llm_client(model, user_id)

    def close(self) -> None:
        self.host.close()
