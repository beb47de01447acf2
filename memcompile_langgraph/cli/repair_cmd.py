"""`memcompile repair`: rebuild the vectors of a store (or of one user) from its records; `memcompile reembed`: the
same for every user after making this process's embedding model the store's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ..ingest.progress import STEPS


def cmd_repair(args: argparse.Namespace) -> int:
    from ..memory import MemCompile
    from ..users import validate_user_id
    from . import UsageError

    if args.user is not None:
        validate_user_id(args.user)
    if not Path(args.store).is_dir():
        raise UsageError(f"no store at {args.store}")  # repairing must not create one
    mem = MemCompile(args.store, chroma_url=args.chroma_url)
    progress = None if args.quiet else RepairProgress()
    try:
        if args.switch:
            mem.switch_model()
            print(f"the store's embedding model is now {mem.engine.embedding_id}")
        report = mem.repair(args.user, progress=progress)
    finally:
        mem.close()
    if report["moved_aside"]:
        print(
            f"the damaged vector store was moved to {report['moved_aside']} (its vectors are made again below; the "
            "next forget or delete_turns removes it whole)"
        )
    for user, packets in report["users"].items():
        print(f"{user}: {packets} turns, {report['made'][user]} vectors made again from the records")
    if not report["users"]:
        print("nothing stored")
    return 0


class RepairProgress:
    """Vectors made per user, a line on stderr at each quarter of them (as ingest says its turns in a log)."""

    def __init__(self, stream: TextIO | None = None):
        self._stream = stream or sys.stderr
        self._user: str | None = None
        self._said = 0  # quarters said of the current user

    def __call__(self, user: str, made: int, total: int) -> None:
        if user != self._user:
            self._user, self._said = user, 0
        reached = STEPS * made // total if total else STEPS
        if reached > self._said:
            self._said = reached
            print(f"memcompile: re-embed {user} {made}/{total} vectors", file=self._stream, flush=True)


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
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_repair, switch=False)
    p = sub.add_parser(
        "reembed",
        help="make this process's embedding model the store's and re-embed every user with it (the one step that "
        "changes a store's model)",
    )
    p.add_argument("--store", required=True, help="store directory (must exist)")
    p.add_argument("--chroma-url", default=None, help="vectors kept in a Chroma server")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_repair, switch=True, user=None)
