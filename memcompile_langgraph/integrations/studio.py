"""The store the `graphs/` modules serve in LangGraph Studio: $MEMCOMPILE_STORE (default ./.memcompile)."""
from __future__ import annotations

import os
from functools import lru_cache

from ..memory import MemCompile

DEFAULT_STORE = "./.memcompile"


@lru_cache(maxsize=1)
def studio_memory() -> MemCompile:
    """One MemCompile per server process, shared by every graph it serves ($MEMCOMPILE_CHROMA_URL for a Chroma server)."""
    return MemCompile(os.environ.get("MEMCOMPILE_STORE") or DEFAULT_STORE, chroma_url=os.environ.get("MEMCOMPILE_CHROMA_URL") or None)
