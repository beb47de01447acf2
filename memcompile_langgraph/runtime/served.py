"""The memory a LangGraph server process serves, configured by the environment as every surface is (settings.py:
$MEMCOMPILE_STORE, default ./.memcompile unless records and vectors are both on servers; $MEMCOMPILE_RECORDS_URL,
$MEMCOMPILE_CHROMA_URL): one per process, shared by every graph and run it serves."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..memory import MemCompile
    from .host import Host

DEFAULT_STORE = "./.memcompile"


@lru_cache(maxsize=1)
def served_memory() -> MemCompile:
    from ..memory import MemCompile
    from ..settings import store_settings

    settings = store_settings()  # the environment's, as every surface reads it
    memory = MemCompile(settings.path or ("" if settings.servers_only else DEFAULT_STORE))
    memory.warm_up()  # a server writes: its first add after a restart should not open the vector store
    return memory


def served_host() -> Host:
    return served_memory().host
