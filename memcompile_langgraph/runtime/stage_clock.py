"""Seconds per stage of a writer's work, summed over an engine's life: the ingest profile `memcompile bench` reports."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import telemetry


class StageClock:
    """Exclusive per thread: a stage entered inside another pauses the outer one, so a thread's stages never count the
    same second twice and add up to no more than the time it spent in them. Stages of another thread (the background
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
    def stage(self, name: str, traced: bool = True, **counts: Any) -> Iterator[None]:
        """traced: a span of the stage (with its counts) when tracing; a graph node's stage has its node's span."""
        stack = self._local.__dict__.setdefault("stack", [])  # [stage, running since] of each open stage
        now = time.perf_counter()
        if stack:
            self._add(stack[-1][0], now - stack[-1][1])
        stack.append([name, now])
        try:
            with telemetry.stage(name) if traced else telemetry.OFF_STAGE as span:
                span.record(counts)
                yield
        finally:
            now = time.perf_counter()
            self._add(name, now - stack.pop()[1])
            if stack:
                stack[-1][1] = now
