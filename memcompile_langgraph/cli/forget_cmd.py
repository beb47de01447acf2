"""`memcompile forget`: remove a user (records, vectors, LLM cache and ledger), or single turns of a user."""
from __future__ import annotations

import argparse


def cmd_forget(args: argparse.Namespace) -> int:
    from ..memory import MemCompile
    from ..store.layout import check_store_path
    from ..text import normalize_id
    from ..users import validate_user_id
    from . import UsageError

    validate_user_id(args.user)
    if not check_store_path(args.store).is_dir():
        raise UsageError(f"no store at {args.store}")  # forgetting must not create one
    mem = MemCompile(args.store, dense=False, chroma_url=args.chroma_url)  # no embedding model needed to delete
    try:
        if args.turn:
            stored = set(mem.index(args.user).by_dia)
            removed = mem.delete_turns(args.user, args.turn)
            print(f"{args.user}: removed {removed} turns with their descriptors and vectors")
            unknown = [d for d in dict.fromkeys(args.turn) if normalize_id(d) not in stored]
            if unknown:
                print(f"   not stored: {', '.join(unknown)}")
            return 0
        before = mem.stats(args.user)
        vectors = before["vectors"]
        mem.forget(args.user)
        if before["packets"] or vectors or before["counters"]:
            print(f"{args.user}: forgot {before['packets']} turns, {before['descriptors']} descriptors, {vectors} vectors")
        else:
            print(f"{args.user}: nothing stored")
        return 0
    finally:
        mem.close()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("forget", help="remove everything stored for a user, or single turns (--turn)")
    p.add_argument("--store", required=True, help="store directory")
    p.add_argument("--user", required=True, help="user id")
    p.add_argument("--turn", action="append", default=[], metavar="DIA_ID", help="remove only this turn (repeatable)")
    p.add_argument("--chroma-url", default=None, help="vectors kept in a Chroma server")
    p.set_defaults(func=cmd_forget)
