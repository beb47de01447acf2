"""The query plane as a LangGraph graph: one node per stage (Algorithm 1, lines 11-23).

Nodes read the run's MemoryContext (runtime/context.py): the user's index snapshot, taken once per run, and the
engine's config and components. The compiled graph is built once, here, for MemCompile.compile and for whoever
runs it with `mem.context(user_id)`; Studio and a LangGraph server run the same nodes with the served memory's
context (served.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from langgraph.graph import END, START
from langgraph.runtime import Runtime

from .address.candidates import bm25_top, candidate_union
from .address.dense import query_similarities, top_from
from .address.intent import enriched_query
from .address.routing import Routing, route
from .evidence.frontier import admit, frontier_window
from .evidence.mmr import offline_anchors
from .evidence.pool import closed_pool
from .evidence.render import fit_context, mark_notes, superseded
from .evidence.repeats import asked_scores, one_per_statement, statements_first
from .evidence.scheduler import ScheduleInput
from .evidence.updates import Supersession, current_first, newest_of_subjects
from .index.user import UserIndex
from .model import DenseHit, Intent, SelectedPacket
from .runtime.context import MemoryContext, run_context
from .runtime.telemetry import GraphOperation
from .stage_graph import stage_graph
from .state import QueryState, QueryWork
from .store.protocols import VectorStoreError
from .text.terms import terms
from .text.timeparse import said_by_time
from .users import nothing_stored_note

STAGES = ("intent", "bm25", "cell_routing", "candidates", "normalize", "schedule", "dense", "frontier", "render")


def intent_node(state: QueryState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    if ctx.engine.config.use_intent:
        intent = ctx.engine.intent(state["query"], list(ctx.snapshot().people), ctx.user)
    else:
        intent = Intent(query=state["query"], terms=tuple(dict.fromkeys(terms(state["query"]))))
    return {
        "intent": intent,
        "_trace": {"people": len(intent.people), "keywords": len(intent.keywords), "temporal": intent.temporal},
    }


def bm25_node(state: QueryState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    hits = bm25_top(ctx.snapshot(), state["intent"], ctx.engine.config)
    return {"bm25": hits, "_trace": {"hits": len(hits)}}


def cell_routing_node(state: QueryState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    index, cfg = ctx.snapshot(), ctx.engine.config
    seeds = [
        index.layout.of_descriptor[index.descriptors[pos].descriptor_id] for pos, _ in state["bm25"][: cfg.bm25_seeds]
    ]
    routing = route(index.layout, state["intent"], seeds, cfg) if cfg.use_cells else Routing((), 0, "cells off")
    return {"routing": routing, "_trace": {"opened": len(routing.opened), "pool": routing.pool, "stop": routing.stop}}


def candidates_node(state: QueryState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    cfg = ctx.engine.config
    hits = state["bm25"] if cfg.use_bm25_candidates else []
    cands = candidate_union(ctx.snapshot(), state["intent"], hits, state["routing"], cfg)
    return {"candidates": cands, "_trace": {"candidates": len(cands)}}


def said_by(index: UserIndex, as_of: str | None) -> Callable[[str], bool] | None:
    """Packet id -> whether it had been said by `as_of` (its session's time, compared as text.timeparse.said_by_time
    says; an undated turn has no time to tell, so it is left out); None when every packet counts."""
    if as_of is None:
        return None
    said = said_by_time(as_of)
    return lambda pid: (t := index.packets[pid].session_time) is not None and said(t)


def normalize_node(state: QueryWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    index = ctx.snapshot()
    cands = state["candidates"]
    if (said := said_by(index, state.get("as_of"))) is not None:  # the dense stage kept only these already
        cands = [c for c in cands if said(c.packet_id)]
    pool, scores, address = closed_pool(
        index,
        state["intent"],
        cands,
        state.get("dense", []),
        state.get("query_vectors", []),
        ctx.engine.config,
        state.get("similarities"),
        ctx.engine.reader,
        said,
    )
    # copies of a turn take one slot from here on: the pool and D_q hold the newest copy once
    dense = state.get("dense", [])
    if ctx.engine.config.one_slot_per_statement:
        pool, dense, scores = one_per_statement(ctx.snapshot(), pool, dense, scores)
    trace = {"packets": len(pool), "address_packets": address}
    return {"pool": pool, "dense": dense, "fused": scores, "_trace": trace}


def _schedule_input(state: QueryState, ctx: MemoryContext) -> ScheduleInput:
    return ScheduleInput(
        state["query"],
        state["intent"],
        ctx.snapshot(),
        state.get("pool", []),
        state.get("dense", []),
        state.get("fused", {}),
    )


def schedule_node(state: QueryState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    cfg = ctx.engine.config
    inp = _schedule_input(state, ctx)
    k = min(cfg.k0, len(inp.pool))
    if cfg.dense_only:
        anchors: list[str] = []  # A7: the frontier stage takes the dense top-K0 instead
    elif cfg.use_scheduler:
        anchors = ctx.engine.scheduler.schedule(inp, k) if k else []
    else:
        anchors = offline_anchors(inp, k, cfg)
    return {"anchors": anchors, "_trace": {"anchors": len(anchors)}}


def dense_node(state: QueryWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    engine, index, cfg = ctx.engine, ctx.snapshot(), ctx.engine.config
    if engine.embeddings is None:
        return {"dense": [], "_trace": {"hits": 0, "disabled": True}}
    if not index.packets:
        return {"dense": [], "_trace": {"hits": 0}}
    if engine.foreign_vectors(ctx.user):  # made by another model and not re-embedded yet: not comparable with ours
        engine.warn_foreign(ctx.user)
        return {"dense": [], "_trace": {"hits": 0, "foreign_vectors": True}}
    enriched = enriched_query(state["intent"])
    texts = [enriched, state["query"]] if cfg.fusion and enriched != state["query"] else [enriched]
    vectors = engine.embeddings.embed_documents(texts) if len(texts) > 1 else [engine.embeddings.embed_query(enriched)]
    out: dict[str, Any] = {"query_vectors": [list(map(float, v)) for v in vectors]}
    if len(index.vectors) == len(index.packets):
        # each query vector meets the matrix once: D_q ranks e(q+)'s array, offline fusion reads them all
        out["similarities"] = query_similarities(index.vectors, vectors)
        hits = top_from(index.vectors, out["similarities"].arrays[0], cfg.dense_top)
    else:  # vectors still being reconciled: ask the vector store
        try:
            found = engine.vectors.query(ctx.user, vectors[0], cfg.dense_top, sources=True)
        except VectorStoreError as exc:  # damaged or unreachable: the lexical channels answer alone
            engine.warn_once(f"vectors:{ctx.user}", f"dense channel off for user {ctx.user!r}: {exc}")
            return {"dense": [], "_trace": {"hits": 0, "vectors_unavailable": True}}
        # as in the index: a vector built from other content than its packet's document now is not served
        ids = [pid for pid, _, _ in found if pid in index.packets]
        sources = [source for pid, _, source in found if pid in index.packets]
        ok = dict(zip(ids, engine.sources_match(index, ids, sources)))
        hits = [DenseHit(pid, sim) for pid, sim, _ in found if ok.get(pid, True)]
    if (said := said_by(index, state.get("as_of"))) is not None:
        hits = [h for h in hits if said(h.packet_id)]
    return {**out, "dense": hits, "_trace": {"hits": len(hits)}}


def frontier_node(state: QueryWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    cfg = ctx.engine.config
    inp = _schedule_input(state, ctx)
    anchors = state.get("anchors", [])
    dense = [h for h in state.get("dense", []) if h.packet_id in inp.index.packets]  # unreconciled vectors ignored
    inp = ScheduleInput(inp.query, inp.intent, inp.index, inp.pool, dense, inp.scores)
    if cfg.dense_only:
        selected = [h.packet_id for h in dense[: cfg.k0]]
        return {
            "frontier_order": selected,
            "selected": selected,
            "_trace": {"window": len(dense), "added": len(selected)},
        }
    window = frontier_window(anchors, dense)
    if cfg.use_frontier and len(window) > len(anchors):
        order = ctx.engine.scheduler.frontier(inp, anchors, window)
    else:
        order = list(anchors)
    # E_q holds at most K0 + K_Delta packets (anchors past K0 took the frontier's slots: evidence/mmr.py)
    cap = min(cfg.frontier_append_cap, max(0, cfg.k0 + cfg.frontier_append_cap - len(anchors)))
    selected = admit(anchors, order, cfg.frontier_rank_cutoff, cap)
    newest: dict[str, Supersession] = {}
    if cfg.update_newest_cosine and cfg.fusion:
        selected, newest = newest_of_subjects(inp, selected, cfg)
    if cfg.one_slot_per_statement:
        selected = statements_first(inp.index, selected)
    return {
        "frontier_order": order,
        "selected": selected,
        "newest": {a: asdict(s) for a, s in newest.items()},
        "_trace": {"window": len(window), "added": len(selected) - len(anchors)},
    }


def render_node(state: QueryWork, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    ctx = run_context(runtime)
    index = ctx.snapshot()
    selected = state.get("selected", [])
    pool = {p.packet_id: p for p in state.get("pool", [])}
    dense = {h.packet_id: h.similarity for h in state.get("dense", [])}
    anchors = set(state.get("anchors", []))
    reps = {pid: p.representative for pid, p in pool.items()}
    budget = state.get("max_tokens") or ctx.engine.config.context_max_tokens
    found = superseded(index, selected, state["query"], ctx.engine.llm_updates)  # knowledge-update marks
    # and the older statements whose subject's newest statement the frontier called in: a rule's mark naming the
    # values stays first, a mark of the subject alone (no value named) yields to the one called in
    called = {a: Supersession(**s) for a, s in state.get("newest", {}).items() if s["new"] in selected}
    found = {
        **{a: s for a, s in found.items() if not s.new_values},
        **called,
        **{a: s for a, s in found.items() if s.new_values},
    }
    selected = current_first(selected, found)  # the current statement is read before the one it supersedes
    view = state.get("view") or "bundle"
    fitted = fit_context(index, selected, view, reps, state["query"], budget, mark_notes(index, found))
    text = fitted.text()
    scores = {pid: pool[pid].score if pid in pool else dense.get(pid, 0.0) for pid in selected}
    if ctx.engine.config.one_slot_per_statement:
        scores = asked_scores(index, selected, scores)
    packets = []
    for rank, pid in enumerate(selected, 1):
        p = index.packets[pid]
        score = scores[pid]
        selected_packet = SelectedPacket(
            dia_id=p.dia_id,
            speaker=p.speaker,
            session=p.session,
            time=p.session_time or p.session_time_raw,
            score=round(float(score), 6),
            packet_id=pid,
            rank=rank,
            source="anchor" if pid in anchors else "frontier",
            shown=fitted.shown[rank - 1],
            superseded_by=index.packets[found[pid].new].dia_id if pid in found else None,
        )
        packets.append(selected_packet.to_dict())  # the state holds the JSON form a served run outputs
    trace = {"packets": len(packets), "chars": len(text), "superseded": len(found), "cut": sum(fitted.cut)}
    out = {"context": text, "packets": packets, "selected": selected, "_trace": trace}
    return {**out, "note": nothing_stored_note(ctx.user)} if not index.packets else out


OPERATION = GraphOperation("search_memory", first="intent", last="render")  # what a served run is (its span)
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


def build_query_graph(context_schema: type[MemoryContext] = MemoryContext):
    # the stages share QueryWork; callers and Studio see QueryState (no per-packet arrays in inputs or outputs)
    schemas = {"context_schema": context_schema, "input_schema": QueryState, "output_schema": QueryState}
    builder = stage_graph(QueryWork, NODES, OPERATION, **schemas)
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


query_graph = build_query_graph()
