"""report.md: the paper-style tables of a run, beside the paper's published figures and the run's own baselines."""
from __future__ import annotations

from typing import Any, Sequence

from . import paper

DASH = "—"


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


def _setup(report: dict[str, Any]) -> str:
    cfg, o = report["config"], report["overall"]
    model = cfg.get("llm") or "offline (heuristic extraction, deterministic scheduler)"
    answers = cfg.get("answer_llm") or "none (retrieval metrics only)"
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(report["skipped"].items())) or "none"
    lines = [
        f"- file: `{cfg['file']}`, dialogues: {len(cfg['dialogues'])}, questions: {o['questions']} "
        f"({o.get('questions_with_gold', 0)} with gold evidence); left out: {skipped}",
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
    rows = [["MemCompile (this run)", *(pct(report["by_category"][c].get("gold_recall")) for c in categories), pct(o.get("gold_recall")),
             f"{pct(o.get('full_coverage'))} ({o.get('full_coverage_count', 0)})", num(o.get("mean_packets")), num(o.get("mean_context_tokens"))]]
    for name, b in report["baselines"].items():
        k = name.rsplit("top", 1)[-1]
        rows.append([f"raw-turn {name.split('_')[0]} top-{k}", *(pct(b["by_category"].get(c, {}).get("gold_recall")) for c in categories),
                     pct(b["gold_recall"]), f"{pct(b['full_coverage'])} ({b['full_coverage_count']})", k, num(b["mean_context_tokens"])])
    if report["benchmark"] == "locomo":
        fc = paper.FULL_COVERAGE
        rows.append(["MemCompile (paper, LLM stages)", *([DASH] * len(categories)), paper_pct(paper.TABLE2["A0"]["gold_recall"]),
                     f"{100 * fc['count'] / fc['questions']:.2f} ({fc['count']})", "<= 12", DASH])
    return table(header, rows)


def _answers_table(report: dict[str, Any], categories: Sequence[str]) -> str:
    header = ["", *(f"{c} {m}" for c in categories for m in ("F1", "BLEU-1", "J")), "overall F1", "overall BLEU-1", "overall J"]
    groups = [*(report["by_category"][c] for c in categories), report["overall"]]
    rows = [["this run", *(pct(g.get(m)) for g in groups for m in ("f1", "bleu1", "judge"))]]
    if report["benchmark"] == "locomo":
        published = [*(paper.TABLE1.get(c, {}) for c in categories), paper.TABLE1["overall"]]
        rows.append(["paper (Table 1)", *(paper_pct(p.get(m)) for p in published for m in ("f1", "bleu1", "judge"))])
    elif report["benchmark"] == "longmemeval":
        published = [*({"judge": paper.TABLE7.get(c)} for c in categories), {}]
        rows.append(["paper (Table 7)", *(paper_pct(p.get(m)) for p in published for m in ("f1", "bleu1", "judge"))])
    return table(header, rows)


def _ablation_table(report: dict[str, Any]) -> str:
    rows = []
    for name, a in report["ablations"].items():
        p = paper.TABLE2.get(name, {}) if report["benchmark"] == "locomo" else {}
        rows.append([name, a["label"], pct(a.get("gold_recall")), paper_pct(p.get("gold_recall")), pct(a.get("full_coverage")),
                     num(a.get("mean_packets")), num(a.get("mean_context_tokens")), pct(a.get("judge")), paper_pct(p.get("judge"))])
    return table(["", "setting", "Recall (run)", "Recall (paper)", "full coverage", "packets", "context tokens", "J (run)", "J (paper)"], rows)


def _selection_table(report: dict[str, Any]) -> str:
    k10, o = report["overall"]["k10"], report["overall"]
    names = {"unnormalized": "Unnormalized claim top-K", "dedup": "Exact-text deduplication", "normalized": "Source-normalized top-K",
             "anchors": "+ Complementary scheduler (A_0)"}
    rows = []
    for stage, label in names.items():
        s, p = k10[stage], paper.TABLE3[stage] if report["benchmark"] == "locomo" else {}
        rows.append([label, num(s["unique_sources"], 3), pct(s["dbr"]), pct(s["gold_recall"]), str(s["eligible"]),
                     num(p.get("unique"), 3), paper_pct(p.get("dbr")), paper_pct(p.get("gold"))])
    final = paper.TABLE2["A0"]["gold_recall"] if report["benchmark"] == "locomo" else None
    rows.append(["+ bounded frontier (E_q, final)", num(o["mean_packets"], 3), "0.00", pct(o["gold_recall"]), str(o["questions"]), DASH, DASH, paper_pct(final)])
    return table(["controlled stage (K=10)", "unique", "DBR", "Gold", "eligible", "unique (paper)", "DBR (paper)", "Gold (paper)"], rows)


def _views_table(report: dict[str, Any]) -> str:
    o, view = report["overall"], report["config"]["view"]
    labels = {"claim": "Representative claim", "raw": "Raw SourcePacket", "bundle": "Full claim bundle"}
    rows = []
    for v, label in labels.items():
        p = paper.TABLE4[v] if report["benchmark"] == "locomo" else {}
        mine = o if v == view else {}
        rows.append([label, num(o["context_tokens_by_view"][v]), pct(mine.get("f1")), pct(mine.get("bleu1")), pct(mine.get("judge")),
                     paper_pct(p.get("f1")), paper_pct(p.get("bleu1")), paper_pct(p.get("judge"))])
    return table(["view (same packets)", "context tokens", "F1", "BLEU-1", "J", "F1 (paper)", "BLEU-1 (paper)", "J (paper)"], rows)


def _pool_table(report: dict[str, Any]) -> str:
    o = report["overall"]
    rows = [["closed pool U_q", pct(o["pool_recall"]), num(o["mean_pool_packets"])],
            ["frontier window A_0 ∪ D_q", pct(o["frontier_pool_recall"]), num(o["mean_frontier_pool_packets"])],
            ["selection E_q", pct(o["gold_recall"]), num(o["mean_packets"])]]
    latency = [[stage, num(v["p50"], 2), num(v["p95"], 2)] for stage, v in o["stage_ms"].items()]
    latency.append(["whole query", num(o["query_ms_p50"], 2), num(o["query_ms_p95"], 2)])
    return table(["packets", "Gold Recall", "mean size"], rows) + "\n\n" + table(["stage", "ms p50", "ms p95"], latency)


def _usage_table(usage: dict[str, Any]) -> str:
    rows = [[stage, u["phase"], str(u["calls"]), str(u["cache_hits"]), str(u["prompt_tokens"] + u["completion_tokens"])]
            for stage, u in sorted(usage["stages"].items(), key=lambda kv: (kv[1]["phase"], kv[0]))]
    rows.append(["non-judge total", "", "", "", f"{usage['total_tokens']} ({usage['tokens_per_question']} per question)"])
    return table(["stage", "phase", "calls", "cache hits", "tokens"], rows)


def render_markdown(report: dict[str, Any], plots: Sequence[str]) -> str:
    categories = [c for c in report["by_category"] if report["by_category"][c].get("questions")]
    parts = [f"# MemCompile evaluation: {report['benchmark']}", _setup(report)]
    if not report["overall"].get("questions"):
        return "\n\n".join([*parts, "No question has a result yet."]) + "\n"
    parts += ["## Gold Recall by category (%), system and raw-turn baselines of this run", _recall_table(report, categories)]
    if "judge" in report["overall"]:
        parts += ["## Answers (%): token F1 and BLEU-1 leave open-domain out", _answers_table(report, categories)]
    parts += ["## Table 2: pipeline paths (run rows: this run's settings)", _ablation_table(report)]
    parts += ["## Table 3: controlled selection at K=10 (%, DBR = share of duplicate slots)", _selection_table(report)]
    parts += ["## Table 4: reader views over the same packets", _views_table(report)]
    parts += ["## Pools and latency", _pool_table(report)]
    if report.get("usage"):
        parts += ["## LLM tokens per stage (Table 8)", _usage_table(report["usage"])]
    if report["benchmark"] == "locomo":
        parts.append("Paper figures use the LLM stages (gpt-4o-mini) on all ten conversations; an offline run replaces "
                     "extraction, intent and both schedulers with the heuristic components, so its figures are not expected to match.")
    parts += [f"![{name}]({name})" for name in plots]
    return "\n\n".join(parts) + "\n"
