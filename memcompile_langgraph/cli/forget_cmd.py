"""`memcompile forget`: remove a user (records, vectors, LLM cache and ledger), or single turns of a user."""

from __future__ import annotations

import argparse

from .core import add_store_args, open_memory


def cmd_forget(args: argparse.Namespace) -> int:
    from ..text.terms import normalize_id
    from ..users import validate_user_id

    validate_user_id(args.user)
    mem = open_memory(args, dense=False)  # forgetting never creates a store; no embedding model needed to delete
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
            print(
                f"{args.user}: forgot {before['packets']} turns, {before['descriptors']} descriptors, {vectors} vectors"
            )
        else:
            print(f"{args.user}: nothing stored")
        return 0
    finally:
        mem.close()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("forget", help="remove everything stored for a user, or single turns (--turn)")
    add_store_args(p, user=False)
    p.add_argument("--user", "--user-id", dest="user", required=True, help="user id")
    p.add_argument("--turn", action="append", default=[], metavar="DIA_ID", help="remove only this turn (repeatable)")
    p.set_defaults(func=cmd_forget)
