"""Chat models for the demos and the Studio chat agent: ChatOpenAI when OPENAI_API_KEY is set, else an offline reader.

The offline reader is a scripted stand-in, not a language model: it answers a question by quoting the recalled
claim that shares the most terms with it, so the memory loop can be seen working with no network and no key.
"""
from __future__ import annotations

import os
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from ..text import term_set

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
_HEADER = re.compile(r"^\[(?P<dia>[^\]]+)\] (?P<speaker>[^|]*?)(?: \| (?P<when>[^|]*?))? \| session \d+$")
NOTED = "Noted, I will remember that."
UNKNOWN = "I have nothing in memory about that yet."


def memory_claims(messages: list[BaseMessage]) -> list[tuple[str, str, str]]:
    """(dia_id, date, claim) for every claim line of the rendered blocks in system or prompt messages."""
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            continue
        dia = when = None
        for line in m.text.splitlines():
            if head := _HEADER.match(line):
                dia, when = head["dia"], (head["when"] or "")[:10]
            elif dia and line.startswith("- "):
                out.append((dia, when, line[2:]))
    return out


class OfflineMemoryReader(BaseChatModel):
    """Quotes the recalled claim sharing most terms with a question; acknowledges statements."""

    @property
    def _llm_type(self) -> str:
        return "memcompile-offline-reader"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        question = human.text if human is not None else ""
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply(question, messages)))])

    def reply(self, question: str, messages: list[BaseMessage]) -> str:
        if "?" not in question:
            return NOTED
        asked = term_set(question)
        claims = memory_claims(messages)
        if not claims:
            return UNKNOWN
        # most shared terms; ties (and no overlap at all) keep the earlier block, which the schedule ranked higher
        dia, when, claim = max(claims, key=lambda c: len(asked & term_set(c[2])))
        return f"From memory [{dia}] ({when}): {claim}"


def default_chat_model() -> BaseChatModel:
    """ChatOpenAI ($MEMCOMPILE_CHAT_MODEL, default gpt-4o-mini) when OPENAI_API_KEY is set, else the offline reader."""
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=os.environ.get("MEMCOMPILE_CHAT_MODEL", DEFAULT_OPENAI_MODEL), temperature=0)
    return OfflineMemoryReader()
