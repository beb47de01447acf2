"""Building the ChatOpenAI the CLI and tests use; imported only when a model is asked for."""

from __future__ import annotations

import os
from typing import Any

from pydantic import SecretStr

from ..config import DEFAULT_CONFIG

PLACEHOLDER_KEY = "not-needed"  # local OpenAI-compatible servers accept any key


def chat_model(model: str, base_url: str | None = None, **kw: Any):
    """ChatOpenAI at the paper's sampling parameters (temperature 0, 2,048 completion tokens); the client's own retries are off
    because LLMClient retries with backoff. The key comes from OPENAI_API_KEY (a placeholder for a base_url)."""
    from langchain_openai import ChatOpenAI

    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        if base_url is None:
            raise ValueError("OPENAI_API_KEY is not set (or give --llm-base-url for a local OpenAI-compatible server)")
        key = PLACEHOLDER_KEY
    parameters: dict[str, Any] = {
        "temperature": DEFAULT_CONFIG.llm_temperature,
        "max_tokens": DEFAULT_CONFIG.llm_max_tokens,
        "timeout": DEFAULT_CONFIG.llm_timeout_seconds,
        "max_retries": 0,
        **kw,
    }
    return ChatOpenAI(model=model, api_key=SecretStr(key), base_url=base_url, **parameters)
