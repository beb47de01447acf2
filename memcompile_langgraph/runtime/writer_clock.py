"""Seconds per part of the writers' work (open, packetize, extract, place, index, commit, embed, store_vectors, wait,
publish), summed over an engine's life: what `memcompile bench` reports below its table. A part is not a graph stage:
the two extract stages are one part, and commit, embed or wait belong to no stage."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import telemetry


class WriterClock:
    """Exclusive per thread: a part entered inside another pauses the outer one, so a thread's parts never count the
    same second twice and add up to no more than the time it spent in them. Parts on another thread (the background
    embedding) overlap the writer's."""

    def __init__(self) -> None:
        self._totals: dict[str, float] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    def totals(self) -> dict[str, float]:
        with self._lock:
            return dict(self._totals)

    def _add(self, name: str, seconds: float) -> None:
        with self._lock:
            self._totals[name] = self._totals.get(name, 0.0) + seconds

    @contextmanager
    def part(self, name: str, traced: bool = True, **counts: Any) -> Iterator[None]:
        """traced: a span of the part (with its counts) when tracing; a part a graph node times has the node's span."""
        stack = self._local.__dict__.setdefault("stack", [])  # [part, running since] of each open part
        now = time.perf_counter()
        if stack:
            self._add(stack[-1][0], now - stack[-1][1])
        stack.append([name, now])
        try:
            with telemetry.part(name) if traced else telemetry.UNTRACED as span:
                span.record(counts)
                yield
        finally:
            now = time.perf_counter()
            self._add(name, now - stack.pop()[1])
            if stack:
                stack[-1][1] = now
