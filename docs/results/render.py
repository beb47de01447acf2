"""Writes docs/benchmarks.md from the result files listed in docs/results/results.json.

    python docs/results/render.py            # rewrites docs/benchmarks.md
    python docs/results/render.py --check    # exit 1 when docs/benchmarks.md is not what the files give

Each entry of results.json names a result file as the command wrote it (`memcompile eval ...`'s report.json, or
`memcompile bench ... --json`'s output), the command, the date and the machine. A new measurement replaces its
file and entry: the page holds one current figure per measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from memcompile_langgraph.cli.bench_cmd import COLUMNS
from memcompile_langgraph.eval.markdown import num, pct, table

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "benchmarks.md"
HEADER = """# Benchmarks

The current figures, one per measurement. This page is generated: `python docs/results/render.py` writes it from the
result files in `docs/results/` (each listed in `results.json` with its command, date and machine). Measure on your
own machine with the same commands (see [evaluation](evaluation.md) and [performance](performance.md)); timings on a
shared machine depend on its load, which the bench records per phase.
"""


def provenance(entry: dict[str, Any]) -> str:
    return f"- date: {entry['date']}\n- machine: {entry['machine']}\n- command: `{entry['command']}`\n"


def eval_section(entry: dict[str, Any], report: dict[str, Any]) -> str:
    o, cats = report["overall"], list(report["by_category"])
    header = ["retriever", *cats, "overall", "full coverage", "packets", "context tokens"]
    rows = [
        [
            "MemCompile",
            *(pct(report["by_category"][c].get("gold_recall")) for c in cats),
            pct(o.get("gold_recall")),
            pct(o.get("full_coverage")),
            num(o.get("mean_packets")),
            num(o.get("mean_context_tokens"), 0),
        ]
    ]
    for name, b in report["baselines"].items():
        k = name.rsplit("top", 1)[-1]
        rows.append(
            [
                f"raw-turn {name.split('_')[0]} top-{k}",
                *(pct(b["by_category"].get(c, {}).get("gold_recall")) for c in cats),
                pct(b["gold_recall"]),
                pct(b["full_coverage"]),
                k,
                num(b["mean_context_tokens"], 0),
            ]
        )
    notes = (
        f"Gold Recall in % ({o['questions']:,} questions; profile {report['config'].get('profile', 'default')}, "
        f"offline unless a model is named: {report['config'].get('llm') or 'none'}). Pool recall "
        f"{num(o.get('pool_recall'), 3)}; query p50 {num(o.get('query_ms_p50'))} ms; the whole run took "
        f"{num(report['timing']['wall_seconds'], 0)} s."
    )
    return f"## {entry['title']}\n\n{provenance(entry)}\n{table(header, rows)}\n\n{notes}\n"


def bench_section(entry: dict[str, Any], report: dict[str, Any]) -> str:
    header = [label for _, label in COLUMNS] + ["peer ingest turns/s", "peer query ms p50"]
    rows = [
        [str(p[key]) for key, _ in COLUMNS]
        + [str(p.get("peer", {}).get("ingest_turns_per_s", "-")), str(p.get("peer", {}).get("query_ms_p50", "-"))]
        for p in report["sizes"]
    ]
    last = report["sizes"][-1]
    notes = (
        "Embedded store (SQLite + Chroma directory); the peer is LangGraph's InMemoryStore with the same embeddings. "
        f"At {last['turns']:,} turns the first query after opening took {last['first_query_s']} s from the snapshot "
        f"file and {last['first_query_rebuild_s']} s rebuilt from the records; another user's query p50 was "
        f"{last['other_user_query_ms_p50_alone']} ms alone and {last['other_user_query_ms_p50_during_cold_load']} ms "
        "while that user loaded cold."
    )
    loaded = load_note(report)
    return f"## {entry['title']}\n\n{loaded}{provenance(entry)}\n{table(header, rows)}\n\n{notes}\n"


def load_note(report: dict[str, Any]) -> str:
    """A warning above a bench measured while the machine's load exceeded its cores (from the loads the bench
    records per phase): its times are not the quiet machine's, which docs/performance.md gives."""
    loads = [
        value
        for size in report["sizes"]
        for phase in size.get("load", {}).values()
        for key, value in phase.items()
        if key.startswith("load_")
    ]
    cores = report.get("machine", {}).get("cores") or 1
    if not loads or max(loads) <= cores:
        return ""
    return (
        f"**Measured under load**: a 1-minute load of {min(loads):.1f} to {max(loads):.1f} on {cores} cores, so "
        "every time in this section is several times a quiet machine's. The quiet machine's figures (20,000 turns: "
        "ingest, add, query, first query after opening) are in "
        "[performance](performance.md#figures-on-a-2-core-machine); compare this section's ratios to its peer "
        "instead.\n\n"
    )


SECTIONS = {"eval": eval_section, "bench": bench_section}


def render(folder: Path = HERE) -> str:
    entries = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    parts = [HEADER]
    for entry in entries:
        report = json.loads((folder / entry["file"]).read_text(encoding="utf-8"))
        parts.append(SECTIONS[entry["kind"]](entry, report))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with docs/benchmarks.md instead of writing it")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print("docs/benchmarks.md is not what docs/results gives: run python docs/results/render.py")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
