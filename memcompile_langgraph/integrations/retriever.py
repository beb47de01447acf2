"""MemCompileRetriever: the compiled context as LangChain Documents, one per selected packet in schedule order."""
from __future__ import annotations

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from ..evidence.render import render_block
from ..memory import MemCompile
from ..records import CompiledContext
from ..text import clean_text
from ..users import validate_user_id

METADATA_KEYS = ("dia_id", "speaker", "session", "time", "packet_id", "score", "rank", "source")


def packet_documents(mem: MemCompile, user_id: str, ctx: CompiledContext) -> list[Document]:
    """page_content = the packet's claim bundle (Eq. 15); packets deleted since the compile are left out."""
    index = mem.index(user_id)
    return [
        Document(id=p["packet_id"], page_content=render_block(index, p["packet_id"]), metadata={k: p[k] for k in METADATA_KEYS})
        for p in ctx.packets
        if p["packet_id"] in index.packets
    ]


def resolve_k(k: int | None, default: int | None) -> int | None:
    """k when given (a positive integer), else the default; None means every selected packet."""
    if k is None:
        return default
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return k


class MemCompileRetriever(BaseRetriever):
    """Retrieves one user's compiled evidence: at most k packets (the compiler selects at most K0 + K_delta)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: MemCompile
    user_id: str = "default"
    k: int = Field(default=12, ge=1)

    @field_validator("user_id")
    @classmethod
    def _valid_user(cls, value: str) -> str:
        return validate_user_id(value)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None) -> list[Document]:
        limit = resolve_k(k, self.k)
        if not clean_text(query):
            return []  # an empty question (spaces, or only characters the store removes) matches no memory
        return packet_documents(self.memory, self.user_id, self.memory.compile(query, self.user_id))[:limit]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        limit = resolve_k(k, self.k)
        if not clean_text(query):
            return []
        ctx = await self.memory.acompile(query, self.user_id)
        return packet_documents(self.memory, self.user_id, ctx)[:limit]
