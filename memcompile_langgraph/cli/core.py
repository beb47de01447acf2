"""Core commands: demo, ingest, query, stats, graph."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from .llm_args import add_llm_args, build_answer_llm, build_llm
from .profile_args import add_profile_arg, profile_config

# counted conditions of stored turns the user should hear about (kept, but not exactly as given)
WARNINGS = ("unparsed_time", "cleaned_text", "invalid_utf8", "trimmed_for_extraction", "trimmed_for_embedding")


def add_store_args(p: argparse.ArgumentParser, user: bool = True) -> None:
    p.add_argument("--store", required=True, help="store directory (created when missing)")
    if user:
        p.add_argument("--user", default=None, help="user id (default: each LoCoMo sample_id, else 'default')")
    p.add_argument("--chroma-url", default=None, help="keep vectors in a Chroma server, e.g. http://127.0.0.1:8000")


def open_memory(args: argparse.Namespace, store: str | None = None, create: bool = False):
    """The store of the command; only commands that write (ingest) may create it."""
    from pathlib import Path

    from ..memory import MemCompile
    from . import UsageError

    path = store if store is not None else args.store
    if not create and not Path(path).is_dir():
        raise UsageError(f"no store at {path} (create one with `memcompile ingest FILE --store {path}`)")
    return MemCompile(
        path,
        llm=build_llm(args),
        answer_llm=build_answer_llm(args),
        config=profile_config(args),
        chroma_url=getattr(args, "chroma_url", None),
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo_data import QUESTIONS, demo_turns
    from ..memory import MemCompile

    with tempfile.TemporaryDirectory(prefix="memcompile-demo-") as tmp:
        mem = MemCompile(args.store or tmp)
        if mem.embeddings is None:
            print("(no embedding model found: dense channel off; set MEMCOMPILE_MODEL_DIR)")
        counts = mem.add_turns(demo_turns(), user_id="demo", progress=True)
        stats = mem.stats("demo")
        print(f"stored {counts['stored']} turns -> {stats['descriptors']} descriptors in {stats['cells']} Cells\n")
        for q in QUESTIONS:
            ctx = mem.compile(q, user_id="demo")
            ms = sum(v.get("ms", 0) for v in ctx.trace.values())
            print(f"Q: {q}\n   {len(ctx.packets)} packets, {ms:.1f} ms\n")
            print("   " + ctx.text.replace("\n", "\n   ") + "\n")
        mem.close()
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from ..loaders import load_file
    from ..users import validate_user_id

    if args.user is not None:
        validate_user_id(args.user)  # before the store directory is created
    conversations = load_file(args.file)
    mem = open_memory(args, create=True)
    started = time.perf_counter()
    report = {}
    for conv in conversations:
        user = args.user if args.user is not None else conv.user_id or "default"
        counts = mem.add_turns(conv.turns, user_id=user, progress=not args.quiet)
        if conv.bad_lines:
            counts["skipped_bad_json_line"] = conv.bad_lines
            mem.records.add_counts(user, {"skipped_bad_json_line": conv.bad_lines})
        report[user] = counts
    seconds = time.perf_counter() - started
    for user, counts in report.items():
        skipped = {k: v for k, v in counts.items() if k.startswith("skipped")}
        line = f"{user}: stored {counts['stored']} turns, {counts['descriptors']} descriptors"
        if counts.get("already_stored"):
            line += f", {counts['already_stored']} already stored"
        if skipped:
            line += ", skipped " + ", ".join(f"{k[8:]}={v}" for k, v in sorted(skipped.items()))
        warnings = {k: v for k, v in counts.items() if k in WARNINGS and v}
        if warnings:
            line += ", warnings " + ", ".join(f"{k}={v}" for k, v in sorted(warnings.items()))
        print(line)
    print(f"done in {seconds:.1f}s", file=sys.stderr)
    mem.close()
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    mem = open_memory(args)
    ctx = mem.compile(args.query, user_id=args.user or "default", view=args.view)
    if args.json:
        print(json.dumps({"context": ctx.text, "packets": [{k: p[k] for k in ("dia_id", "speaker", "session", "time", "score")} for p in ctx.packets], "trace": ctx.trace}, indent=2))
    else:
        print(ctx.text or "(no memory matched)")
    mem.close()
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    mem = open_memory(args)
    users = [args.user] if args.user else mem.users()
    out = {u: mem.stats(u) for u in users}
    if args.json:
        print(json.dumps(out if not args.user else out[args.user], indent=2))
    else:
        for u, s in out.items():
            stale = "" if s["vector_model"]["current"] or not s["vectors"] else " (another model's: re-embedded at the next ingest)"
            print(f"{u}: {s['packets']} packets, {s['descriptors']} descriptors, {s['cells']} Cells, {s['sessions']} sessions, {s['vectors']} vectors{stale}")
            for k, v in s["counters"].items():
                print(f"   {k}: {v}")
            for stage, u in s["usage"]["stages"].items():
                print(f"   LLM {stage} ({u['phase']}): {u['calls']} calls, {u['cache_hits']} cache hits, "
                      f"{u['prompt_tokens']} prompt + {u['completion_tokens']} completion tokens")
    mem.close()
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    from ..memory import MemCompile

    mem = MemCompile(None, dense=False)
    graph = mem.ingest_graph if args.ingest else mem.query_graph
    print(graph.get_graph().draw_mermaid())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="offline demo: ingest a small conversation and compile a few questions")
    p.add_argument("--store", default=None, help="keep the demo store here (default: a temporary folder)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("ingest", help="store a LoCoMo JSON or JSONL turn file")
    p.add_argument("file")
    add_store_args(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_args(p)
    add_profile_arg(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("query", help="print the compiled context for a question")
    p.add_argument("query")
    add_store_args(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--view", choices=("bundle", "raw", "claim"), default="bundle", help="reader view (Table 4)")
    add_llm_args(p)
    add_profile_arg(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("stats", help="counts per user")
    add_store_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("graph", help="print the query graph (or --ingest graph) as Mermaid")
    p.add_argument("--ingest", action="store_true")
    p.set_defaults(func=cmd_graph)
