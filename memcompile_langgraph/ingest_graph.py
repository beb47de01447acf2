"""The build plane as a LangGraph graph: packetize -> extract facts -> extract metadata -> place in Cells -> index."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START

from .build import extract_all, metadata_all, packetize, turn_contexts
from .embed_queue import ACTIVE
from .state import IngestState
from .trace import stage_graph

if TYPE_CHECKING:
    from .memory import MemCompile


def packetize_node(mem: "MemCompile", state: IngestState) -> dict[str, Any]:
    user = state.get("user_id", "default")
    index = mem.index(user, refresh=True)
    result = packetize(state.get("turns", []), index, user)
    contexts, trimmed = turn_contexts(result.packets, index, mem.config)
    counts = dict(result.counts)
    if trimmed:
        counts["trimmed_for_extraction"] = trimmed
    return {"packets": result.packets, "contexts": contexts, "counts": counts, "_trace": {"packets": len(result.packets), **counts}}


def extract_facts_node(mem: "MemCompile", state: IngestState) -> dict[str, Any]:
    facts, counts = extract_all(state.get("contexts", []), mem.extractor, mem.config)
    return {"facts": facts, "counts": dict(counts), "_trace": {"facts": sum(map(len, facts)), **counts}}


def extract_metadata_node(mem: "MemCompile", state: IngestState) -> dict[str, Any]:
    index = mem.index(state.get("user_id", "default"))
    start = index.descriptors[-1].seq + 1 if index.descriptors else 0
    descriptors = metadata_all(state.get("contexts", []), state.get("facts", []), mem.extractor, start)
    return {"descriptors": descriptors, "_trace": {"descriptors": len(descriptors)}}


def place_cells_node(mem: "MemCompile", state: IngestState) -> dict[str, Any]:
    index = mem.index(state.get("user_id", "default"))
    before = len(index.layout)
    cells = [index.layout.place(d) for d in state.get("descriptors", [])]
    return {"cells": cells, "_trace": {"new_cells": len(index.layout) - before, "cells": len(index.layout)}}


def index_node(mem: "MemCompile", state: IngestState) -> dict[str, Any]:
    """Commit records first (one transaction), then make them searchable, then embed packet documents."""
    user = state.get("user_id", "default")
    index = mem.index(user)
    packets, descriptors = state.get("packets", []), state.get("descriptors", [])
    placed = list(zip(descriptors, state.get("cells", [])))
    try:
        index.version = mem.records.commit(user, packets, placed, state.get("counts", {}))
    except BaseException:
        mem.invalidate(user)  # Cells were extended in memory; the store is the truth
        raise
    for p in packets:
        index.add_packet(p)
    for d in descriptors:
        index.register(d)
    index.index_packet_text([p.packet_id for p in packets])
    items = [(p, index.by_packet[p.packet_id]) for p in packets]
    queue = ACTIVE.get()
    if queue is None and mem.foreign_vectors(user):  # run outside add_turns (Studio): never join another model's vectors
        mem._reembed(index)  # every packet, these included
        return {"_trace": {"committed": len(packets), "embedded": len(index.packets)}}
    if queue is not None and mem.embeddings is not None:  # add_turns: embedded while the next batch is extracted
        queue.submit(user, items, index)
        return {"_trace": {"committed": len(packets), "embedding_queued": len(items)}}
    return {"_trace": {"committed": len(packets), "embedded": mem.embed_packets(user, items, index)}}


NODES = {
    "packetize": packetize_node,
    "extract_facts": extract_facts_node,
    "extract_metadata": extract_metadata_node,
    "place_cells": place_cells_node,
    "index": index_node,
}


def build_ingest_graph(mem: "MemCompile"):
    builder = stage_graph(IngestState, NODES, mem)
    names = list(NODES)
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder.compile(name="memcompile_ingest")

