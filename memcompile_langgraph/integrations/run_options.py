"""Per-run options of the chat integrations (user id, speaker names): configurable first, then runtime context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..users import auth_identity, resolve_user


def _current_runtime() -> Any:
    """The LangGraph Runtime of the graph run we are inside, or None outside one."""
    from langgraph.runtime import get_runtime

    try:
        return get_runtime()
    except (RuntimeError, KeyError):
        return None


def run_option(key: str, config: RunnableConfig | None, runtime: Any = None, default: Any = None) -> Any:
    """config["configurable"][key], else the graph's runtime context (a mapping or an object), else default."""
    value = ((config or {}).get("configurable") or {}).get(key)
    if value is None:
        context = getattr(runtime if runtime is not None else _current_runtime(), "context", None)
        value = context.get(key) if isinstance(context, Mapping) else getattr(context, key, None)
    return default if value is None else value


def run_user(config: RunnableConfig | None, runtime: Any = None, surface: str = "this node") -> str:
    """Whose memory a run reads and writes: the LangGraph server's authenticated user when custom auth is configured,
    else the run's user_id (configurable, then runtime context); no user is an error (see users.resolve_user)."""
    identity = auth_identity((config or {}).get("configurable"))
    return resolve_user(run_option("user_id", config, runtime, None), identity, surface)


def run_speakers(
    config: RunnableConfig | None, runtime: Any, user: str, user_name: str, assistant_name: str
) -> tuple[str, str]:
    """The speaker names a run's turns are stored under. Behind a server's auth: the signed-in user's id and the
    graph's own assistant name, never a run or assistant setting (an assistant's config is written by whoever may
    change it, not by the user whose turns these are). Else "user_name" / "assistant_name" of the run, else the
    defaults."""
    if auth_identity((config or {}).get("configurable")) is not None:
        return user, assistant_name
    return run_option("user_name", config, runtime, user_name), run_option(
        "assistant_name", config, runtime, assistant_name
    )
