"""The runtime context of a graph run (LangGraph's `context_schema`): whose memory, and what to read it from.

`MemCompile` passes a context with its engine (and, for a writer, the unit of work). A run served by `langgraph
dev` or LangGraph Server sends only `{"user_id": ...}`; the engine is then the served memory (`served.py`:
$MEMCOMPILE_STORE, $MEMCOMPILE_RECORDS_URL, $MEMCOMPILE_CHROMA_URL). Keys it does not know are ignored (the
server mirrors its configurable into the context).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic.json_schema import SkipJsonSchema

from ..index import UserIndex
from ..users import validate_user_id


class MemoryContext(BaseModel):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    user_id: str = "default"
    engine: SkipJsonSchema[Any] = None  # runtime/engine.Engine
    writer: SkipJsonSchema[Any] = None  # runtime/unit_of_work.UnitOfWork, when add_turns holds the user
    _snapshot: UserIndex | None = PrivateAttr(default=None)

    def model_post_init(self, _: Any) -> None:
        validate_user_id(self.user_id)
        if self.engine is None:
            from .served import served_engine

            self.engine = served_engine()

    @property
    def cache(self):
        return self.engine.cache

    def snapshot(self) -> UserIndex:
        """The index this run reads throughout: taken once, at its first use (a query sees one version)."""
        if self._snapshot is None:
            self._snapshot = self.engine.cache.snapshot(self.user_id)
        return self._snapshot


def run_context(runtime: Any) -> MemoryContext:
    """The run's context; a run started without one (e.g. a bare `graph.invoke(state)`) gets the served memory's
    default user, once per run (LangGraph builds the context object once per run)."""
    context = getattr(runtime, "context", None)
    if context is None:
        raise ValueError("this graph needs a context: invoke it with context={'user_id': ...} (MemCompile does this)")
    if isinstance(context, dict):
        return MemoryContext(**context)
    return context
