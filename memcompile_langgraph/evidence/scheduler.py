"""The scheduler contract shared by the deterministic and the LLM listwise schedulers (Sec. 3.4.1-3.4.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..index.user import UserIndex
from ..model import DenseHit, Intent, PacketScore


@dataclass(frozen=True)
class ScheduleInput:
    query: str
    intent: Intent
    index: UserIndex
    pool: list[PacketScore]  # U_q, the closed pool
    dense: list[DenseHit] = field(default_factory=list)  # D_q
    scores: dict[str, float] = field(default_factory=dict)  # offline fusion scores, when computed


class Scheduler(Protocol):
    def schedule(self, inp: ScheduleInput, k: int) -> list[str]:
        """A_0: exactly min(k, |pool|) distinct packet ids from the closed pool, most useful first (Eq. 11)."""

    def frontier(self, inp: ScheduleInput, anchors: list[str], window: list[str]) -> list[str]:
        """sigma_q: an ordering of the closed frontier pool W_q = A_0 U D_q (Eq. 12)."""
