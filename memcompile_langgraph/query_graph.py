"""The query plane as a LangGraph graph: one node per stage (Algorithm 1, lines 11-23)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START

from .address.candidates import bm25_top, candidate_union
from .address.intent import enriched_query
from .address.routing import Routing, route
from .evidence.frontier import admit, frontier_window
from .evidence.pool import closed_pool
from .evidence.render import render_context
from .evidence.schedule import offline_anchors
from .evidence.scheduler import ScheduleInput
from .records import DenseHit, Intent
from .state import QueryState, QueryWork
from .text import terms
from .trace import stage_graph

if TYPE_CHECKING:
    from .memory import MemCompile

STAGES = ("intent", "bm25", "cell_routing", "candidates", "normalize", "schedule", "dense", "frontier", "render")


def intent_node(mem: "MemCompile", state: QueryState) -> dict[str, Any]:
    index = mem.index(state.get("user_id", "default"), refresh=True)
    if mem.config.use_intent:
        intent = mem.intent(state["query"], list(index.people), user_id=state.get("user_id", "default"))
    else:
        intent = Intent(query=state["query"], terms=tuple(dict.fromkeys(terms(state["query"]))))
    return {"intent": intent, "_trace": {"people": len(intent.people), "keywords": len(intent.keywords), "temporal": intent.temporal}}


def bm25_node(mem: "MemCompile", state: QueryState) -> dict[str, Any]:
    hits = bm25_top(mem.index(state.get("user_id", "default")), state["intent"], mem.config)
    return {"bm25": hits, "_trace": {"hits": len(hits)}}


def cell_routing_node(mem: "MemCompile", state: QueryState) -> dict[str, Any]:
    index = mem.index(state.get("user_id", "default"))
    seeds = [index.layout.of_descriptor[index.descriptors[pos].descriptor_id] for pos, _ in state["bm25"][: mem.config.bm25_seeds]]
    routing = route(index.layout, state["intent"], seeds, mem.config) if mem.config.use_cells else Routing((), 0, "cells off")
    return {"routing": routing, "_trace": {"opened": len(routing.opened), "pool": routing.pool, "stop": routing.stop}}


def candidates_node(mem: "MemCompile", state: QueryState) -> dict[str, Any]:
    index = mem.index(state.get("user_id", "default"))
    hits = state["bm25"] if mem.config.use_bm25_candidates else []
    cands = candidate_union(index, state["intent"], hits, state["routing"], mem.config)
    return {"candidates": cands, "_trace": {"candidates": len(cands)}}


def normalize_node(mem: "MemCompile", state: QueryWork) -> dict[str, Any]:
    index = mem.index(state.get("user_id", "default"))
    pool, scores, address = closed_pool(
        index, state["intent"], state["candidates"], state.get("dense", []), state.get("query_vectors", []), mem.config,
        state.get("similarities"),
    )
    return {"pool": pool, "fused": scores, "_trace": {"packets": len(pool), "address_packets": address}}


def _schedule_input(mem: "MemCompile", state: QueryState) -> ScheduleInput:
    index = mem.index(state.get("user_id", "default"))
    return ScheduleInput(state["query"], state["intent"], index, state.get("pool", []), state.get("dense", []), state.get("fused", {}))


def schedule_node(mem: "MemCompile", state: QueryState) -> dict[str, Any]:
    inp = _schedule_input(mem, state)
    k = min(mem.config.k0, len(inp.pool))
    if mem.config.dense_only:
        anchors = []  # A7: the frontier stage takes the dense top-K0 instead
    elif mem.config.use_scheduler:
        anchors = mem.scheduler.schedule(inp, k) if k else []
    else:
        anchors = offline_anchors(inp, k, mem.config)
    return {"anchors": anchors, "_trace": {"anchors": len(anchors)}}


def dense_node(mem: "MemCompile", state: QueryWork) -> dict[str, Any]:
    user = state.get("user_id", "default")
    mem.index(user)
    if mem.embeddings is None:
        return {"dense": [], "_trace": {"hits": 0, "disabled": True}}
    index = mem.index(user)
    if not index.packets:
        return {"dense": [], "_trace": {"hits": 0}}
    if mem.foreign_vectors(user):  # made by another model and not re-embedded yet: not comparable with ours
        mem.warn_foreign(user)
        return {"dense": [], "_trace": {"hits": 0, "foreign_vectors": True}}
    enriched = enriched_query(state["intent"])
    texts = [enriched, state["query"]] if mem.config.fusion and enriched != state["query"] else [enriched]
    vectors = mem.embeddings.embed_documents(texts) if len(texts) > 1 else [mem.embeddings.embed_query(enriched)]
    out: dict[str, Any] = {"query_vectors": [list(map(float, v)) for v in vectors]}
    if len(index.vectors) == len(index.packets):
        # each query vector meets the matrix once: D_q ranks e(q+)'s array, offline fusion reads them all
        out["similarities"] = index.vectors.query_similarities(vectors)
        hits = index.vectors.top_from(out["similarities"].arrays[0], mem.config.dense_top)
    else:  # vectors still being reconciled: ask Chroma
        hits = [DenseHit(pid, sim) for pid, sim in mem.vectors.query(user, vectors[0], mem.config.dense_top)]
    return {**out, "dense": hits, "_trace": {"hits": len(hits)}}


def frontier_node(mem: "MemCompile", state: QueryState) -> dict[str, Any]:
    inp = _schedule_input(mem, state)
    anchors = state.get("anchors", [])
    known = inp.index.packets
    dense = [h for h in state.get("dense", []) if h.packet_id in known]  # vectors not yet reconciled are ignored
    inp = ScheduleInput(inp.query, inp.intent, inp.index, inp.pool, dense, inp.scores)
    cfg = mem.config
    if cfg.dense_only:
        selected = [h.packet_id for h in dense[: cfg.k0]]
        return {"frontier_order": selected, "selected": selected, "_trace": {"window": len(dense), "added": len(selected)}}
    window = frontier_window(anchors, dense)
    if cfg.use_frontier and len(window) > len(anchors):
        order = mem.scheduler.frontier(inp, anchors, window)
    else:
        order = list(anchors)
    selected = admit(anchors, order, cfg.frontier_rank_cutoff, cfg.frontier_append_cap)
    return {"frontier_order": order, "selected": selected, "_trace": {"window": len(window), "added": len(selected) - len(anchors)}}


def render_node(mem: "MemCompile", state: QueryState) -> dict[str, Any]:
    index = mem.index(state.get("user_id", "default"))
    selected = state.get("selected", [])
    pool = {p.packet_id: p for p in state.get("pool", [])}
    dense = {h.packet_id: h.similarity for h in state.get("dense", [])}
    anchors = set(state.get("anchors", []))
    reps = {pid: p.representative for pid, p in pool.items()}
    text = render_context(index, selected, state.get("view") or "bundle", reps)
    packets = []
    for rank, pid in enumerate(selected, 1):
        p = index.packets[pid]
        score = pool[pid].score if pid in pool else dense.get(pid, 0.0)
        packets.append(
            {
                "dia_id": p.dia_id,
                "speaker": p.speaker,
                "session": p.session,
                "time": p.session_time or p.session_time_raw,
                "score": round(float(score), 6),
                "packet_id": pid,
                "rank": rank,
                "source": "anchor" if pid in anchors else "frontier",
            }
        )
    return {"context": text, "packets": packets, "_trace": {"packets": len(packets), "chars": len(text)}}


NODES = {
    "intent": intent_node,
    "bm25": bm25_node,
    "cell_routing": cell_routing_node,
    "candidates": candidates_node,
    "normalize": normalize_node,
    "schedule": schedule_node,
    "dense": dense_node,
    "frontier": frontier_node,
    "render": render_node,
}


def build_query_graph(mem: "MemCompile"):
    # the stages share QueryWork; callers and Studio see QueryState (no per-packet arrays in inputs or outputs)
    builder = stage_graph(QueryWork, NODES, mem, input_schema=QueryState, output_schema=QueryState)
    builder.add_edge(START, "intent")
    builder.add_edge("intent", "bm25")
    builder.add_edge("intent", "dense")  # the dense channel runs beside the address plane
    builder.add_edge("bm25", "cell_routing")
    builder.add_edge("cell_routing", "candidates")
    builder.add_edge(["candidates", "dense"], "normalize")  # offline fusion reads the dense channel too
    builder.add_edge("normalize", "schedule")
    builder.add_edge("schedule", "frontier")
    builder.add_edge("frontier", "render")
    builder.add_edge("render", END)
    return builder.compile(name="memcompile_query")
