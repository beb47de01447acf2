"""A chat agent with long-term memory: recall -> model -> remember over MessagesState."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from typing_extensions import TypedDict

from ..memory import MemCompile
from .memory_nodes import make_recall_node, make_remember_node
from .offline_model import default_chat_model

PERSONA = "You are a friendly assistant who remembers earlier conversations with this user."


class ChatContext(TypedDict, total=False):
    """Run context (`graph.invoke(..., context={...})`): whose memory, and the speaker names stored."""

    user_id: str
    user_name: str
    assistant_name: str


def build_chat_agent(
    mem: MemCompile,
    model: BaseChatModel | None = None,
    *,
    user_name: str = "User",
    assistant_name: str = "Assistant",
    checkpointer: Any = None,
):
    model = model or default_chat_model(mem.embeddings)

    def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(content=PERSONA), *state["messages"]])]}

    builder = StateGraph(MessagesState, context_schema=ChatContext)
    builder.add_node("recall", make_recall_node(mem))
    builder.add_node("model", respond)
    builder.add_node("remember", make_remember_node(mem, user_name=user_name, assistant_name=assistant_name))
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "model")
    builder.add_edge("model", "remember")
    builder.add_edge("remember", END)
    return builder.compile(checkpointer=checkpointer, name="memcompile_chat")
