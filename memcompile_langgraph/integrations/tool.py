"""search_memory: a tool for tool-calling agents. The model chooses the query, never the user id."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from ..evidence.budget import validate_max_tokens
from ..evidence.render import framed_memory
from ..memory import MemCompile
from ..text.terms import clean_text
from ..text.timeparse import validate_as_of
from ..users import validate_user_id
from .retriever import nothing_stored, packet_documents, resolve_k
from .run_options import run_user

DESCRIPTION = (
    "Search the long-term memory of earlier conversations with this user. Give a standalone question or topic "
    "(names, things, dates). Returns the matching earlier turns, each headed [dia_id] speaker | date time | session."
)
NOTHING_FOUND = "No stored memory matches this query."
NOTHING_STORED = "Nothing is stored in long-term memory for this user yet."


class SearchMemoryInput(BaseModel):
    query: str = Field(description="what to look up, e.g. 'When did Tom adopt his dog?'")
    as_of: str | None = Field(
        default=None, description="only what had been said by this date or time, ISO 8601 (e.g. 2024-03-31)"
    )


def make_search_memory_tool(
    mem: MemCompile, *, user_id: str | None = None, k: int | None = None, max_tokens: int | None = None
) -> BaseTool:
    """The user is fixed here, else taken per run from config["configurable"]["user_id"] or the runtime context.

    Content is the compiled context, framed as records (evidence/render.framed_memory); the artifact is the selected packets' metadata (dia_id, time, score, ...).
    """
    k = resolve_k(k, None)
    max_tokens = validate_max_tokens(max_tokens)
    if user_id is not None:
        user_id = validate_user_id(user_id)

    def answer(query: str, config: RunnableConfig, as_of: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        if not clean_text(query):  # nothing but spaces or characters the store removes
            return "The query is empty: say what to look up.", []
        try:
            as_of = validate_as_of(as_of)
        except ValueError as exc:  # the model's argument: it reads why and can ask again
            return str(exc), []
        user = user_id or run_user(config, None, "search_memory")
        docs = packet_documents(mem, user, mem.compile(query, user_id=user, max_tokens=max_tokens, as_of=as_of))[:k]
        if not docs:
            return NOTHING_STORED if nothing_stored(mem, user) else NOTHING_FOUND, []
        return framed_memory([d.page_content for d in docs]), [d.metadata for d in docs]

    async def aanswer(query: str, config: RunnableConfig, as_of: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        return await asyncio.to_thread(answer, query, config, as_of)  # to_thread keeps the run's context variables

    return StructuredTool.from_function(
        func=answer,
        coroutine=aanswer,
        name="search_memory",
        description=DESCRIPTION,
        args_schema=SearchMemoryInput,
        response_format="content_and_artifact",
    )
