"""Query-only intent through a chat model (App. F); the offline intent is the per-query fallback."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..config import MemCompileConfig
from ..llm.calls import LLMClient, LLMUnavailable, ask_validated
from ..llm.prompts import INTENT_SHAPE, intent_request, json_correction
from ..llm.validation import parse_intent
from ..model import Intent
from .intent import offline_intent

log = logging.getLogger(__name__)


class LLMIntent:
    """intent(query, known_people, user_id): the request carries the query alone; known names only canonicalize."""

    def __init__(
        self, client: LLMClient, config: MemCompileConfig, count: Callable[[str, dict[str, int]], None] | None = None
    ):
        self.client = client
        self.config = config
        self.count = count

    def __call__(self, query: str, known_people: Sequence[str], user_id: str) -> Intent:
        cfg = self.config
        parse = lambda text: parse_intent(text, query, known_people, cfg)  # noqa: E731
        client = self.client.for_user(user_id)
        try:
            out = ask_validated(
                client, intent_request(query), parse, cfg.llm_json_retries, json_correction(INTENT_SHAPE)
            )
            error = out.error
        except LLMUnavailable as exc:
            out, error = None, str(exc)
        if out is not None and out.value is not None:
            return out.value
        log.warning("LLM intent fell back to the offline intent: %s", error)
        if self.count is not None and client.sent:  # a pure cache replay is no new event
            self.count(user_id, {"llm_intent_fallback": 1})
        return offline_intent(query, known_people, cfg.max_keywords)
