"""Ingest progress: two labelled bars in turns, extraction (the graph runs) and embedding (behind it on a
background thread); both end when the work ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from tqdm import tqdm


class IngestProgress:
    def __init__(self, total: int, enabled: bool, embeds: bool):
        self._bars: list[tqdm[NoReturn]] = []
        if enabled:
            from tqdm import tqdm

            self._bars = [tqdm(total=total, desc="extract", unit="turn", position=0)]
            if embeds:
                self._bars.append(tqdm(total=0, desc="embed  ", unit="turn", position=1))

    def extracted(self, turns: int, stored: int) -> None:
        if self._bars:
            self._bars[0].update(turns)
            if len(self._bars) > 1:
                self._bars[1].total = (self._bars[1].total or 0) + stored
                self._bars[1].refresh()

    def embedded(self, n: int) -> None:
        if len(self._bars) > 1:
            self._bars[1].update(n)

    def close(self) -> None:
        for bar in self._bars:
            bar.close()
