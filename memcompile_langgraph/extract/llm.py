"""LLM fact and metadata extraction (Sec. 3.2.1, App. B.1, F) with per-item fallback to the heuristic extractor."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..config import MemCompileConfig
from ..llm.calls import LLMClient, LLMUnavailable, Request, ask_validated
from ..llm.concurrent import run_concurrently
from ..llm.prompts import FACT_SHAPE, METADATA_SHAPE, fact_request, json_correction, metadata_request
from ..llm.validation import parse_facts, parse_metadata
from .base import Extractor, Metadata, TurnWindow

log = logging.getLogger(__name__)

CountSink = Callable[[str, dict[str, int]], None]  # (user_id, counts), e.g. SqliteRecords.add_counts
T = TypeVar("T")


class LLMExtractor:
    """Extractor over a chat model. An invalid reply is retried; then that turn or fact uses the fallback extractor,
    counted per user as llm_fact_fallback / llm_metadata_fallback, so no turn is ever lost."""

    def __init__(
        self, client: LLMClient, config: MemCompileConfig, fallback: Extractor, count: CountSink | None = None
    ):
        self.client = client
        self.config = config
        self.fallback = fallback
        self.count = count
        self.progress = False  # MemCompile.add_turns(progress=True) turns the per-call bars on

    # --- one item -----------------------------------------------------------------------------
    def _ask(
        self,
        stage: str,
        req: Request,
        parse: Callable[[str], T],
        shape: str,
        window: TurnWindow,
        fallback: Callable[[], T],
    ) -> tuple[T, str]:
        """(value, "") from the model, else (fallback(), why) with why = "unavailable" or "invalid"."""
        client = self.client.for_user(window.packet.user_id)
        try:
            out = ask_validated(client, req, parse, self.config.llm_json_retries, json_correction(shape))
        except LLMUnavailable as exc:
            log.info("%s extraction for %s: %s", stage, window.packet.dia_id, exc)
            return fallback(), "unavailable"
        if out.value is None:
            log.info("%s extraction for %s: invalid reply (%s)", stage, window.packet.dia_id, out.error)
            return fallback(), "invalid"
        return out.value, ""

    def _facts(self, window: TurnWindow) -> tuple[list[str], str]:
        parse = lambda text: parse_facts(text, self.config)  # noqa: E731
        return self._ask("fact", fact_request(window), parse, FACT_SHAPE, window, lambda: self.fallback.facts(window))

    def _metadata(self, item: tuple[str, TurnWindow]) -> tuple[Metadata, str]:
        fact, window = item
        parse = lambda text: parse_metadata(text, window, self.config)  # noqa: E731
        return self._ask(
            "metadata",
            metadata_request(fact, window),
            parse,
            METADATA_SHAPE,
            window,
            lambda: self.fallback.metadata(fact, window),
        )

    # --- Extractor protocol -------------------------------------------------------------------
    def facts(self, window: TurnWindow) -> list[str]:
        return self.facts_batch([window])[0]

    def metadata(self, fact: str, window: TurnWindow) -> Metadata:
        return self.metadata_batch([(fact, window)])[0]

    # --- batches: what build.extract_all / metadata_all call, concurrently -------------------------
    def facts_batch(self, windows: Sequence[TurnWindow]) -> list[list[str]]:
        results = run_concurrently(
            self._facts, windows, self.config.llm_concurrency, "facts" if self.progress else None
        )
        self._report("fact", [(c.packet.user_id, why) for c, (_, why) in zip(windows, results)])
        return [facts for facts, _ in results]

    def metadata_batch(self, items: Sequence[tuple[str, TurnWindow]]) -> list[Metadata]:
        results = run_concurrently(
            self._metadata, items, self.config.llm_concurrency, "metadata" if self.progress else None
        )
        self._report("metadata", [(window.packet.user_id, why) for (_, window), (_, why) in zip(items, results)])
        return [meta for meta, _ in results]

    def _report(self, stage: str, outcomes: list[tuple[str, str]]) -> None:
        failed = Counter((user, why) for user, why in outcomes if why)
        if not failed:
            return
        per_user: Counter[str] = Counter()
        for (user, why), n in failed.items():
            per_user[user] += n
            log.warning(
                "LLM %s extraction fell back to the heuristic for %d of %d items (%s)", stage, n, len(outcomes), why
            )
        if self.count is not None:
            for user, n in per_user.items():
                self.count(user, {f"llm_{stage}_fallback": n})
