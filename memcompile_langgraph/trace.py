"""Per-stage timing for graph nodes: each node's update gains trace[stage] = {"ms", counts...}."""
from __future__ import annotations

import functools
import time
from typing import Any, Callable


def timed(stage: str, fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(fn)
    def node(state: dict[str, Any]) -> dict[str, Any]:
        start = time.perf_counter()
        update = fn(state)
        info = update.pop("_trace", {})
        update["trace"] = {stage: {"ms": round((time.perf_counter() - start) * 1000, 3), **info}}
        return update

    node.__name__ = stage
    return node
