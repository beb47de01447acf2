"""`memcompile export`: a user's stored turns as JSONL, one turn a line, ready for `memcompile ingest` into any store
(the right of access; moving between backends)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from . import UsageError
from .core import add_store_args, command_settings, open_memory, require_user


def cmd_export(args: argparse.Namespace) -> int:
    from ..ingest.loaders import EXPORT_END, EXPORT_HEAD
    from ..users import validate_user_id

    user = validate_user_id(args.user)
    _check_outside_store(args.output, command_settings(args).path)
    mem = open_memory(args, dense=False)  # records only: no embedding model to read them back
    try:
        require_user(mem, user, args.store)
        with _output(args.output) as out:
            out.write(json.dumps({EXPORT_HEAD: 1, "user": user}, ensure_ascii=False) + "\n")
            n = 0
            for turn in mem.export_turns(user):
                out.write(json.dumps(turn, ensure_ascii=False) + "\n")
                n += 1
            out.write(json.dumps({EXPORT_END: n}) + "\n")  # `ingest` refuses a file without it: one cut short
        to_file = args.output not in (None, "-")
        print(f"{user}: exported {n} turns" + (f" to {args.output}" if to_file else ""), file=sys.stderr)
        return 0
    finally:
        mem.close()


def _check_outside_store(output: str | None, store: str | Path | None) -> None:
    """UsageError for an output file in the store's own folder: renamed over one of the store's files (its
    database, say), the export would destroy what it copies."""
    if output in (None, "-") or store is None:
        return
    if Path(output).resolve().is_relative_to(Path(store).resolve()):
        raise UsageError(f"--output {output} is inside the store {store}: write the export outside it")


@contextlib.contextmanager
def _output(path: str | None) -> Iterator[TextIO]:
    """stdout, or a file only its owner can read (what it holds is as private as the store), written whole or not
    at all: into a temporary file beside it, renamed over it once synced, so a failed export (a full disk) leaves
    an earlier file at that path as it was."""
    if path is None or path == "-":  # "-": stdout, as the command-line convention has it
        yield sys.stdout
        return
    target = Path(path)
    temp = None
    try:
        # made inside the try: a missing or unwritable folder is named as given, not by the temporary file's name
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")  # mode 0600
        with open(fd, "w", encoding="utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, target)
    except BaseException as exc:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        if isinstance(exc, OSError):
            kept = "the earlier file there is kept" if target.exists() else "nothing written"
            raise UsageError(f"{path}: cannot write ({exc.strerror or exc}); {kept}") from None
        raise
    with contextlib.suppress(OSError):  # the rename itself outlives a crash once the folder is synced
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a user's stored turns as JSONL (re-import with `memcompile ingest`)")
    add_store_args(p, user=False)
    p.add_argument("--user", "--user-id", dest="user", required=True, help="whose turns")
    p.add_argument(
        "--output",
        "-o",
        default=None,
        metavar="FILE",
        help="write here (mode 0600; whole or not at all) instead of stdout ('-': stdout)",
    )
    p.set_defaults(func=cmd_export)
