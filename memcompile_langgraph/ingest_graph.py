"""The build plane as a LangGraph graph: packetize -> extract facts -> extract metadata -> place in Cells -> index.

Every run is one writer unit of work however it is invoked (runtime/unit_of_work.py). Inside
MemCompile.add_turns the run's context carries the unit, which already holds the user's writer lock and the
private next index. A run started by Studio or a LangGraph server works optimistically: it forks the newest
published snapshot, and its `index` stage takes the writer lock, commits only if no other writer went first
(else the run starts over from `packetize` on the newer snapshot), embeds, and publishes. A run resumed from a
checkpoint has lost its private fork (never checkpointed) and starts over the same way.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START
from langgraph.runtime import Runtime

from .ingest.build import extract_all, metadata_all, packetize, turn_windows
from .runtime.context import MemoryContext, run_context
from .runtime.telemetry import GraphOperation
from .runtime.unit_of_work import UnitOfWork, WriteConflict
from .stage_graph import stage_graph
from .state import IngestState, IngestWork, add_counts

MAX_ATTEMPTS = 5  # optimistic runs that lose to other writers this often give up with WriteConflict


def packetize_node(state: IngestWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    # the unit's private index, or a private fork of the newest snapshot (not the run's pinned one: a retry must
    # see what the writer that went first stored)
    work = ctx.writer.index if ctx.writer is not None else ctx.cache.snapshot(ctx.user).fork()
    result = packetize(state.get("turns", []), work, ctx.user)
    windows, trimmed = turn_windows(result.packets, work, ctx.engine.config)
    counts = dict(result.counts)
    if trimmed:
        counts["trimmed_for_extraction"] = trimmed
    update = {"packets": result.packets, "windows": windows, "work_index": work, "base_version": work.version}
    return {**update, "pending_counts": counts, "_trace": {"packets": len(result.packets), **counts}}


def extract_facts_node(state: IngestWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    facts, counts = extract_all(
        state.get("windows", []), run_context(runtime).engine.extractor, run_context(runtime).engine.config
    )
    pending = add_counts(state.get("pending_counts"), dict(counts))
    return {"facts": facts, "pending_counts": pending, "_trace": {"facts": sum(map(len, facts)), **counts}}


def extract_metadata_node(state: IngestWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    index = state["work_index"]
    start = index.descriptors[-1].seq + 1 if index.descriptors else 0
    descriptors = metadata_all(state.get("windows", []), state.get("facts", []), ctx.engine.extractor, start)
    if ctx.writer is not None:  # add_turns: the packet documents are complete, the model embeds them meanwhile
        ctx.writer.embed_ahead(state.get("packets", []), descriptors)
    return {"descriptors": descriptors, "_trace": {"descriptors": len(descriptors)}}


def place_cells_node(state: IngestWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    layout = state["work_index"].layout
    before = len(layout)
    cells = [layout.place(d) for d in state.get("descriptors", [])]
    return {"cells": cells, "_trace": {"new_cells": len(layout) - before, "cells": len(layout)}}


def index_node(state: IngestWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Commit records (one transaction), make them searchable, and store their packet vectors (add_turns: embedded
    since extract_metadata, stored by its unit in the background)."""
    ctx = run_context(runtime)
    packets = state.get("packets", [])
    placed = list(zip(state.get("descriptors", []), state.get("cells", [])))
    counts = dict(state.get("pending_counts", {}))
    if ctx.writer is not None:  # add_turns: its unit embeds in the background and publishes at the end
        ctx.writer.commit(packets, placed, counts)
        return {"counts": counts, "_trace": {"committed": len(packets), "embedding": len(packets)}}
    attempt = state.get("attempt", 0) + 1
    try:
        with UnitOfWork(ctx.host, ctx.user) as unit:
            if state.get("work_index") is None or state.get("base_version") != unit.base_version:
                raise WriteConflict(f"user {ctx.user!r} changed while this ingest run extracted")
            unit.adopt(state["work_index"])
            unit.commit(packets, placed, counts)
    except WriteConflict:
        if attempt >= MAX_ATTEMPTS:
            raise
        return {"attempt": attempt, "retry": True, "_trace": {"conflict": attempt}}
    return {"counts": counts, "retry": False, "_trace": {"committed": len(packets), "embedded": len(packets)}}


def _after_index(state: IngestWork) -> str:
    return "packetize" if state.get("retry") else END


def _clocked(part: str, fn):
    """fn's time goes to its part of the writers' clock (runtime/writer_clock.py)."""

    def node(state: IngestWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        with run_context(runtime).engine.clock.part(part, traced=False):  # the node has its span
            return fn(state, runtime)

    return node


OPERATION = GraphOperation("create_memory", first="packetize", last="index")  # what a served run is (its span)
NODES = {
    "packetize": _clocked("packetize", packetize_node),
    "extract_facts": _clocked("extract", extract_facts_node),
    "extract_metadata": _clocked("extract", extract_metadata_node),
    "place_cells": _clocked("place", place_cells_node),
    "index": _clocked("index", index_node),
}


def build_ingest_graph(context_schema: type[MemoryContext] = MemoryContext):
    schemas = {"context_schema": context_schema, "input_schema": IngestState, "output_schema": IngestState}
    builder = stage_graph(IngestWork, NODES, OPERATION, **schemas)
    names = list(NODES)
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    builder.add_conditional_edges(names[-1], _after_index, ["packetize", END])
    return builder.compile(name="memcompile_ingest")


ingest_graph = build_ingest_graph()
