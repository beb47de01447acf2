"""`memcompile stats`: counts per user, read from the store alone (no graph is built and no model is loaded)."""

from __future__ import annotations

import argparse
import json
import re
import sys

from .core import add_store_args

# what each counter of `stats` means, by name pattern (first match)
COUNTER_MEANINGS = (
    (r"fallback_claims", "turns with no extractable claim: the turn's own text is their one claim"),
    (r"skipped_(.+)", "turns not stored: {0}"),
    (r"already_stored", "turns given again and kept once"),
    (r"unparsed_time", "turns kept with a time that could not be parsed (stored as given)"),
    (r"cleaned_text", "turns kept with control or bidi characters removed"),
    (r"invalid_utf8", "turns kept with undecodable bytes replaced"),
    (r"trimmed_for_(\w+)", "long turns stored whole, trimmed for {0} only"),
    (r"llm_(\w+?)_fallback", "{0} items the offline component did after the model's replies failed"),
    (r"llm_(\w+?)_filled", "{0} requests completed by the offline component after a partial reply"),
    (r"llm_(\w+?)_unavailable", "{0} requests the model did not answer at all"),
    (r"llm_(\w+?)_retries", "{0} replies resent with a correction"),
    (r"llm_(\w+?)_rounds", "{0} extra rounds for pools larger than one request"),
)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def counter_meaning(name: str) -> str:
    for pattern, meaning in COUNTER_MEANINGS:
        m = re.fullmatch(pattern, name)
        if m:
            return meaning.format(*(g.replace("_", " ") for g in m.groups()))
    return ""


def user_line(user: str, s: dict) -> str:
    stale = (
        "" if s["vector_model"]["current"] or not s["vectors"] else " (another model's: re-embedded at the next ingest)"
    )
    return (
        f"{user}: {plural(s['packets'], 'packet')} (stored turns), {plural(s['descriptors'], 'descriptor')} (claims), "
        f"{plural(s['cells'], 'Cell')}, {plural(s['sessions'], 'session')}, {plural(s['vectors'], 'vector')}{stale}"
    )


def cmd_stats(args: argparse.Namespace) -> int:
    from ..embeddings.int8 import find_model_dir, model_identity
    from ..settings import vectors_per_process
    from ..store.llm_file import LLMStore
    from ..store.open import open_records
    from ..store.stats import user_stats, vector_count
    from ..users import validate_user_id
    from .core import command_settings, require_store, require_user

    if args.user is not None:
        validate_user_id(args.user)
    settings = command_settings(args)
    store = settings.path
    if store is not None and not settings.servers_only:
        require_store(store)
    records = open_records(store, settings.records_url or "", create=False)
    try:
        if args.user:
            require_user(records, args.user, store)  # as `query` says it: zeros would read as an empty memory
        llm_store = LLMStore.open(store, create=False) if store is not None else None
        # whose vectors are current: the identity of the model a query would embed with, without loading it
        model_dir = find_model_dir()
        identity = model_identity(model_dir)[0] if model_dir is not None else None
        users = [args.user] if args.user else records.users()

        def count(user: str) -> int:
            return vector_count(store, settings.chroma_url, records, user)

        out = {u: user_stats(records, count, llm_store, u, identity) for u in users}
        if llm_store is not None:
            llm_store.close()
    finally:
        records.close()
    if note := vectors_per_process(settings):  # the vectors counted are this machine's only
        print(f"memcompile: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(out if not args.user else out[args.user], indent=2))
        return 0
    for u, s in out.items():
        print(user_line(u, s))
        for k, v in s["counters"].items():
            meaning = counter_meaning(k)
            print(f"   {k}: {v}" + (f"  ({meaning})" if meaning else ""))
        for stage, use in s["usage"]["stages"].items():
            print(
                f"   LLM {stage} ({use['phase']}): {use['calls']} calls, {use['cache_hits']} cache hits, "
                f"{use['prompt_tokens']} prompt + {use['completion_tokens']} completion tokens"
            )
    if not out:
        print("(no user has stored anything)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stats",
        help="counts per user: stored turns, claims, Cells, sessions, vectors, counters",
        description="Counts per user. Counters say what ingest skipped, cleaned or fell back on; "
        "fallback_claims counts turns with no extractable claim, stored whole as their one claim.",
    )
    add_store_args(p, user=False)
    p.add_argument("--user", "--user-id", dest="user", default=None, help="one user (default: every user of the store)")
    p.add_argument(
        "--json", action="store_true", help="the full record as JSON (also LLM usage and the vectors' model)"
    )
    p.set_defaults(func=cmd_stats)
