"""MemCompileRetriever: the compiled context as LangChain Documents, one per selected packet in schedule order."""

from __future__ import annotations

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from ..evidence.budget import is_marker, validate_max_tokens
from ..evidence.render import render_block
from ..memory import MemCompile
from ..model import CompiledContext
from ..runtime import telemetry
from ..text.terms import clean_text
from ..text.timeparse import validate_as_of
from ..users import validate_user_id


def packet_documents(mem: MemCompile, user_id: str, ctx: CompiledContext) -> list[Document]:
    """page_content = the packet's block of the compiled context (its claim bundle, Eq. 15, cut to the context
    budget when it was over), metadata = the packet's dict form (SelectedPacket.to_dict); packets deleted since the
    compile, or that the budget left out, are left out."""
    index = mem.index(user_id)
    # stored text never holds a blank line (render.one_line): one block per shown packet, then the budget's marker
    blocks = [b for b in ctx.text.split("\n\n") if not is_marker(b)] if ctx.text else []
    shown = [p for p in ctx.packets if p.shown]
    if len(blocks) != len(shown):
        blocks = [render_block(index, p.packet_id) if p.packet_id in index.packets else "" for p in shown]
    return [
        Document(id=p.packet_id, page_content=block, metadata=p.to_dict())
        for p, block in zip(shown, blocks)
        if p.packet_id in index.packets
    ]


def nothing_stored(mem: MemCompile, user_id: str) -> bool:
    """The user has no stored turn: a recall says so, rather than an empty result that reads like "no match"."""
    return not mem.turns(user_id, limit=1)


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
    max_tokens: int | None = None  # context budget in tokens (None: the memory's configured default)
    as_of: str | None = None  # only what had been said by then (a date or ISO 8601 time; None: everything)

    @field_validator("as_of", mode="before")
    @classmethod
    def _valid_as_of(cls, value: object) -> str | None:
        return validate_as_of(value)

    @field_validator("max_tokens")
    @classmethod
    def _valid_budget(cls, value: int | None) -> int | None:
        return validate_max_tokens(value)

    @field_validator("user_id")
    @classmethod
    def _valid_user(cls, value: str) -> str:
        return validate_user_id(value)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        limit = resolve_k(k, self.k)
        if not clean_text(query):
            return []  # an empty question (spaces, or only characters the store removes) matches no memory
        with telemetry.retrieval(self.user_id, query, limit) as span:
            ctx = self.memory.compile(query, self.user_id, max_tokens=self.max_tokens, as_of=self.as_of)
            docs = packet_documents(self.memory, self.user_id, ctx)[:limit]
            telemetry.documents(span, docs)
        return docs

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        limit = resolve_k(k, self.k)
        if not clean_text(query):
            return []
        with telemetry.retrieval(self.user_id, query, limit) as span:
            ctx = await self.memory.acompile(query, self.user_id, max_tokens=self.max_tokens, as_of=self.as_of)
            docs = packet_documents(self.memory, self.user_id, ctx)[:limit]
            telemetry.documents(span, docs)
        return docs
