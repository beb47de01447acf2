"""What MemCompile offers to LangChain and LangGraph (memcompile_langgraph.integrations): each imported on first use,
so a process that never asks for one never loads it."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from .memory import MemCompile


class Surfaces:
    """A mixin of MemCompile only (hence the casts)."""

    def as_retriever(self, user_id: str = "default", k: int = 12, max_tokens: int | None = None, as_of: object = None):
        """A LangChain retriever: one Document per selected packet, in schedule order (with `as_of`, a date or an
        ISO 8601 time, only from what had been said by then)."""
        from .integrations.retriever import MemCompileRetriever

        return MemCompileRetriever(
            memory=cast("MemCompile", self),
            user_id=user_id,
            k=k,
            max_tokens=max_tokens,
            as_of=cast("str | None", as_of),
        )

    @property
    def recall_node(self):
        """MessagesState node: a system message with the memory compiled for the last human message."""
        from .integrations.memory_nodes import make_recall_node

        return make_recall_node(cast("MemCompile", self))

    @property
    def remember_node(self):
        """MessagesState node: stores the exchange since the last remember as turns (make_remember_node for names)."""
        from .integrations.memory_nodes import make_remember_node

        return make_remember_node(cast("MemCompile", self))

    def as_tool(self, user_id: str | None = None, k: int | None = None, max_tokens: int | None = None):
        """A `search_memory` tool; without user_id the user comes from each run's config or context."""
        from .integrations.tool import make_search_memory_tool

        return make_search_memory_tool(cast("MemCompile", self), user_id=user_id, k=k, max_tokens=max_tokens)
