"""Ingest progress in turns: extraction (the graph runs) and embedding (behind it on a background thread). On a
terminal, two labelled bars that end when the work ends; elsewhere (a log, a pipe, CI) plain lines, since a
second bar moves the cursor with escape codes that a file shows as `[A`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

STEPS = 4  # plain lines per stage: at each quarter of the turns


class IngestProgress:
    def __init__(self, total: int, enabled: bool, embeds: bool, stream: TextIO | None = None):
        self._bars: list[tqdm[NoReturn]] = []
        self._stream = stream or sys.stderr
        self._plain = enabled and not self._stream.isatty()
        self._total = total
        self._done = {"extract": 0, "embed": 0}
        self._due = {"extract": 0, "embed": 0}  # steps already said
        self._embed_total = 0
        if enabled and not self._plain:
            from tqdm import tqdm

            self._bars = [tqdm(total=total, desc="extract", unit="turn", position=0, file=self._stream)]
            if embeds:
                self._bars.append(tqdm(total=0, desc="embed  ", unit="turn", position=1, file=self._stream))

    def extracted(self, turns: int, stored: int) -> None:
        self._embed_total += stored
        self._step("extract", turns)
        if self._bars:
            self._bars[0].update(turns)
            if len(self._bars) > 1:
                self._bars[1].total = (self._bars[1].total or 0) + stored
                self._bars[1].refresh()

    def embedded(self, n: int) -> None:
        self._step("embed", n)
        if len(self._bars) > 1:
            self._bars[1].update(n)

    def _step(self, stage: str, n: int) -> None:
        """A plain line each time the stage passes another quarter of the turns given."""
        if not self._plain:
            return
        self._done[stage] += n
        reached = STEPS * self._done[stage] // self._total if self._total else 0
        if reached > self._due[stage]:
            self._due[stage] = reached
            self._say(stage)

    def _say(self, stage: str) -> None:
        total = self._total if stage == "extract" else self._embed_total  # stored turns only are embedded
        print(f"memcompile: {stage} {self._done[stage]}/{total} turns", file=self._stream, flush=True)

    def close(self) -> None:
        for bar in self._bars:
            bar.close()
        if self._plain and self._due["embed"] < STEPS and self._done["embed"]:
            self._say("embed")  # the last quarter was stored turns fewer than given
