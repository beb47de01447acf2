"""Closed-pool listwise packet scheduling through a chat model (Sec. 3.4.1-3.4.2, App. A.2)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from ..config import MemCompileConfig
from ..llm.calls import LLMClient, LLMUnavailable, ask_validated
from ..llm.prompts import label_correction, label_request
from ..llm.validation import parse_labels
from .scheduler import ScheduleInput, Scheduler

log = logging.getLogger(__name__)


class LLMScheduler:
    """schedule(): exactly min(k, |pool|) distinct packets of the pool. Each round sends the not yet chosen part of
    the pool and asks for the missing count; an invalid reply is resent with a schema correction up to
    llm_schedule_retries times, after which its valid unique labels are kept in order (App. A.2). Rounds continue
    while they add packets, at most llm_schedule_rounds; whatever is still missing comes from the deterministic
    scheduler, counted as llm_<stage>_filled (or llm_<stage>_fallback when the model added nothing).
    frontier(): the same procedure over W_q = A_0 U D_q, asking for the first K_R positions (all Eq. 13 reads); the
    rest of the order is the deterministic one, and the caller admits at most K_delta new packets (Eq. 13-14)."""

    def __init__(
        self,
        client: LLMClient,
        config: MemCompileConfig,
        fallback: Scheduler,
        count: Callable[[str, dict[str, int]], None] | None = None,
    ):
        self.client = client
        self.config = config
        self.fallback = fallback
        self.count = count

    def schedule(self, inp: ScheduleInput, k: int) -> list[str]:
        pool = [p.packet_id for p in inp.pool]
        k = min(k, len(pool))
        chosen = self._listwise("schedule", inp, pool, k)
        if len(chosen) < k:
            chosen += [p for p in self.fallback.schedule(inp, k) if p not in chosen][: k - len(chosen)]
        return chosen

    def frontier(self, inp: ScheduleInput, anchors: list[str], window: list[str]) -> list[str]:
        k = min(self.config.frontier_rank_cutoff, len(window))
        ranked = self._listwise("frontier", inp, window, k)
        return ranked + [p for p in self.fallback.frontier(inp, anchors, window) if p not in ranked]

    def _listwise(self, stage: str, inp: ScheduleInput, candidates: list[str], k: int) -> list[str]:
        """Up to k distinct ids of `candidates` from the model (possibly fewer); counters record how it went."""
        user = inp.index.user_id
        client = self.client.for_user(user)
        cfg = self.config
        chosen: list[str] = []
        counts: Counter = Counter()
        for round_no in range(max(1, cfg.llm_schedule_rounds)):
            remaining = [p for p in candidates if p not in chosen]
            need = min(k - len(chosen), len(remaining))
            if need <= 0:
                break
            counts[f"llm_{stage}_rounds"] += round_no > 0
            packets = [inp.index.packets[p] for p in remaining]
            req, labels = label_request(stage, inp.query, packets, need, cfg.llm_candidate_max_chars)
            try:
                out = ask_validated(
                    client,
                    req,
                    lambda text: parse_labels(text, labels, need),
                    cfg.llm_schedule_retries,
                    label_correction(need),
                )
            except LLMUnavailable as exc:
                log.warning("LLM %s unavailable, using the deterministic order: %s", stage, exc)
                counts[f"llm_{stage}_unavailable"] += 1
                break
            counts[f"llm_{stage}_retries"] += out.retries
            got = out.value if out.value is not None else (out.partial or [])
            if out.value is None:
                log.info(
                    "LLM %s reply still invalid after %d retries (%s); keeping %d valid labels",
                    stage,
                    out.retries,
                    out.error,
                    len(got),
                )
            by_label = dict(zip(labels, remaining))
            chosen += [by_label[label] for label in got]
            if not got:
                break
        if len(chosen) < k:
            counts[f"llm_{stage}_fallback" if not chosen else f"llm_{stage}_filled"] += 1
        if self.count is not None and client.sent and any(counts.values()):  # a pure cache replay is no new event
            self.count(user, {name: n for name, n in counts.items() if n})
        return chosen
