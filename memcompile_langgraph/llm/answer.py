"""Answer generation over the compiled context and the CORRECT/WRONG judge (Sec. 4.1, App. F).

Both functions take a LangChain chat model, or an LLMClient (e.g. MemCompile.llm_client(user_id=...)) to have the
calls cached and accounted in a store. A model that cannot be reached raises LLMUnavailable.
"""

from __future__ import annotations

import logging
from typing import Any

from ..config import DEFAULT_CONFIG
from .calls import LLMClient, ask_validated
from .prompts import JUDGE_SHAPE, answer_request, json_correction, judge_request
from .validation import parse_judge

log = logging.getLogger(__name__)

UNKNOWN = "Unknown"


def as_client(chat_model: Any) -> LLMClient:
    return chat_model if isinstance(chat_model, LLMClient) else LLMClient(chat_model, DEFAULT_CONFIG)


def generate_answer(chat_model: Any, question: str, context: str, temporal: bool) -> str:
    """The short answer; the temporal prompt when the query intent is temporal. An empty reply reads as Unknown."""
    text = as_client(chat_model).complete(answer_request(question, context, temporal))
    if not text:
        log.warning("the answer model returned an empty reply; answering %s", UNKNOWN)
    return text or UNKNOWN


def judge_answer(chat_model: Any, question: str, gold: str, generated: str) -> bool:
    """True when the judge labels the generated answer CORRECT; a label that stays unreadable counts as WRONG."""
    client = as_client(chat_model)
    out = ask_validated(
        client,
        judge_request(question, str(gold), generated),
        parse_judge,
        client.config.llm_json_retries,
        json_correction(JUDGE_SHAPE),
    )
    if out.value is None:
        log.warning("judge reply unreadable (%s); counting the answer as WRONG", out.error)
        return False
    return out.value
