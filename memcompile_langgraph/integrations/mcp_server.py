"""An MCP server over a MemCompile: tools remember, recall, forget, stats (the `mcp` SDK's FastMCP).

The user is an argument of every tool, validated like everywhere else. A tool that fails (bad user id, empty query,
bad turns) answers with a tool error; the server keeps serving. The memory runs in a worker thread, so one slow
compile does not stall the session's other requests.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ..memory import MemCompile
from ..users import validate_user_id
from .retriever import packet_documents, resolve_k

INSTRUCTIONS = (
    "Long-term memory of conversations, one memory per user id. `remember` stores turns; `recall` returns the "
    "earlier turns that answer a question, each headed [dia_id] speaker | date time | session; `forget` removes turns "
    "or a whole user; `stats` counts what is stored."
)
PROVENANCE = ("dia_id", "speaker", "session", "time", "score", "rank", "source")


class Turn(BaseModel):
    speaker: str = Field(description="who said it, e.g. 'Tom'")
    text: str = Field(description="what was said")
    time: str = Field(default="", description="when, in any common date format (default: unknown)")
    dia_id: str = Field(default="", description="the turn's id (default: D<session>:<n>)")
    session: int | None = Field(default=None, ge=0, description="conversation session number (default: by date)")


def recall_memory(mem: MemCompile, query: str, user: str, k: int) -> dict[str, Any]:
    """The compiled context of at most k packets, in schedule order, with each packet's provenance."""
    validate_user_id(user)
    resolve_k(k, None)
    docs = packet_documents(mem, user, mem.compile(query, user_id=user))[:k]
    packets = [{f: d.metadata[f] for f in PROVENANCE} for d in docs]
    return {"context": "\n\n".join(d.page_content for d in docs), "packets": packets}


def forget_memory(mem: MemCompile, user: str, dia_ids: list[str] | None) -> dict[str, Any]:
    validate_user_id(user)
    if dia_ids is None:
        packets = mem.stats(user)["packets"]
        mem.forget(user)
        return {"user": user, "forgot_turns": packets}
    return {"user": user, "removed_turns": mem.delete_turns(user, dia_ids)}


def build_server(mem: MemCompile, host: str = "127.0.0.1", port: int = 8000) -> FastMCP:
    server = FastMCP("memcompile", instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING")

    @server.tool()
    async def remember(turns: list[Turn], user: str = "default") -> dict[str, int]:
        """Store conversation turns in the user's long-term memory. Returns counts: stored, already_stored,
        skipped_<reason> (turns that could not be stored)."""
        validate_user_id(user)
        return await asyncio.to_thread(mem.add_turns, [t.model_dump(exclude_defaults=True) for t in turns], user)

    @server.tool()
    async def recall(query: str, user: str = "default", k: int = 12) -> dict[str, Any]:
        """Recall the earlier turns that answer a question: `context` is the compiled memory (blocks headed
        [dia_id] speaker | date time | session, with the claims each turn supports); `packets` their provenance."""
        return await asyncio.to_thread(recall_memory, mem, query, user, k)

    @server.tool()
    async def forget(user: str, dia_ids: list[str] | None = None) -> dict[str, Any]:
        """Remove the given turns (dia_ids) of the user, or, without dia_ids, everything stored for the user."""
        return await asyncio.to_thread(forget_memory, mem, user, dia_ids)

    @server.tool()
    async def stats(user: str = "default") -> dict[str, Any]:
        """What is stored for the user: packets (turns), descriptors, Cells, sessions, vectors, counters."""
        return await asyncio.to_thread(mem.stats, user)

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> Response:  # for load balancers and for waiting until the server is up
        return PlainTextResponse("ok")

    return server
