"""Shared command-line flags for the LLM stages: --llm-model, --llm-base-url, --answer-model."""

from __future__ import annotations

import argparse
from typing import Any


def add_llm_args(p: argparse.ArgumentParser, answer: bool = False) -> None:
    g = p.add_argument_group("LLM stages (default: offline components)")
    g.add_argument(
        "--llm-model",
        default=None,
        metavar="NAME",
        help="chat model for extraction, intent and scheduling, via ChatOpenAI (key from OPENAI_API_KEY)",
    )
    g.add_argument(
        "--llm-base-url",
        default=None,
        metavar="URL",
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (any key works there)",
    )
    if answer:
        g.add_argument("--answer-model", default=None, metavar="NAME", help="answer model (default: --llm-model)")


def build_llm(args: argparse.Namespace) -> Any:
    """The ChatOpenAI named by --llm-model, or None for the offline stages."""
    return _model(getattr(args, "llm_model", None), args)


def build_answer_llm(args: argparse.Namespace) -> Any:
    """The ChatOpenAI named by --answer-model; None means the --llm-model one answers."""
    return _model(getattr(args, "answer_model", None), args)


def _model(name: str | None, args: argparse.Namespace) -> Any:
    if not name:
        return None
    from ..llm.models import chat_model

    return chat_model(name, getattr(args, "llm_base_url", None))
