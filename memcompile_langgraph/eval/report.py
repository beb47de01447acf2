"""report.json: every figure of a run (fractions); its config, baselines, ablations, usage and timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .aggregate import baseline_figures, budget_curves, by_category, figures
from .crossval import cross_validate
from .paper import ABLATIONS
from .runner import CHOICE_PREFIX, EvalRun

ABLATION_KEYS = (
    "questions",
    "gold_recall",
    "full_coverage",
    "full_coverage_count",
    "pool_recall",
    "mean_packets",
    "mean_context_tokens",
    "query_ms_p50",
    "judge",
    "f1",
    "bleu1",
)
USAGE_FIELDS = ("calls", "cache_hits", "failures", "prompt_tokens", "completion_tokens")


def total_usage(dialogues: dict[str, dict[str, Any]], questions: int) -> dict[str, Any]:
    """The usage ledgers of all dialogue stores summed per stage and phase (Table 8); empty when offline."""
    stages: dict[str, dict[str, Any]] = {}
    for facts in dialogues.values():
        for stage, counts in facts.get("usage", {}).get("stages", {}).items():
            row = stages.setdefault(stage, {"phase": counts.get("phase", "query"), **dict.fromkeys(USAGE_FIELDS, 0)})
            for k in USAGE_FIELDS:
                row[k] += int(counts.get(k, 0) or 0)
    if not stages:
        return {}
    phases: dict[str, dict[str, int]] = {}
    for row in stages.values():
        phase = phases.setdefault(row["phase"], dict.fromkeys(USAGE_FIELDS, 0))
        for k in USAGE_FIELDS:
            phase[k] += row[k]
    total = sum(
        phases.get(p, {}).get(k, 0) for p in ("construction", "query") for k in ("prompt_tokens", "completion_tokens")
    )
    return {
        "stages": stages,
        "phases": phases,
        "total_tokens": total,
        "tokens_per_question": round(total / questions, 1) if questions else 0.0,
    }


def build_report(run: EvalRun, source: str) -> dict[str, Any]:
    opts, bench = run.opts, run.bench
    view = opts.view
    records = run.records(run.main)
    ablations = {}
    for v in run.variants:
        if v.name.startswith(CHOICE_PREFIX):  # cross-validation choices have their own section
            continue
        f = figures(run.records(v), view)
        ablations[v.name] = {
            "label": ABLATIONS.get(v.name, ("custom switches",))[0],
            **{k: f[k] for k in ABLATION_KEYS if k in f},
        }
    ingest = [d["ingest_seconds"] for d in run.dialogues.data.values() if "ingest_seconds" in d]
    report = {
        "benchmark": bench.name,
        "tokenizer": run.tokenizer,
        "overall": figures(records, view),
        "by_category": by_category(records, bench.categories, lambda rs: figures(rs, view)),
        "baselines": baseline_figures(records, bench.categories),
        "budget_curve": budget_curves(records),
        "ablations": ablations,
        "usage": total_usage({d.user_id: run.dialogues.data.get(d.user_id, {}) for d in bench.dialogues}, len(records)),
        "dialogues": {d.user_id: run.dialogues.data.get(d.user_id, {}) for d in bench.dialogues},
        "skipped": dict(bench.skipped),
        "pending": bench.questions - len(records),  # questions without a result yet (an interrupted run)
        "timing": {"wall_seconds": round(run.wall_seconds, 2), "ingest_seconds": round(sum(ingest), 2)},
        "config": {
            "file": source,
            "profile": run.main.config.profile,
            "dialogues": [d.user_id for d in bench.dialogues],
            "variant": run.main.name,
            "view": view,
            "out": str(opts.out),
            "store": str(opts.store),
            "results": run.main.log.path.name,
            **{k: v for k, v in run.record_inputs(run.main.config).items() if k != "view"},
        },
    }
    if opts.folds:
        models = {"fusion": run.fitted_fusion, "reader": run.fitted_reader}
        fitted = {f"fitted-{name}": m["records"] for name, m in models.items() if m}
        cv = cross_validate(
            run.choice_records(), [d.user_id for d in bench.dialogues], opts.folds, bench.categories, fitted or None
        )
        for name, m in models.items():
            if m:
                cv[f"fitted_{name}"] = {k: v for k, v in m.items() if k != "records"}
        report["cross_validation"] = {**cv, "overrides": opts.choices}
    return report


def write_report(report: dict[str, Any], out: Path) -> Path:
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return path
