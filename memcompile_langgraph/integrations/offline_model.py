"""Chat models for the demos and the Studio chat agent: ChatOpenAI when OPENAI_API_KEY is set, else an offline reader.

The offline reader is a scripted stand-in, not a language model: it answers a question by quoting the recalled
claim that answers it best (extractive.py), so the memory loop can be seen working with no network and no key.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from .extractive import Claim, answer, parse_claims
from .memory_nodes import QUOTED_KEY, SCRIPTED_KEY

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
NOTED = "Noted, I will remember that."
UNKNOWN = "I have nothing in memory about that yet."


def memory_claims(messages: list[BaseMessage]) -> list[Claim]:
    """Every claim of the rendered memory blocks in system or prompt messages."""
    return [c for m in messages if not isinstance(m, AIMessage) for c in parse_claims(m.text)]


class OfflineMemoryReader(BaseChatModel):
    """Quotes the recalled claim that best answers a question; acknowledges statements."""

    embeddings: Any = None  # the memory's embedder: relevance by cosine (else by shared terms)

    @property
    def _llm_type(self) -> str:
        return "memcompile-offline-reader"

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        question = human.text if human is not None else ""
        found = answer(question, memory_claims(messages), self.embeddings) if "?" in question else None
        if found is None:
            # scripted lines state nothing: remember stores none of them
            reply = AIMessage(content=UNKNOWN if "?" in question else NOTED, response_metadata={SCRIPTED_KEY: True})
        else:  # the whole reply is a quote: remember stores it as a pointer to its sources (memory_nodes)
            reply = AIMessage(content=found.render(), response_metadata={QUOTED_KEY: list(found.dia_ids)})
        return ChatResult(generations=[ChatGeneration(message=reply)])


def default_chat_model(embeddings: Any = None) -> BaseChatModel:
    """ChatOpenAI ($MEMCOMPILE_CHAT_MODEL, default gpt-4o-mini) when OPENAI_API_KEY is set, else the offline reader
    (given the memory's embedder, it ranks claims by cosine)."""
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=os.environ.get("MEMCOMPILE_CHAT_MODEL", DEFAULT_OPENAI_MODEL), temperature=0)
    return OfflineMemoryReader(embeddings=embeddings)
