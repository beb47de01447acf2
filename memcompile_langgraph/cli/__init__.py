"""`memcompile` command line: one subcommand module per concern, each exposing register(subparsers)."""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
from importlib import import_module

from .. import __version__

COMMAND_MODULES = (
    "core",
    "stats_cmd",
    "ask_cmd",
    "forget_cmd",
    "export_cmd",
    "repair_cmd",
    "eval_cmd",
    "bench_cmd",
    "mcp_cmd",
    "inspect_cmd",
)


class UsageError(Exception):
    """A user error: printed as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memcompile", description="MemCompile long-term memory for LangGraph agents")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's own flush at exit
        return code
    except BrokenPipeError:
        return reader_gone()
    except KeyboardInterrupt:
        print("memcompile: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a traceback (unless --debug): one line, 2 for the user's input or store
        if args.debug:
            raise
        line, code = error_line(exc, getattr(args, "store", None))
        print(line, file=sys.stderr)
        return code


def reader_gone() -> int:
    """The reader of stdout closed it (`memcompile stats | head -1`): it has what it wanted, so exit quietly.
    stdout now points at /dev/null, so the interpreter's flush of what is still buffered cannot fail at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def error_line(exc: Exception, store: str | None) -> tuple[str, int]:
    """The one line a failed command prints, and its exit code: 2 when the input, the arguments or the store are
    at fault, 1 for anything else (a bug: --debug shows its traceback)."""
    from ..extras import MissingExtra, missing_extra
    from ..store.protocols import StoreError

    where = f"store {store}: " if store else ""
    if isinstance(exc, ImportError) and not isinstance(exc, MissingExtra):
        exc = missing_extra(exc, "this command") or exc  # an optional dependency the command needs
    if isinstance(exc, MissingExtra):
        message, code = str(exc), 2
    elif isinstance(exc, sqlite3.DatabaseError):  # a damaged or foreign file where the store's database should be
        message, code = f"{where}{exc}", 2
    elif type(exc).__module__.split(".")[0] == "chromadb":  # the vector store's files could not be used
        message, code = f"{where}vector store: {exc or type(exc).__name__}", 2
    elif isinstance(exc, (UsageError, ValueError, OSError, StoreError)):  # UnusableInput, InvalidUserId: ValueErrors
        message, code = str(exc) or type(exc).__name__, 2
    else:
        message, code = f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", 1
    lines = message.strip().splitlines() or [""]
    return f"memcompile: error: {lines[0]}", code


if __name__ == "__main__":
    sys.exit(main())
