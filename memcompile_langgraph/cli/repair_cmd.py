"""`memcompile repair`: rebuild the vectors of a store (or of one user) from its records."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_repair(args: argparse.Namespace) -> int:
    from ..memory import MemCompile
    from ..users import validate_user_id
    from . import UsageError

    if args.user is not None:
        validate_user_id(args.user)
    if not Path(args.store).is_dir():
        raise UsageError(f"no store at {args.store}")  # repairing must not create one
    mem = MemCompile(args.store, chroma_url=args.chroma_url)
    try:
        report = mem.repair(args.user)
    finally:
        mem.close()
    if report["moved_aside"]:
        print(f"the damaged vector store was moved to {report['moved_aside']}")
    for user, packets in report["users"].items():
        print(f"{user}: {packets} turns, vectors rebuilt from the records")
    if not report["users"]:
        print("nothing stored")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("repair", help="rebuild vectors from the records (a damaged or out-of-step vector store)")
    p.add_argument("--store", required=True, help="store directory (must exist)")
    p.add_argument(
        "--user",
        "--user-id",
        dest="user",
        default=None,
        help="only this user (default: every user; always every user when the vector store itself is damaged)",
    )
    p.add_argument("--chroma-url", default=None, help="vectors kept in a Chroma server")
    p.set_defaults(func=cmd_repair)
