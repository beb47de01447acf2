"""Knowledge-update marks decided by a chat model (engineering, not in the paper): one bounded request per query over
the candidate pairs of the selected packets; the offline heuristic (evidence/updates.py) answers when the model
cannot or replies invalidly."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..config import MemCompileConfig
from ..llm.calls import LLMClient, LLMUnavailable, ask_validated
from ..llm.prompts import UPDATE_SHAPE, json_correction, update_request
from ..llm.validation import parse_updates
from ..model import SourcePacket
from .updates import (
    UPDATE_KIND_MIN_COSINE,
    Supersession,
    candidates,
    claim_pair,
    said_at,
    subject_supersessions,
    supersessions,
)

log = logging.getLogger(__name__)


class LLMUpdates:
    """__call__(packets, claims, query, idf, user_id, when, cosine, subjects) -> earlier packet id -> Supersession, like supersessions().
    The heuristic's own pairs are sent first, so the model can confirm or reject each of them; an older
    packet is superseded by the nearest newer one the model confirms."""

    def __init__(
        self, client: LLMClient, config: MemCompileConfig, count: Callable[[str, dict[str, int]], None] | None = None
    ):
        self.client = client
        self.config = config
        self.count = count

    def __call__(
        self,
        packets: Sequence[SourcePacket],
        claims: Callable[[str], Sequence[str]],
        query: str,
        idf: Callable[[str], float],
        user_id: str,
        when: Callable[[SourcePacket], tuple] = said_at,
        cosine: Callable[[str, str], float] | None = None,
        subjects: Callable[[str], frozenset[str]] | None = None,
    ) -> dict[str, Supersession]:
        cfg = self.config
        heuristic = supersessions(packets, claims, query, idf, cosine, when, subjects)
        found = {(s.old, s.new) for s in heuristic.values()}
        pairs = candidates(packets, claims, query, idf, len(packets) ** 2, when)
        by_id = {p.packet_id: p for p in packets}
        # pairs of one subject that name no question term (the move that never says "live"), closer than the kind
        # rule's cosine: the model tells another fact of the same entity from a new value, the offline rule cannot
        near = set(found)
        if cosine and subjects:
            same = subject_supersessions(packets, claims, query, cosine, subjects, when, UPDATE_KIND_MIN_COSINE)
            near |= {(s.old, s.new) for s in same.values()}
        offered = {(c.old, c.new) for c in pairs}
        pairs += [claim_pair(by_id[o], by_id[n], claims) for o, n in sorted(near - offered)]
        pairs = sorted(pairs, key=lambda c: (c.old, c.new) not in found)
        pairs = pairs[: cfg.llm_update_max_pairs]
        if not pairs:
            return heuristic
        cut = [(c.old_claim[: cfg.llm_update_max_chars], c.new_claim[: cfg.llm_update_max_chars]) for c in pairs]
        req = update_request(query, [(by_id[c.old], a, by_id[c.new], b) for c, (a, b) in zip(pairs, cut)])
        client = self.client.for_user(user_id)
        try:
            out = ask_validated(
                client, req, lambda text: parse_updates(text, cut, cfg), 0, json_correction(UPDATE_SHAPE)
            )
            error = out.error
        except LLMUnavailable as exc:
            out, error = None, str(exc)
        if out is None or out.value is None:
            log.warning("LLM update marks fell back to the offline heuristic: %s", error)
            if self.count is not None and client.sent:  # a pure cache replay is no new event
                self.count(user_id, {"llm_update_fallback": 1})
            return heuristic
        decided: dict[str, Supersession] = {}
        for i in sorted(out.value, key=lambda i: when(by_id[pairs[i].new])):
            c, values = pairs[i], out.value[i]
            if values is not None and c.old not in decided:
                decided[c.old] = Supersession(c.old, c.new, (values[0],), (values[1],))
        return decided
