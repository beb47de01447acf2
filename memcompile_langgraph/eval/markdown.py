"""report.md: the paper-style tables of a run, beside the paper's published figures and the run's own baselines."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

from . import paper

DASH = "—"
# the LoCoMo conversations the offline fusion weights (MemCompileConfig.fusion_*) were chosen on: the dev split
FUSION_TUNED_ON = frozenset(("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48"))
PAPER_SECTION = "Reported by the paper, LLM stages, gpt-4o-mini"


def pct(x: Any) -> str:
    return DASH if x is None else f"{100 * x:.2f}"


def num(x: Any, digits: int = 1) -> str:
    return DASH if x is None else f"{x:.{digits}f}"


def paper_pct(x: Any) -> str:
    return DASH if x is None else f"{x:.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def tuned_on(report: dict[str, Any]) -> str:
    """Whether this run's questions are ones the offline weights were chosen on (then no held-out estimate)."""
    cfg = report["config"]
    if not cfg.get("config", {}).get("fusion", True):
        return "no: fusion off, the paper's offline path has no weights chosen on data"
    seen = FUSION_TUNED_ON.intersection(cfg["dialogues"]) if report["benchmark"] == "locomo" else set()
    if not seen:
        return "no: none of these dialogues is one the offline fusion weights were chosen on"
    share = "all" if len(seen) == len(cfg["dialogues"]) else f"{len(seen)} of {len(cfg['dialogues'])}"
    return (
        f"**yes** ({share} dialogues): the offline fusion weights were chosen on the LoCoMo dev split these "
        "conversations belong to, so these figures are not a held-out estimate"
    )


def _setup(report: dict[str, Any]) -> str:
    cfg, o = report["config"], report["overall"]
    model = cfg.get("llm") or "offline (heuristic extraction, deterministic scheduler)"
    answers = cfg.get("answer_llm") or "none (retrieval metrics only)"
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(report["skipped"].items())) or "none"
    shown = ", ".join(cfg["dialogues"][:10]) + (", ..." if len(cfg["dialogues"]) > 10 else "")
    lines = [
        f"- measured on: `{cfg['file']}`, {len(cfg['dialogues'])} dialogues ({shown}), {o['questions']} questions "
        f"({o.get('questions_with_gold', 0)} with gold evidence); left out: {skipped}",
        f"- weights tuned on these questions: {tuned_on(report)}",
        f"- profile: {cfg.get('profile', 'default')}; setting: {cfg['variant']} "
        f"({report['ablations'][cfg['variant']]['label']}), reader view: {cfg['view']}",
        f"- build and query LLM: {model}; answer model: {answers}; judge: {cfg.get('judge_llm') or DASH}",
        f"- embeddings: {cfg.get('embeddings') or 'none (dense channel off)'}; context tokens counted with {report['tokenizer']}",
        f"- wall time of this invocation {report['timing']['wall_seconds']:.1f} s; store builds {report['timing']['ingest_seconds']:.1f} s in total",
    ]
    if report.get("pending"):
        lines.append(f"- **{report['pending']} questions have no result yet**: rerun the same command to resume")
    return "\n".join(lines)


def _recall_table(report: dict[str, Any], categories: Sequence[str]) -> str:
    header = ["retriever", *categories, "overall", "full coverage", "packets", "context tokens"]
    o = report["overall"]
    rows = [
        [
            "MemCompile (this run)",
            *(pct(report["by_category"][c].get("gold_recall")) for c in categories),
            pct(o.get("gold_recall")),
            f"{pct(o.get('full_coverage'))} ({o.get('full_coverage_count', 0)})",
            num(o.get("mean_packets")),
            num(o.get("mean_context_tokens")),
        ]
    ]
    for name, b in report["baselines"].items():
        k = name.rsplit("top", 1)[-1]
        rows.append(
            [
                f"raw-turn {name.split('_')[0]} top-{k}",
                *(pct(b["by_category"].get(c, {}).get("gold_recall")) for c in categories),
                pct(b["gold_recall"]),
                f"{pct(b['full_coverage'])} ({b['full_coverage_count']})",
                k,
                num(b["mean_context_tokens"]),
            ]
        )
    return table(header, rows)


def _answers_table(report: dict[str, Any], categories: Sequence[str]) -> str:
    header = [
        "",
        *(f"{c} {m}" for c in categories for m in ("F1", "BLEU-1", "J")),
        "overall F1",
        "overall BLEU-1",
        "overall J",
    ]
    groups = [*(report["by_category"][c] for c in categories), report["overall"]]
    rows = [["this run", *(pct(g.get(m)) for g in groups for m in ("f1", "bleu1", "judge"))]]
    return table(header, rows)


def _ablation_table(report: dict[str, Any]) -> str:
    rows = [
        [
            name,
            a["label"],
            pct(a.get("gold_recall")),
            pct(a.get("full_coverage")),
            num(a.get("mean_packets")),
            num(a.get("mean_context_tokens")),
            pct(a.get("judge")),
        ]
        for name, a in report["ablations"].items()
    ]
    return table(["", "setting", "Recall", "full coverage", "packets", "context tokens", "J"], rows)


STAGES = {
    "unnormalized": "Unnormalized claim top-K",
    "dedup": "Exact-text deduplication",
    "normalized": "Source-normalized top-K",
    "anchors": "+ Complementary scheduler (A_0)",
}
FINAL_STAGE = "+ bounded frontier (E_q, final)"
VIEWS = {"claim": "Representative claim", "raw": "Raw SourcePacket", "bundle": "Full claim bundle"}


def _selection_table(report: dict[str, Any]) -> str:
    k10, o = report["overall"]["k10"], report["overall"]
    rows = [
        [
            label,
            num(k10[stage]["unique_sources"], 3),
            pct(k10[stage]["dbr"]),
            pct(k10[stage]["gold_recall"]),
            str(k10[stage]["eligible"]),
        ]
        for stage, label in STAGES.items()
    ]
    rows.append([FINAL_STAGE, num(o["mean_packets"], 3), "0.00", pct(o["gold_recall"]), str(o["questions"])])
    return table(["controlled stage (K=10)", "unique", "DBR", "Gold", "eligible"], rows)


def _views_table(report: dict[str, Any]) -> str:
    o, view = report["overall"], report["config"]["view"]
    rows = []
    for v, label in VIEWS.items():
        mine = o if v == view else {}
        rows.append(
            [
                label,
                num(o["context_tokens_by_view"][v]),
                pct(mine.get("f1")),
                pct(mine.get("bleu1")),
                pct(mine.get("judge")),
            ]
        )
    return table(["view (same packets)", "context tokens", "F1", "BLEU-1", "J"], rows)


def _pool_table(report: dict[str, Any]) -> str:
    o = report["overall"]
    rows = [
        ["closed pool U_q", pct(o["pool_recall"]), num(o["mean_pool_packets"])],
        ["frontier window A_0 ∪ D_q", pct(o["frontier_pool_recall"]), num(o["mean_frontier_pool_packets"])],
        ["selection E_q", pct(o["gold_recall"]), num(o["mean_packets"])],
    ]
    latency = [[stage, num(v["p50"], 2), num(v["p95"], 2)] for stage, v in o["stage_ms"].items()]
    latency.append(["whole query", num(o["query_ms_p50"], 2), num(o["query_ms_p95"], 2)])
    return table(["packets", "Gold Recall", "mean size"], rows) + "\n\n" + table(["stage", "ms p50", "ms p95"], latency)


def _budget_table(budget: dict[str, Any]) -> str:
    rows = [["whole packets", num(budget["median_tokens_whole"]), pct(budget["answer_coverage_whole"]), "100.00"]]
    rows += [
        [f"{int(b):,} tokens", num(p["median_tokens"]), pct(p["answer_coverage"]), pct(p["coverage_kept"])]
        for b, p in budget["by_max_tokens"].items()
    ]
    return table(["context", "median tokens", "answer coverage", "coverage kept"], rows)


def _usage_table(usage: dict[str, Any]) -> str:
    rows = [
        [stage, u["phase"], str(u["calls"]), str(u["cache_hits"]), str(u["prompt_tokens"] + u["completion_tokens"])]
        for stage, u in sorted(usage["stages"].items(), key=lambda kv: (kv[1]["phase"], kv[0]))
    ]
    rows.append(
        ["non-judge total", "", "", "", f"{usage['total_tokens']} ({usage['tokens_per_question']} per question)"]
    )
    return table(["stage", "phase", "calls", "cache hits", "tokens"], rows)


def mean_sd(s: dict[str, Any]) -> str:
    return DASH if s.get("mean") is None else f"{pct(s['mean'])} ± {pct(s['sd'])}"


def joint_lines(joint: dict[str, Any]) -> list[str]:
    """`memcompile eval joint`: per fold the choice selected on the other folds of every benchmark and its held-out
    figure on each, then every choice's per-fold mean and spread on each benchmark and their mean."""
    names = joint["benchmarks"]
    folds = [[str(f["fold"]), f["selected"], *(pct(f[n]) for n in names)] for f in joint["per_fold"]]
    folds.append(["mean ± sd", "", *(mean_sd(joint["selected"][n]) for n in names)])
    per_choice = joint["per_choice"]
    rows = [  # joint_selection refuses a choice without a scored fold: every mean exists
        [c, *(mean_sd(per_choice[c][n]) for n in names), pct(fmean(per_choice[c][n]["mean"] for n in names))]
        for c in joint["choices"]
    ]
    return [
        f"## {joint['folds']}-fold cross-validation over {', '.join(names)} together (Gold Recall, %)",
        "",
        "Fold i holds out fold i of every benchmark; its choice has the best mean over the benchmarks of their other "
        "folds' Gold Recall.",
        "",
        table(["fold", "selected", *names], folds),
        "",
        table(["choice", *names, "mean"], rows),
    ]


def cv_section(report: dict[str, Any], categories: Sequence[str]) -> list[str]:
    """Cross-validation over dialogues: per fold the choice selected on the other folds and its held-out figures,
    then every choice's own per-fold mean and spread beside the default's."""
    cv = report["cross_validation"]
    folds = [
        [
            str(f["fold"]),
            ", ".join(f["dialogues"]),
            str(f["questions"]),
            f["selected"],
            pct(f["gold_recall"]),
            pct(cv["per_choice"]["default"]["fold_gold_recall"][f["fold"] - 1]),
            *(pct(f["by_category"].get(c)) for c in categories),
        ]
        for f in cv["per_fold"]
    ]
    sel = cv["selected"]
    folds.append(
        [
            "mean ± sd",
            "",
            "",
            "",
            mean_sd(sel["gold_recall"]),
            mean_sd(cv["per_choice"]["default"]["gold_recall"]),
            *(mean_sd(sel["by_category"].get(c, {})) for c in categories),
        ]
    )
    rows = [
        [
            name,
            mean_sd(c["gold_recall"]),
            mean_sd(c["delta_vs_default"]),
            f"{c['folds_better']} / {c['folds_worse']}",
            pct(c["gold_recall"]["pooled"]),
            *(mean_sd(c["by_category"].get(cat, {})) for cat in categories),
            pct(c["update_selected"]["mean"]),
        ]
        for name, c in cv["per_choice"].items()
    ]
    dev = cv["all_dev"]
    return [
        f"## {cv['folds']}-fold cross-validation over dialogues (Gold Recall, %)",
        f"Each fold is scored with the choice that has the best Gold Recall on the other folds' questions. Chosen on "
        f"all dialogues (the dev total): {dev['selected']} ({pct(dev['gold_recall'])}; default "
        f"{pct(dev['default_gold_recall'])}).",
        table(["fold", "held-out dialogues", "questions", "selected", "Recall", "default", *categories], folds),
        "Every choice at fixed setting, per held-out fold (mean ± sd over folds; Δ is paired with the default, fold by "
        "fold; pooled = all questions once):",
        table(
            ["choice", "Recall", "Δ vs default", "folds +/-", "pooled", *categories, "update selected"],
            rows,
        ),
    ]


def paper_section(report: dict[str, Any]) -> list[str]:
    """The paper's published figures, apart from this run's: its LLM pipeline on the full benchmark."""
    benchmark, llm = report["benchmark"], report["config"].get("llm")
    if benchmark == "longmemeval":
        rows = [[c, paper_pct(j)] for c, j in paper.TABLE7.items()]
        return [f"## {PAPER_SECTION} (LongMemEval-S, Table 7; not measured here)", table(["question type", "J"], rows)]
    if benchmark != "locomo":
        return []
    fc, a0 = paper.FULL_COVERAGE, paper.TABLE2["A0"]
    cats = [c for c in paper.TABLE1 if c != "overall"]
    return [
        f"## {PAPER_SECTION} (LoCoMo, all ten conversations, {fc['questions']:,} questions; not measured here)",
        "The paper's pipeline extracts, reads intents and schedules with gpt-4o-mini over the whole benchmark. "
        + (
            f"This run used {llm} on the dialogues listed above"
            if llm
            else "This run is offline: heuristic components replace those stages"
        )
        + ", so its figures above are not expected to match these.",
        table(
            ["", "Gold Recall", "full coverage", "packets"],
            [
                [
                    "MemCompile (paper, App. C.2)",
                    paper_pct(a0["gold_recall"]),
                    f"{100 * fc['count'] / fc['questions']:.2f} ({fc['count']:,})",
                    "<= 12",
                ]
            ],
        ),
        "Table 1 (answers, %):",
        table(
            [
                "",
                *(f"{c} {m}" for c in cats for m in ("F1", "BLEU-1", "J")),
                "overall F1",
                "overall BLEU-1",
                "overall J",
            ],
            [
                [
                    "paper",
                    *(paper_pct(paper.TABLE1[c].get(m)) for c in [*cats, "overall"] for m in ("f1", "bleu1", "judge")),
                ]
            ],
        ),
        "Table 2 (pipeline paths):",
        table(
            ["", "setting", "F1", "BLEU-1", "Recall", "J"],
            [
                [n, paper.ABLATIONS[n][0], *(paper_pct(p[m]) for m in ("f1", "bleu1", "gold_recall", "judge"))]
                for n, p in paper.TABLE2.items()
            ],
        ),
        "Table 3 (controlled selection at K=10):",
        table(
            ["controlled stage (K=10)", "unique", "DBR", "Gold"],
            [
                [STAGES[st], num(p["unique"], 3), paper_pct(p["dbr"]), paper_pct(p["gold"])]
                for st, p in paper.TABLE3.items()
            ]
            + [[FINAL_STAGE, DASH, DASH, paper_pct(a0["gold_recall"])]],
        ),
        "Table 4 (reader views over the same packets):",
        table(
            ["view", "F1", "BLEU-1", "J"],
            [[VIEWS[v], *(paper_pct(p[m]) for m in ("f1", "bleu1", "judge"))] for v, p in paper.TABLE4.items()],
        ),
    ]


def render_markdown(report: dict[str, Any], plots: Sequence[str]) -> str:
    categories = [c for c in report["by_category"] if report["by_category"][c].get("questions")]
    parts = [f"# MemCompile evaluation: {report['benchmark']}", "## This run", _setup(report)]
    if not report["overall"].get("questions"):
        return "\n\n".join([*parts, "No question has a result yet."]) + "\n"
    parts += [
        "## Gold Recall by category (%), this run: system and raw-turn baselines",
        _recall_table(report, categories),
    ]
    if "judge" in report["overall"]:
        parts += [
            "## Answers (%), this run: token F1 and BLEU-1 leave open-domain out",
            _answers_table(report, categories),
        ]
    if report.get("cross_validation"):
        parts += cv_section(report, categories)
    parts += ["## Pipeline paths (Table 2 settings), this run", _ablation_table(report)]
    parts += [
        "## Controlled selection at K=10 (Table 3 stages; %, DBR = share of duplicate slots), this run",
        _selection_table(report),
    ]
    parts += ["## Reader views over the same packets (Table 4), this run", _views_table(report)]
    parts += ["## Pools and latency, this run", _pool_table(report)]
    if report["overall"].get("budget", {}).get("by_max_tokens"):
        parts += ["## Context budget over the same packets (%), this run", _budget_table(report["overall"]["budget"])]
    if report.get("usage"):
        parts += ["## LLM tokens per stage (Table 8), this run", _usage_table(report["usage"])]
    parts += [f"![{name}]({name})" for name in plots]
    parts += paper_section(report)
    return "\n\n".join(parts) + "\n"
