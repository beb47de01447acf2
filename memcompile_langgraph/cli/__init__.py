"""`memcompile` command line: one subcommand module per concern, each exposing register(subparsers)."""
from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
from importlib import import_module

COMMAND_MODULES = ("core", "ask_cmd", "forget_cmd", "eval_cmd", "bench_cmd")


class UsageError(Exception):
    """A user error: printed as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memcompile", description="MemCompile long-term memory for LangGraph agents")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from ..loaders import UnusableInput
    from ..store.protocols import StoreError
    from ..users import InvalidUserId

    try:
        return int(args.func(args) or 0)
    except (UsageError, UnusableInput, InvalidUserId, StoreError, ValueError, OSError, sqlite3.DatabaseError) as exc:
        if args.debug:
            raise
        if isinstance(exc, sqlite3.DatabaseError):  # a damaged or foreign file where the store's database should be
            exc = f"store {getattr(args, 'store', '')!s}: {exc}"
        print(f"memcompile: error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memcompile: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
