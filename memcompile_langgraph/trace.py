"""Per-stage timing for graph nodes: each node's update gains trace[stage] = {"ms", counts...}."""
from __future__ import annotations

import functools
import time
from typing import Any, Callable

from langgraph.graph import StateGraph


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


def stage_graph(state_type: type, nodes: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]], mem: Any, **schemas: type) -> StateGraph:
    """A StateGraph with one timed node per stage function, each bound to the MemCompile instance
    (schemas: StateGraph's input_schema / output_schema when callers see less than the stages share)."""
    builder = StateGraph(state_type, **schemas)
    for name, fn in nodes.items():
        builder.add_node(name, timed(name, lambda state, fn=fn: fn(mem, state)))
    return builder
