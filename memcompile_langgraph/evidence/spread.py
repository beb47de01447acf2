"""Session spread for questions about the whole history (engineering, not in the paper).

A question asking how something developed, in what order things came up or what was said across conversations
needs evidence from many sessions, while the fused score tends to fill the budget from the one session that
matches best. For such questions the anchors are taken round-robin over the sessions of the pool's best packets
(each session's packets in score order; a question addressing one speaker takes that speaker's packets first);
other questions keep the score order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SPAN = re.compile(
    r"\b(?:throughout|across (?:our|my|the|all|these|those|different|multiple|several)|over (?:the course of|time)|"
    r"in (?:what|which) order|the order (?:in which|of)|in order(?! to)|evolved?|progressed|all the (?:times|ways))\b",
    re.I,
)


def spans_history(query: str) -> bool:
    return bool(_SPAN.search(query))


def session_round_robin(ranked: Sequence[str], sessions: Sequence[int], k: int, depth: int) -> list[str]:
    """The first k of `ranked` (best first) taken one per session per round, over the sessions present among its
    first `depth` entries, sessions ordered by their best entry; entries outside those sessions come last."""
    window = list(ranked[:depth])
    by_session: dict[int, list[str]] = {}
    for pid, s in zip(window, sessions):
        by_session.setdefault(s, []).append(pid)
    out: list[str] = []
    queues = list(by_session.values())
    while len(out) < k and any(queues):
        for q in queues:
            if q and len(out) < k:
                out.append(q.pop(0))
    out += [p for p in ranked if p not in set(out)][: k - len(out)]
    return out


def speaker_first(ranked: Sequence[str], speakers: Sequence[str], addressed: Sequence[str]) -> list[str]:
    """A question addressing one speaker ("in what order did I bring up ...") asks about that speaker's turns:
    theirs first, each part in score order; with none or both addressed the order stays."""
    if len(addressed) != 1:
        return list(ranked)
    mine = [p for p, s in zip(ranked, speakers) if s == addressed[0]]
    return mine + [p for p, s in zip(ranked, speakers) if s != addressed[0]]
