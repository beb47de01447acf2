"""Core commands: demo, ingest, query, stats, graph."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from typing import Any

from .llm_args import add_llm_args, build_answer_llm, build_llm
from .profile_args import add_profile_arg, profile_config

# counted conditions of stored turns the user should hear about (kept, but not exactly as given)
WARNINGS = (
    "unparsed_time",
    "cleaned_text",
    "invalid_utf8",
    "invalid_unicode",
    "trimmed_speaker",
    "trimmed_for_extraction",
    "trimmed_for_embedding",
)


def add_store_args(p: argparse.ArgumentParser, create: bool = False, user: bool = True) -> None:
    """--store, --user (unless the user comes with each request), --chroma-url and --records-url; only commands that
    write (ingest, mcp) create a missing store. A flag not given is read from its MEMCOMPILE_* variable (settings.py)."""
    from ..settings import CHROMA_URL, RECORDS_URL, STORE, env_help

    server = "; not needed with --records-url and --chroma-url"
    made = "created when missing" if create else "an existing store, made by `memcompile ingest`"
    p.add_argument("--store", default=None, help=f"store directory ({made}{server}; default: ${STORE.env})")
    if user and create:
        p.add_argument(
            "--user",
            "--user-id",
            dest="user",
            default=None,
            help="user id of every turn (default: each LoCoMo conversation's sample_id; 'default' for a JSONL file)",
        )
    elif user:
        p.add_argument("--user", "--user-id", dest="user", default="default", help="whose memory (default: 'default')")
    p.add_argument(
        "--chroma-url",
        default=None,
        help=f"the Chroma server holding the vectors, e.g. http://127.0.0.1:8000 ({env_help(CHROMA_URL)})",
    )
    p.add_argument(
        "--records-url",
        default=None,
        help=f"keep records in PostgreSQL, e.g. postgresql://user@host/db?schema=name ({env_help(RECORDS_URL)})",
    )


def command_settings(args: argparse.Namespace, store: str | None = None) -> Any:
    """The command's --store, --records-url and --chroma-url, each else its MEMCOMPILE_* variable (settings.py);
    UsageError when that leaves no place for the store."""
    from ..settings import store_settings
    from . import UsageError

    settings = store_settings(store if store is not None else args.store, args.records_url, args.chroma_url)
    if settings.path is None and not settings.servers_only:
        raise UsageError("give --store DIR (or both --records-url and --chroma-url: no local directory then)")
    return settings


def positive_int(value: str) -> int:
    if not value.strip().isdecimal() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return int(value)


def add_max_tokens_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-tokens",
        type=positive_int,
        default=None,
        metavar="N",
        help="context budget in tokens, spent on the lines most likely to answer: packet leads first (default: 2000)",
    )


def require_store(path: str) -> None:
    from pathlib import Path

    from . import UsageError

    if not Path(path).is_dir():
        raise UsageError(f"no store at {path} (create one with `memcompile ingest FILE --store {path}`)")


def import_memory(dense: bool = False) -> tuple[type, Any]:
    """The MemCompile class and, with dense, the default embedder (None without a model), imported with the cyclic
    collector paused: LangGraph, LangChain and LangSmith make many long-lived objects as they load, which it would
    otherwise walk again and again. The embedder's model loads meanwhile, on the other core."""
    from ..process import gc_paused

    with gc_paused():
        embeddings = None
        if dense:
            from ..embeddings.minilm import default_embeddings

            embeddings = default_embeddings()
            if embeddings is not None:
                embeddings.preload()
        from ..memory import MemCompile
    return MemCompile, embeddings


def open_memory(args: argparse.Namespace, store: str | None = None, create: bool = False, dense: bool = True):
    """The store of the command; only commands that write (ingest) may create it."""
    from ..store.layout import check_store_path
    from ..store.open import open_records
    from ..store.protocols import StoreError
    from . import UsageError

    settings = command_settings(args, store)
    if settings.path is not None and not create and not settings.servers_only:
        require_store(str(check_store_path(settings.path)))
    if settings.records_url and not create:
        try:
            open_records(None, settings.records_url, create=False).close()
        except StoreError as exc:
            raise UsageError(f"{exc} (create one with `memcompile ingest FILE --records-url URL`)") from None
    memory, embeddings = import_memory(dense)
    return memory(
        settings.path or "",  # resolved: "" is none, never the environment again
        embeddings=embeddings,
        llm=build_llm(args),
        answer_llm=build_answer_llm(args),
        config=profile_config(args),
        chroma_url=settings.chroma_url or "",
        records_url=settings.records_url or "",
        dense=embeddings is not None,  # None: no model was found (and said so), so no second search
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from ..integrations.extractive import answer, parse_claims
    from ..memory import MemCompile
    from .demo_data import QUESTIONS, demo_turns

    with tempfile.TemporaryDirectory(prefix="memcompile-demo-") as tmp:
        mem = MemCompile(args.store or tmp)  # without a model, the memory's own warning says so (once)
        counts = mem.add_turns(demo_turns(), user_id="demo", progress=True)
        stats = mem.stats("demo")
        print(f"stored {counts['stored']} turns -> {stats['descriptors']} descriptors in {stats['cells']} Cells")
        print("answers are quoted from the compiled context by an offline extractive reader (no language model)\n")
        for q in QUESTIONS:
            ctx = mem.compile(q, user_id="demo")
            ms = sum(v.get("ms", 0) for v in ctx.trace.values())
            found = answer(q, parse_claims(ctx.text), mem.embeddings)
            print(f"Q: {q}\nA: {found.render() if found else '(nothing in the context answers it)'}")
            used = ", ".join(p.dia_id for p in ctx.packets)
            print(f"   context: {len(ctx.packets)} packets in {ms:.1f} ms: {used}\n")
            if args.context:
                print("   " + ctx.text.replace("\n", "\n   ") + "\n")
        mem.close()
    return 0


SKIPS_SHOWN = 20  # lines naming a skipped line or turn; the rest are counted in the summary


def cmd_ingest(args: argparse.Namespace) -> int:
    from collections import Counter

    from ..ingest.loaders import load_file
    from ..store.chroma_server import chroma_unreachable
    from . import UsageError

    conversations = chosen_conversations(load_file(args.file), args)  # the whole file checked: nothing stored yet
    report_skips(conversations, args.file)
    chroma_url = command_settings(args).chroma_url
    if chroma_url and (why := chroma_unreachable(chroma_url)):  # a write cannot degrade: refused before it starts
        raise UsageError(f"Chroma server {chroma_url} unreachable ({why}): nothing stored")
    mem = open_memory(args, create=True)
    started = time.perf_counter()
    report: dict[str, Counter] = {}
    for conv in conversations:
        user = args.user if args.user is not None else conv.user_id or "default"
        counts = Counter(mem.add_turns(conv.turns, user_id=user, progress=not args.quiet))
        if conv.bad_lines:
            counts["skipped_bad_json_line"] += conv.bad_lines
            mem.count(user, {"skipped_bad_json_line": conv.bad_lines})
        report[user] = report.get(user, Counter()) + counts  # a sample id given twice: both counted
    seconds = time.perf_counter() - started
    for user, counts in report.items():
        print(f"{user}: {summary(counts)}")
    if len(report) > 1:
        print(f"{len(report)} users: {summary(sum(report.values(), Counter()))}")
    print(f"done in {seconds:.1f}s", file=sys.stderr)
    mem.close()
    return 0


def summary(counts: Any) -> str:
    skipped = {k: v for k, v in counts.items() if k.startswith("skipped") and v}
    line = f"stored {counts['stored']} turns, {counts['descriptors']} descriptors"
    if counts.get("already_stored"):
        line += f", {counts['already_stored']} already stored"
    if skipped:
        line += ", skipped " + ", ".join(f"{k[8:]}={v}" for k, v in sorted(skipped.items()))
    warnings = {k: v for k, v in counts.items() if k in WARNINGS and v}
    if warnings:
        line += ", warnings " + ", ".join(f"{k}={v}" for k, v in sorted(warnings.items()))
    return line


def chosen_conversations(conversations: list[Any], args: argparse.Namespace) -> list[Any]:
    """The conversations to store: every one, or the --sample; UsageError, before anything is stored, for a --user
    that would merge several conversations into one memory, and for a sample id that is no valid user id."""
    from ..users import InvalidUserId, validate_user_id
    from . import UsageError

    samples = [c.user_id for c in conversations if c.user_id is not None]
    if args.sample is not None:
        conversations = [c for c in conversations if c.user_id == args.sample]
        if not conversations:
            held = ", ".join(samples[:20]) or "no LoCoMo samples"
            raise UsageError(f"{args.file} has no sample {args.sample!r}; it holds: {held} (--sample)")
    elif args.user is not None and len(conversations) > 1:
        raise UsageError(
            f"{args.file} holds {len(conversations)} conversations ({', '.join(samples[:3])}, ...): give --sample ID "
            f"to store one of them as user {args.user!r}, or leave out --user to store each as its sample_id"
        )
    for i, conv in enumerate(conversations):
        try:
            validate_user_id(args.user if args.user is not None else conv.user_id or "default")
        except InvalidUserId as exc:
            which = "--user" if args.user is not None else f"sample {i + 1} (sample_id {conv.user_id!r})"
            raise UsageError(f"{args.file}: {which}: {exc}; nothing stored") from None
    return conversations


def report_skips(conversations: list[Any], file: str) -> None:
    """One line on stderr per line or turn that will not be stored, with where it is, up to SKIPS_SHOWN."""
    from ..ingest.turn_input import BadTurn, check_turn

    shown = 0
    for conv in conversations:
        skips = [(place, "bad_json_line") for place in conv.bad_places]
        for i, turn in enumerate(conv.turns):
            try:
                check_turn(turn)
            except BadTurn as exc:
                skips.append((conv.place(i), str(exc)))
        for place, reason in skips:
            if shown == SKIPS_SHOWN:
                print(f"memcompile: {file}: more skipped (counted below)", file=sys.stderr)
                return
            print(f"memcompile: {file}: {place} skipped: {reason}", file=sys.stderr)
            shown += 1


def require_user(mem: Any, user: str, store: str | None) -> None:
    """UsageError naming the users the store holds, when it holds nothing for `user`."""
    from . import UsageError

    users = mem.users()
    if user not in users:
        held = (
            ", ".join(users[:20]) + (f" and {len(users) - 20} more" if len(users) > 20 else "")
            if users
            else "no users yet"
        )
        raise UsageError(f"{store or 'the store'} holds nothing for user {user!r}; it holds: {held} (--user)")


def cmd_query(args: argparse.Namespace) -> int:
    mem = open_memory(args)
    try:
        require_user(mem, args.user, args.store)
        ctx = mem.compile(args.query, user_id=args.user, view=args.view, max_tokens=args.max_tokens, as_of=args.as_of)
    finally:
        mem.close()
    if args.json:
        packets = [{k: getattr(p, k) for k in ("dia_id", "speaker", "session", "time", "score")} for p in ctx.packets]
        print(json.dumps({"context": ctx.text, "packets": packets, "trace": ctx.trace}, indent=2))
    else:
        print(ctx.text or "(no memory matched)")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    if args.ingest:
        from ..ingest_graph import ingest_graph as graph
    else:
        from ..query_graph import query_graph as graph
    print(graph.get_graph().draw_mermaid())
    return 0


def add_as_of_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--as-of",
        metavar="DATE",
        help="only what had been said by then, with the facts current then (ISO 8601: 2024-03-31, 2024-03-31T18:00)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="offline demo: ingest a small conversation and compile a few questions")
    p.add_argument("--store", default=None, help="keep the demo store here (default: a temporary folder)")
    p.add_argument("--context", action="store_true", help="also print each compiled context")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("ingest", help="store a LoCoMo or BEAM chat file, or a JSON or JSONL file of turns")
    p.add_argument(
        "file",
        help="a LoCoMo file (locomo10.json format), a BEAM chat.json, a JSON list of turns or JSONL, one turn a line: "
        '{"speaker", "text", "time", "session", "dia_id", ...} or a chat message {"role", "content", ...}',
    )
    add_store_args(p, create=True)
    p.add_argument(
        "--sample",
        default=None,
        metavar="ID",
        help="store only the LoCoMo conversation of this sample_id (as --user when given)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_args(p)
    add_profile_arg(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("query", help="print the compiled context for a question")
    p.add_argument("query", help="the question to compile a context for")
    add_store_args(p)
    p.add_argument(
        "--json", action="store_true", help="context, packets (dia_id, speaker, session, time, score) and trace"
    )
    p.add_argument("--view", choices=("bundle", "raw", "claim"), default="bundle", help="reader view (Table 4)")
    add_max_tokens_arg(p)
    add_as_of_arg(p)
    add_llm_args(p)
    add_profile_arg(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("graph", help="print the query graph (or --ingest graph) as Mermaid")
    p.add_argument(
        "--ingest", action="store_true", help="the build plane (packetize ... index) instead of the query plane"
    )
    p.set_defaults(func=cmd_graph)
