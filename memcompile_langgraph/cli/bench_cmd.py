"""`memcompile bench`: speed and scale on a synthetic history, with LangGraph's InMemoryStore as the peer."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from . import UsageError
from .profile_args import add_profile_arg, profile_config

COLUMNS = (
    ("turns", "turns"),
    ("ingest_turns_per_s", "ingest turns/s"),
    ("add_turn_ms_p50", "add turn ms p50"),
    ("query_ms_p50", "query ms p50"),
    ("query_ms_p95", "query ms p95"),
    ("rss_mb", "peak RSS MB"),
)


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--sizes takes comma-separated turn counts, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise UsageError("--sizes takes positive turn counts")
    return sizes


def table(report: dict) -> str:
    rows = [["store"] + [label for _, label in COLUMNS] + ["peer ingest turns/s", "peer query ms p50"]]
    for point in report["sizes"]:
        peer = point.get("peer", {})
        rows.append(
            ["embedded"]
            + [str(point[key]) for key, _ in COLUMNS]
            + [str(peer.get("ingest_turns_per_s", "-")), str(peer.get("query_ms_p50", "-"))]
        )
    served = report.get("served")
    if served:
        for point in served["sizes"]:
            name = f"{served['records']} + {served['vectors']}"
            rows.append([name] + [str(point[key]) for key, _ in COLUMNS] + ["-", "-"])
    return "\n".join(
        [
            _aligned(rows),
            "",
            "writers' clock, seconds by part (embedding on a background thread):",
            clock_table(report),
        ]
    )


def clock_table(report: dict) -> str:
    """The bulk ingest's writers' clock at each size: the writer's parts (they add up to `ingest s`), then the
    background embedding's, which overlap them."""
    first = report["sizes"][0]["writers_clock_s"]
    writer, background = list(first["writer"]), list(first["background"])
    rows = [["turns", "ingest s", *writer, *(f"bg {name}" for name in background)]]
    for point in report["sizes"]:
        clock = point["writers_clock_s"]
        rows.append(
            [str(point["turns"]), str(point["ingest_s"])]
            + [str(clock["writer"][k]) for k in writer]
            + [str(clock["background"][k]) for k in background]
        )
    return _aligned(rows)


def _aligned(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in rows)


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files; checked before the bench runs, so a missing extra costs no run."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'memcompile-langgraph[plots]'") from None
    return plt


def plot(report: dict, path: Path, plt: Any) -> None:
    """Latency and ingest rate against N, MemCompile beside the peer."""
    points = report["sizes"]
    n = [p["turns"] for p in points]
    fig, (lat, rate) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label, style in (
        ("query_ms_p50", "query p50", "o-"),
        ("query_ms_p95", "query p95", "o--"),
        ("add_turn_ms_p50", "add one turn p50", "s-"),
    ):
        lat.plot(n, [p[key] for p in points], style, label=label)
    peers = [p["peer"] for p in points if "peer" in p]
    if peers:
        lat.plot(
            [p["turns"] for p in peers], [p["query_ms_p50"] for p in peers], "^:", label="InMemoryStore search p50"
        )
    lat.set(xscale="log", yscale="log", xlabel="turns in the store (N)", ylabel="ms", title="latency")
    lat.legend()
    rate.plot(n, [p["ingest_turns_per_s"] for p in points], "o-", label="MemCompile")
    if peers:
        rate.plot([p["turns"] for p in peers], [p["ingest_turns_per_s"] for p in peers], "^:", label="InMemoryStore")
    rate.set(
        xscale="log",
        xlabel="turns in the store (N)",
        ylabel="turns/s (embeddings included)",
        title="ingest, end to end",
    )
    rate.legend()
    fig.suptitle(f"memcompile bench on {report['machine']['cpu']}, {report['machine']['cores']} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench.runner import BenchOptions, run_bench

    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    if args.startup:
        from ..bench.startup import run_startup, startup_table

        if args.runs < 1:
            raise UsageError("--runs must be positive")
        report = run_startup(args.runs, log)
        print(json.dumps(report, indent=2) if args.json else startup_table(report))
        return 0
    sizes = parse_sizes(args.sizes) if args.sizes else ()
    if args.turns is not None:
        if args.turns < 1:
            raise UsageError("--turns must be positive")
        sizes = tuple(sorted(set(sizes) | {args.turns}))
    if not sizes:
        raise UsageError("give --turns N or --sizes N1,N2,...")
    if args.queries < 1:
        raise UsageError("--queries must be positive")
    plt = pyplot() if args.plot else None
    from ..settings import CHROMA_URL, resolved
    from ..store.open import records_url_from

    opts = BenchOptions(
        sizes=sizes,
        queries=args.queries,
        store=Path(args.store) if args.store else None,
        peer=not args.no_peer,
        seed=args.seed,
        records_url=records_url_from(args.records_url),
        chroma_url=resolved(CHROMA_URL, args.chroma_url),
        config=profile_config(args),
    )
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    report = run_bench(opts, log)
    if args.plot:
        plot(report, Path(args.plot), plt)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="speed and scale on a synthetic multi-session history (offline); --startup: CLI start-up"
    )
    p.add_argument("--turns", type=int, default=None, help="turns in the store when measured")
    p.add_argument("--queries", type=int, default=50, help="timed queries per size (default 50)")
    p.add_argument(
        "--sizes", default=None, help="measure while growing through these sizes, e.g. 1000,5000,20000,100000"
    )
    p.add_argument(
        "--store", default=None, help="keep the bench store in this new directory (default: a temporary one)"
    )
    p.add_argument("--plot", default=None, help="write a PNG of latency and ingest rate against N")
    p.add_argument("--json", action="store_true", help="the whole report as JSON (every phase, machine and load)")
    p.add_argument("--no-peer", action="store_true", help="skip the InMemoryStore peer")
    p.add_argument("--seed", type=int, default=7, help="seed of the synthetic history (default 7)")
    p.add_argument(
        "--records-url",
        default=None,
        help="also bench records in PostgreSQL (an empty schema: postgresql://...?schema=NAME)",
    )
    p.add_argument("--chroma-url", default=None, help="also bench vectors in a Chroma server")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument(
        "--startup",
        action="store_true",
        help="instead: time `memcompile --help`, `stats` and `query` from process start to exit",
    )
    p.add_argument("--runs", type=int, default=5, help="runs per command with --startup (default 5, after a warm-up)")
    add_profile_arg(p)
    p.set_defaults(func=cmd_bench)
