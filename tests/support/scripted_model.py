"""An in-process LangChain chat model that replays scripted replies (strings, exceptions or callables)."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class HTTPError(Exception):
    """Looks like a provider error: carries status_code."""

    def __init__(self, status_code: int):
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class ScriptedChatModel(BaseChatModel):
    replies: list = Field(default_factory=list)  # consumed in order; when empty, `default` answers
    default: Any = "[]"
    usage: bool = True
    calls: list = Field(default_factory=list)  # the message lists received
    model_name: str = "scripted"
    temperature: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.calls.append(messages)
        reply = self.replies.pop(0) if self.replies else self.default
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(messages)
        if isinstance(reply, BaseException):
            raise reply
        usage = {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107} if self.usage else None
        # an AIMessage reply (e.g. tool calls) is sent as it is
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=reply, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools, **kwargs):
        return self  # the script names the tools it calls
