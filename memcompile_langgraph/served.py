"""The memory a LangGraph server process serves, configured by the environment as every surface is (settings.py:
$MEMCOMPILE_STORE, default ./.memcompile unless records and vectors are both on servers; $MEMCOMPILE_RECORDS_URL,
$MEMCOMPILE_CHROMA_URL): one per process, shared by every graph and run it serves. The graphs it serves (graphs/)
are the query and build planes with a run context that opens it."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from .memory import MemCompile
from .query_graph import build_query_graph
from .runtime.context import MemoryContext
from .settings import store_settings

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from .runtime.host import Host

DEFAULT_STORE = "./.memcompile"


@lru_cache(maxsize=1)
def served_memory() -> MemCompile:
    settings = store_settings()  # the environment's, as every surface reads it
    memory = MemCompile(settings.path or ("" if settings.servers_only else DEFAULT_STORE))
    memory.warm_up()  # a server writes: its first add after a restart should not open the vector store
    return memory


class ServedContext(MemoryContext):
    """A served run's context: it sends only `{"user_id": ...}` (or leaves the user to the server's authenticated
    one), and its host is the served memory's."""

    def default_host(self) -> Host:
        return served_memory().host


@lru_cache(maxsize=1)
def served_query_graph() -> CompiledStateGraph:
    return build_query_graph(ServedContext)


@lru_cache(maxsize=1)
def served_ingest_graph() -> CompiledStateGraph:
    from .ingest_graph import build_ingest_graph  # a server that only queries never builds it

    return build_ingest_graph(ServedContext)
