"""`memcompile export`: a user's stored turns as JSONL, one turn a line, ready for `memcompile ingest` into any store
(the right of access; moving between backends)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from .core import add_store_args, open_memory, require_user


def cmd_export(args: argparse.Namespace) -> int:
    from ..users import validate_user_id

    user = validate_user_id(args.user)
    mem = open_memory(args, dense=False)  # records only: no embedding model to read them back
    try:
        require_user(mem, user, args.store)
        with _output(args.output) as out:
            n = 0
            for turn in mem.export_turns(user):
                out.write(json.dumps(turn, ensure_ascii=False) + "\n")
                n += 1
        print(f"{user}: exported {n} turns" + (f" to {args.output}" if args.output else ""), file=sys.stderr)
        return 0
    finally:
        mem.close()


@contextlib.contextmanager
def _output(path: str | None):
    """stdout, or a file only its owner can read (what it holds is as private as the store)."""
    if path is None:
        yield sys.stdout
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode otherwise
    with open(fd, "w", encoding="utf-8") as fh:
        yield fh


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a user's stored turns as JSONL (re-import with `memcompile ingest`)")
    add_store_args(p, user=False)
    p.add_argument("--user", "--user-id", dest="user", required=True, help="whose turns")
    p.add_argument("--output", "-o", default=None, metavar="FILE", help="write here (mode 0600) instead of stdout")
    p.set_defaults(func=cmd_export)
