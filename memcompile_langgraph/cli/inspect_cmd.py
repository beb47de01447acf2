"""`memcompile inspect --store DIR [--host H --port P --tokens FILE]`: a local web page over the store (the users,
their turns by session, a query taken apart stage by stage, forgetting with a confirmation)."""

from __future__ import annotations

import argparse

from . import UsageError
from .core import add_store_args, open_memory
from .llm_args import add_llm_args
from .mcp_cmd import DEFAULT_HOST, access_rules, add_access_args, is_loopback
from .profile_args import add_profile_arg


def port_number(value: str) -> int:
    if not value.strip().isdecimal() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535 (0: a free one), got {value!r}")
    return int(value)


def cmd_inspect(args: argparse.Namespace) -> int:
    host = args.host.strip("[]")
    if not host:
        raise UsageError("--host is empty")
    access = access_rules(args, host, args.port)
    try:
        from ..integrations.inspector.app import serve  # starlette, uvicorn and the MCP SDK: the mcp extra
    except ImportError as exc:
        raise UsageError(
            f"the inspector needs the mcp extra: pip install 'memcompile-langgraph[inspect]' ({exc})"
        ) from None
    mem = open_memory(args)
    if access["tokens"]:
        how = "tokens required"
    elif is_loopback(host):
        how = "no authentication: loopback"
    else:
        how = "NO authentication (--no-auth)"

    def announce(url: str) -> None:
        print(f"memcompile: inspector at {url} ({how})", flush=True)

    try:
        serve(mem, host, args.port, announce=announce, **access)
    finally:
        mem.close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect", help="a local web page: users, turns by session, why a query picked each turn, forget"
    )
    add_store_args(p, user=False)
    p.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this machine only)"
    )
    p.add_argument("--port", type=port_number, default=0, help="port (default 0: a free one; the URL is printed)")
    add_access_args(p)
    add_llm_args(p)
    add_profile_arg(p)
    p.set_defaults(func=cmd_inspect)
