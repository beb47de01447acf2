"""A graph of the paper's stages, one timed node per stage: each node's update gains trace[stage] = {"ms",
counts...} and, with a tracer provider, a span."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from .runtime import telemetry
from .runtime.context import run_context


def timed(
    stage: str,
    fn: Callable[[dict[str, Any], Runtime], dict[str, Any]],
    operation: telemetry.GraphOperation | None = None,
) -> Callable[..., dict[str, Any]]:
    def node(state: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
        # a no-op without a tracer provider
        with telemetry.stage(stage, runtime, operation, state, run_context) as span:
            start = time.perf_counter()
            update = fn(state, runtime)
            info = update.pop("_trace", {})
            update["trace"] = {stage: {"ms": round((time.perf_counter() - start) * 1000, 3), **info}}
            span.done(update)
        return update

    node.__name__ = stage
    return node


def stage_graph(
    state_type: type[Any],
    nodes: dict[str, Callable[..., dict[str, Any]]],
    operation: telemetry.GraphOperation | None = None,
    **schemas: Any,
) -> StateGraph[Any, Any, Any, Any]:
    """A StateGraph with one timed node per stage function `fn(state, runtime)` (schemas: StateGraph's
    context_schema / input_schema / output_schema); operation: the memory operation a run of it is."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state_type, **schemas)
    for name, fn in nodes.items():
        builder.add_node(name, timed(name, fn, operation))
    return builder
