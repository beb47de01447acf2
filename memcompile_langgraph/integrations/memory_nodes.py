"""Memory nodes for MessagesState-style chat graphs: recall before the model, remember after it.

recall: compiles memory for the last human message and adds one system message with the compiled context
(the previous recall message is removed, so the history holds one current memory message).
remember: stores every human and assistant message not stored yet as a turn. Each turn's dia_id is derived
from its message id, so nothing is stored twice, across threads and processes alike. An assistant reply is stored
as what the assistant said in its own words: what it quotes from the memory it was shown is left to its sources
(a reply's QUOTED_KEY metadata, or the dia_ids it cites, point to them), never stored as a second copy that a later
recall would rank as evidence in place of the user's own turn; a reply that only quotes, or that states nothing
(SCRIPTED_KEY: an acknowledgement), stores nothing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import (
    Callable,  # LangGraph injects `config` for "Optional[RunnableConfig]", not "RunnableConfig | None"
    Mapping,
)
from datetime import datetime
from typing import (
    Any,
    Optional,
)

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import RunnableConfig

from ..evidence.budget import validate_max_tokens
from ..evidence.render import framed_memory
from ..model import stable_hash
from ..text.terms import clean_text
from .extractive import block_dia_ids
from .retriever import packet_documents, resolve_k
from .run_options import run_speakers, run_user

RECALL_ID_PREFIX = "memcompile-recall-"

QUOTED_KEY = "memcompile_quoted"  # response_metadata of a reply that is wholly a quote: the dia_ids it quotes
SCRIPTED_KEY = "memcompile_scripted"  # response_metadata of a reply that states nothing (an acknowledgement): True
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CITED = re.compile(r"\[([^\[\]]{1,400})\]")


def is_recall_message(message: Any) -> bool:
    return isinstance(message, SystemMessage) and str(message.id or "").startswith(RECALL_ID_PREFIX)


def _messages(state: Any) -> list[BaseMessage]:
    """The state's messages as message objects; [] when the state has none or they cannot be read."""
    raw = state.get("messages") if isinstance(state, Mapping) else None
    if not raw or not isinstance(raw, list):
        return []
    try:
        return convert_to_messages(raw)
    except (ValueError, TypeError, NotImplementedError):
        return []


def make_recall_node(mem: Any, *, k: int | None = None, max_tokens: int | None = None) -> Callable[..., dict[str, Any]]:
    """A node returning {"messages": [...]} with the compiled context for the last human message, or {}."""
    k = resolve_k(k, None)
    max_tokens = validate_max_tokens(max_tokens)

    def recall(state: Any, config: Optional[RunnableConfig] = None, runtime: Any = None) -> dict[str, Any]:
        messages = _messages(state)
        human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        question = clean_text(human.text) if human is not None else ""
        if not question:
            return {}
        user = run_user(config, runtime, "the recall node")
        ctx = mem.compile(question, user_id=user, max_tokens=max_tokens)
        update: list[Any] = [RemoveMessage(id=m.id) for m in messages if m.id is not None and is_recall_message(m)]
        blocks = [d.page_content for d in packet_documents(mem, user, ctx)][:k]
        if blocks:
            update.append(SystemMessage(content=framed_memory(blocks), id=f"{RECALL_ID_PREFIX}{uuid.uuid4().hex}"))
        return {"messages": update} if update else {}

    recall.__name__ = "recall"
    return recall


def turn_dia_id(message: BaseMessage, position: int) -> str:
    """A stable dia_id per message: from its id, else (plain-list states) from its position and text."""
    key = message.id or f"{position}:{message.type}:{message.text}"
    return f"m-{stable_hash(key, length=10)}"


def _speaker(message: BaseMessage, user_name: str, assistant_name: str) -> str:
    name = (message.name or "").strip()
    return name or (user_name if isinstance(message, HumanMessage) else assistant_name)


def _storable(message: BaseMessage) -> bool:
    """Human and assistant text; tool calls without text, tool results and system messages are not dialogue."""
    return isinstance(message, (HumanMessage, AIMessage)) and bool(message.text.strip())


def _shown_dia_ids(messages: list[BaseMessage]) -> set[str]:
    """The dia_ids of the memory the model was shown: the recall message and search_memory's results."""
    shown = (m for m in messages if is_recall_message(m) or isinstance(m, ToolMessage))
    return {dia for m in shown for dia in block_dia_ids(m.text)}


def own_words(message: AIMessage, shown: set[str]) -> str:
    """The reply as stored: its sentences that cite no dia_id the model was shown, "" for a reply that is wholly a
    quote (QUOTED_KEY) or states nothing (SCRIPTED_KEY). The quoted sentences' sources stand for them."""
    metadata = message.response_metadata
    if metadata.get(SCRIPTED_KEY) is True or isinstance(metadata.get(QUOTED_KEY), list):
        return ""
    return " ".join(
        sentence
        for sentence in _SENTENCE.split(message.text.strip())
        if not any(dia.strip() in shown for group in _CITED.findall(sentence) for dia in group.split(","))
    )


def make_remember_node(
    mem: Any, *, user_name: str = "User", assistant_name: str = "Assistant"
) -> Callable[..., dict[str, Any]]:
    """A node storing the new exchange as turns at the current time; returns no state update.

    Speaker names: a message's own `name`, else "user_name" / "assistant_name" from the run's configurable or
    runtime context, else the names given here; behind a LangGraph server's auth, the signed-in user's id and the
    name given here (run_options.run_speakers).
    """

    def remember(state: Any, config: Optional[RunnableConfig] = None, runtime: Any = None) -> dict[str, Any]:
        messages = _messages(state)
        if not any(isinstance(m, HumanMessage) for m in messages):
            return {}
        user = run_user(config, runtime, "the remember node")
        names = run_speakers(config, runtime, user, user_name, assistant_name)
        stored = mem.index(user).by_dia
        shown = _shown_dia_ids(messages)
        # every message not stored yet, wherever it is (a stored one is no sign that those before it were stored)
        pending = [
            {"speaker": _speaker(message, *names), "text": text, "dia_id": turn_dia_id(message, position)}
            for position, message in enumerate(messages)
            if _storable(message) and turn_dia_id(message, position) not in stored
            for text in [own_words(message, shown) if isinstance(message, AIMessage) else message.text]
            if text.strip()
        ]
        if pending:
            now = datetime.now().isoformat(timespec="seconds")
            mem.add_turns([{**turn, "time": now} for turn in pending], user_id=user)
        return {}

    remember.__name__ = "remember"
    return remember
