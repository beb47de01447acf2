"""One question through the query graph: the record (one JSONL line) every report figure is computed from."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..evidence.normalize import normalize
from ..evidence.render import VIEWS, fit_context, mark_notes, update_marks
from ..evidence.updates import Supersession
from ..model import SelectedPacket
from .baselines import BASELINE_KS
from .dataset import Question
from .metrics import answer_coverage, budget_duplication

if TYPE_CHECKING:
    from ..index.user import UserIndex
    from ..memory import MemCompile

DIAGNOSTIC_K = 10  # Table 3 / Table 5 controlled selection depth
BUDGET_CURVE = (2000, 1000, 500)  # context budgets (tokens) the same selection is also rendered at


def _found(index: UserIndex, gold: set[str], packet_ids: list[str]) -> list[str]:
    """The gold dia_ids among these packets (what recall needs, without storing a 100-packet pool)."""
    return sorted({index.packets[p].dia_id for p in packet_ids if p in index.packets} & gold)


def _dedup_by_text(index: UserIndex, candidates: list[Any]) -> list[str]:
    """Exact-text deduplication of claim hits (Table 3's second row): a later hit with the same claim text drops."""
    seen, out = set(), []
    for c in candidates:
        text = " ".join(index.descriptors[index.position[c.descriptor_id]].claim.lower().split())
        if text not in seen:
            seen.add(text)
            out.append(c.packet_id)
    return out


def diagnostics(
    index: UserIndex, gold: set[str], state: dict[str, Any], k: int = DIAGNOSTIC_K
) -> dict[str, dict[str, Any]]:
    """Slots, distinct sources and gold hits of the first k entries at each controlled stage of Table 3."""
    stages = {
        "unnormalized": [c.packet_id for c in state.get("candidates", [])],
        "dedup": _dedup_by_text(index, state.get("candidates", [])),
        # Eq. 8-10 over the claim hits themselves: the closed pool may also hold fused or dense proposals
        "normalized": [p.packet_id for p in normalize(state.get("candidates", []), index.layout.of_descriptor)],
        "anchors": list(state.get("anchors", [])),
    }
    out = {}
    for name, pids in stages.items():
        slots, unique, _ = budget_duplication(pids, k)
        out[name] = {"slots": slots, "unique": unique, "gold": _found(index, gold, pids[:k])}
    return out


def evaluate_question(
    mem: MemCompile,
    q: Question,
    view: str,
    count_tokens: Callable[[str], int],
    baseline: dict[str, list[str]] | None = None,
    light: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(record, query state) for one question; the state carries the context and intent the model path needs.
    A light record (a cross-validation choice) holds what selection and recall need: no diagnostics or tokens."""
    started = time.perf_counter()
    state = mem.query_graph.invoke({"query": q.question, "view": view}, context=mem.context(q.dialogue))
    ms = (time.perf_counter() - started) * 1000
    index = mem.index(q.dialogue)
    gold = set(q.gold)
    selected = list(state.get("selected", []))
    if light:
        return {
            "qid": q.qid,
            "dialogue": q.dialogue,
            "category": q.category,
            "question": q.question,
            "gold": list(q.gold),
            "selected": [index.packets[p].dia_id for p in selected],
            "replaced": list(q.replaced),
            "ms": round(ms, 3),
        }, state
    reps = {p.packet_id: p.representative for p in state.get("pool", [])}
    frontier_pool = list(dict.fromkeys([*state.get("anchors", []), *(h.packet_id for h in state.get("dense", []))]))
    whole = fit_context(index, selected, view, reps).text()
    context = state.get("context", "")
    marks = update_marks(index, selected, q.question, mem.engine.llm_updates)  # the run's (a model's: its cache)
    # and the older statements whose subject's newest statement the selection called in, as the render stage marks them
    called = {a: Supersession(**s) for a, s in state.get("newest", {}).items() if s["new"] in selected}
    marks = {**mark_notes(index, called), **marks}
    curve = {b: fit_context(index, selected, view, reps, q.question, b, marks).text() for b in BUDGET_CURVE}
    held = "\n".join(index.packets[index.by_dia[g]].text for g in q.gold if g in index.by_dia)  # the gold turns
    record: dict[str, Any] = {
        "qid": q.qid,
        "dialogue": q.dialogue,
        "category": q.category,
        "question": q.question,
        "answer": q.answer,
        "gold": list(q.gold),
        "gold_missing": [g for g in q.gold if g not in index.by_dia],  # ids the dialogue does not hold
        "temporal": bool(getattr(state.get("intent"), "temporal", False)),
        "selected": [index.packets[p].dia_id for p in selected],
        "pool_packets": len(state.get("pool", [])),
        "pool_gold": _found(index, gold, [p.packet_id for p in state.get("pool", [])]),
        "frontier_pool_packets": len(frontier_pool),
        "frontier_pool_gold": _found(index, gold, frontier_pool),
        "k10": diagnostics(index, gold, state),
        "tokens": {v: count_tokens(fit_context(index, selected, v, reps).text()) for v in VIEWS},
        # the same packets whole and as the budget cut them (the context the reader gets)
        "replaced": list(q.replaced),
        # superseded packets as the run marked them (the model's decision when the memory has one)
        "marked": sorted(p.dia_id for p in map(SelectedPacket.from_dict, state.get("packets", [])) if p.superseded_by),
        "budget": {
            "max_tokens": mem.config.context_max_tokens,
            "tokens": count_tokens(context),
            "coverage_whole": answer_coverage(q.answer, whole, held),
            "coverage": answer_coverage(q.answer, context, held),
            "by_max_tokens": {
                str(b): {"tokens": count_tokens(c), "coverage": answer_coverage(q.answer, c, held)}
                for b, c in curve.items()
            },
        },
        "ms": round(ms, 3),
        "stage_ms": {stage: info.get("ms", 0.0) for stage, info in state.get("trace", {}).items()},
    }
    if baseline is not None:
        record["baselines"] = baseline
        record["baseline_tokens"] = {
            name: {
                str(k): count_tokens(fit_context(index, [index.by_dia[d] for d in ranked[:k]], "raw").text())
                for k in BASELINE_KS
            }
            for name, ranked in baseline.items()
        }
    return record, state
