"""Per-question records -> the report's figures (fractions in [0, 1]; report.md shows percentages)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import fmean
from typing import Any

from ..evidence.render import VIEWS
from .baselines import BASELINE_KS
from .metrics import full_coverage, gold_recall, percentile
from .question import DIAGNOSTIC_K

BUDGET = 12  # packet budget the curves run to: K0 = 10 anchors + K_delta = 2 (Eq. 13-14)
OPEN_DOMAIN = "open-domain"  # left out of F1 / BLEU-1, as in the paper


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return round(fmean(values), 6) if values else 0.0


def _with_gold(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["gold"]]


def recall_figures(records: Sequence[dict[str, Any]], ranked: Any) -> dict[str, Any]:
    """gold_recall / full_coverage of the packets `ranked(record)` returns, over questions that have gold."""
    g = _with_gold(records)
    covered = sum(full_coverage(r["gold"], ranked(r)) for r in g)
    return {
        "gold_recall": _mean(gold_recall(r["gold"], ranked(r)) for r in g),
        "full_coverage": round(covered / len(g), 6) if g else 0.0,
        "full_coverage_count": covered,
        "questions_with_gold": len(g),
    }


def diagnostics(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Table 3 / Table 5 at K=10: distinct sources and DBR over questions whose stage filled all K slots."""
    out = {}
    for stage in ("unnormalized", "dedup", "normalized", "anchors"):
        eligible = [r["k10"][stage] for r in records if r["k10"][stage]["slots"] == DIAGNOSTIC_K]
        out[stage] = {
            "eligible": len(eligible),
            "unique_sources": _mean(s["unique"] for s in eligible),
            "dbr": _mean((s["slots"] - s["unique"]) / s["slots"] for s in eligible),
            "affected": _mean(float(s["unique"] < s["slots"]) for s in eligible),
            "gold_recall": recall_figures(records, lambda r, st=stage: r["k10"][st]["gold"])["gold_recall"],
        }
    return out


def answer_figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Judge over every answered question; token F1 and BLEU-1 without open-domain ones."""
    answered = [r for r in records if "judge" in r]
    if not answered:
        return {}
    scored = [r for r in answered if r["category"] != OPEN_DOMAIN]
    return {
        "answered": len(answered),
        "judge": _mean(float(r["judge"]) for r in answered),
        "f1": _mean(r["f1"] for r in scored) if scored else None,
        "bleu1": _mean(r["bleu1"] for r in scored) if scored else None,
    }


def _kept(cut: float, whole: float) -> float | None:
    return round(cut / whole, 6) if whole else None


def budget_figures(records: Sequence[dict[str, Any]], view: str) -> dict[str, Any]:
    """Context tokens (median) and answer coverage (mean) of the whole packets and of the budgeted context; the same
    at each budget of the curve (question.BUDGET_CURVE) over the same selection."""
    rs = [r for r in records if "budget" in r]
    if not rs:
        return {}
    covered = [r["budget"] for r in rs if r["budget"]["coverage"] is not None]
    whole = _mean(b["coverage_whole"] for b in covered)
    cut = _mean(b["coverage"] for b in covered)
    curve = [r["budget"]["by_max_tokens"] for r in rs if "by_max_tokens" in r["budget"]]  # older records lack it
    points = {}
    for b in curve[0] if len(curve) == len(rs) else ():
        at = _mean(c[b]["coverage"] for c in curve if c[b]["coverage"] is not None)
        points[b] = {
            "median_tokens": percentile([c[b]["tokens"] for c in curve], 50),
            "answer_coverage": at,
            "coverage_kept": _kept(at, whole),
        }
    return {
        "max_tokens": rs[0]["budget"]["max_tokens"],
        "median_tokens_whole": percentile([r["tokens"][view] for r in rs], 50),
        "median_tokens": percentile([r["budget"]["tokens"] for r in rs], 50),
        "answer_coverage_whole": whole,
        "answer_coverage": cut,
        "coverage_kept": _kept(cut, whole),
        "cut_contexts": sum(r["budget"]["tokens"] < r["tokens"][view] for r in rs),
        "by_max_tokens": points,
    }


def update_figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Supersession marks: on how many rendered packets, and for knowledge updates whether the current statement is
    in the context and, where a replaced one is there too, whether that one is marked superseded."""
    rs = [r for r in records if "marked" in r]
    if not rs:
        return {}
    out: dict[str, Any] = {
        "marked_packets": sum(len(r["marked"]) for r in rs),
        "marked_share": _mean([len(r["marked"]) / max(1, len(r["selected"])) for r in rs]),
    }
    updates = [r for r in _with_gold(rs) if r.get("replaced")]
    if updates:
        both = [r for r in updates if set(r["gold"]) & set(r["selected"]) and set(r["replaced"]) & set(r["selected"])]
        marked = sum(bool(set(r["replaced"]) & set(r["marked"])) for r in both)
        out.update(
            {
                "update_questions": len(updates),
                "new_in_context": _mean(float(bool(set(r["gold"]) & set(r["selected"]))) for r in updates),
                "old_also_in_context": len(both),
                "old_marked": marked,
                "old_marked_share": round(marked / len(both), 6) if both else None,
            }
        )
    return out


def figures(records: Sequence[dict[str, Any]], view: str) -> dict[str, Any]:
    """Every per-question figure of the system for one group of records."""
    if not records:
        return {"questions": 0}
    g = _with_gold(records)
    diag = diagnostics(records)
    ms = [r["ms"] for r in records]
    stages = sorted({s for r in records for s in r["stage_ms"]})
    out = {
        "questions": len(records),
        **recall_figures(records, lambda r: r["selected"]),
        "pool_recall": _mean(len(r["pool_gold"]) / len(set(r["gold"])) for r in g),
        "frontier_pool_recall": _mean(len(r["frontier_pool_gold"]) / len(set(r["gold"])) for r in g),
        "unique_sources": diag["unnormalized"]["unique_sources"],
        "dbr": diag["unnormalized"]["dbr"],
        "normalized_unique_sources": diag["normalized"]["unique_sources"],
        "normalized_dbr": diag["normalized"]["dbr"],
        "mean_packets": _mean(len(r["selected"]) for r in records),
        "mean_pool_packets": _mean(r["pool_packets"] for r in records),
        "mean_frontier_pool_packets": _mean(r["frontier_pool_packets"] for r in records),
        "mean_context_tokens": _mean(r["tokens"][view] for r in records),
        "context_tokens_by_view": {v: _mean(r["tokens"][v] for r in records) for v in VIEWS},
        "query_ms_p50": round(percentile(ms, 50), 3),
        "query_ms_p95": round(percentile(ms, 95), 3),
        "stage_ms": {
            s: {"p50": round(percentile(x, 50), 3), "p95": round(percentile(x, 95), 3)}
            for s in stages
            for x in [[r["stage_ms"].get(s, 0.0) for r in records]]
        },
        "gold_ids_missing_from_dialogue": sum(len(r["gold_missing"]) for r in records),
        "k10": diag,
    }
    out["budget"] = budget_figures(records, view)
    out["updates"] = update_figures(records)
    out.update(answer_figures(records))
    return out


def by_category(records: Sequence[dict[str, Any]], categories: Sequence[str], summarize: Any) -> dict[str, Any]:
    """The benchmark's categories in report order, then any other category the records carry."""
    names = list(categories) + sorted({r["category"] for r in records} - set(categories))
    return {c: summarize([r for r in records if r["category"] == c]) for c in names}


def _baseline_summary(records: Sequence[dict[str, Any]], name: str, k: int) -> dict[str, Any]:
    return {
        "questions": len(records),
        **recall_figures(records, lambda r: r["baselines"][name][:k]),
        "mean_context_tokens": _mean(r["baseline_tokens"][name][str(k)] for r in records),
    }


def baseline_figures(records: Sequence[dict[str, Any]], categories: Sequence[str]) -> dict[str, Any]:
    """Raw-turn baselines at top-10 and top-12, overall and per category, with their context tokens."""
    out = {}
    for name in sorted({n for r in records for n in r.get("baselines", {})}):
        rs = [r for r in records if name in r.get("baselines", {})]
        for k in BASELINE_KS:
            summary = _baseline_summary(rs, name, k)
            summary["by_category"] = by_category(rs, categories, lambda group: _baseline_summary(group, name, k))
            out[f"{name}_top{k}"] = summary
    return out


def budget_curves(records: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Gold Recall of the first k packets, k = 1..12, along the system's selection order and each baseline's ranking."""
    g = _with_gold(records)
    curves = {
        "k": list(range(1, BUDGET + 1)),
        "system": [recall_figures(g, lambda r, k=k: r["selected"][:k])["gold_recall"] for k in range(1, BUDGET + 1)],
    }
    for name in sorted({n for r in g for n in r.get("baselines", {})}):
        rs = [r for r in g if name in r.get("baselines", {})]
        curves[name] = [
            recall_figures(rs, lambda r, k=k: r["baselines"][name][:k])["gold_recall"] for k in range(1, BUDGET + 1)
        ]
    return curves
