"""The extraction contract of the build plane (Sec. 3.2.1, App. B.1): facts per turn, metadata per fact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..model import SourcePacket


@dataclass(frozen=True, slots=True)
class Metadata:
    people: tuple[str, ...]
    keywords: tuple[str, ...]  # at most MemCompileConfig.max_keywords
    event_time: str  # normalized ("2023-05-07", "2023-05", "2022", ...) or ""
    interaction_time: str  # the packet's session time


@dataclass(frozen=True, slots=True)
class TurnWindow:
    """What an extractor may look at for one turn: the turn, the one before it, and the names known so far."""

    packet: SourcePacket
    previous: SourcePacket | None
    known_people: Sequence[str]


class Extractor(Protocol):
    def facts(self, window: TurnWindow) -> list[str]:
        """Standalone factual claims of the turn, in order (may be empty)."""

    def metadata(self, fact: str, window: TurnWindow) -> Metadata:
        """People, keywords and times of one claim."""
