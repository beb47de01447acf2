"""The memory a LangGraph server process serves ($MEMCOMPILE_STORE, default ./.memcompile; $MEMCOMPILE_RECORDS_URL
and $MEMCOMPILE_CHROMA_URL for PostgreSQL records and a Chroma server): one per process, shared by every graph
and run it serves."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..memory import MemCompile
    from .engine import Engine

DEFAULT_STORE = "./.memcompile"


@lru_cache(maxsize=1)
def served_memory() -> MemCompile:
    from ..memory import MemCompile

    chroma_url = os.environ.get("MEMCOMPILE_CHROMA_URL") or None
    servers_only = bool(chroma_url and os.environ.get("MEMCOMPILE_RECORDS_URL"))  # then no local directory at all
    memory = MemCompile(
        os.environ.get("MEMCOMPILE_STORE") or (None if servers_only else DEFAULT_STORE), chroma_url=chroma_url
    )
    memory.warm_up()  # a server writes: its first add after a restart should not open the vector store
    return memory


def served_engine() -> Engine:
    return served_memory().engine
