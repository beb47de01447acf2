"""`memcompile mcp --store DIR [--http HOST:PORT]`: serve the memory over MCP (stdio, or streamable HTTP)."""

from __future__ import annotations

import argparse
import ipaddress

from . import UsageError
from .core import add_store_args, open_memory
from .llm_args import add_llm_args

DEFAULT_HOST = "127.0.0.1"


def parse_http(text: str) -> tuple[str, int]:
    """PORT or HOST:PORT ([v6]:PORT); without a host the server listens on loopback only."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else DEFAULT_HOST
    if not port.isdecimal() or not 0 < int(port) < 65536:
        raise UsageError(f"--http takes PORT or HOST:PORT, got {text!r}")
    if not host:
        raise UsageError(f"--http has an empty host: {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def cmd_mcp(args: argparse.Namespace) -> int:
    import sys

    address = parse_http(args.http) if args.http else None
    try:
        from ..integrations.mcp_server import build_server  # mcp is imported only by this command
    except ImportError as exc:
        raise UsageError(
            f"the MCP server needs the mcp package: pip install 'memcompile-langgraph[mcp]' ({exc})"
        ) from None

    mem = open_memory(args, create=True)
    try:
        if address is None:
            build_server(mem).run("stdio")
        else:
            host, port = address
            if not is_loopback(host):
                print(f"memcompile: serving memory on {host}:{port} without authentication", file=sys.stderr)
            build_server(mem, host, port).run("streamable-http")
    finally:
        mem.close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve the memory as an MCP server (tools remember, recall, forget, stats)")
    add_store_args(p, create=True, user=False)
    p.add_argument(
        "--http",
        default=None,
        metavar="[HOST:]PORT",
        help="streamable HTTP at http://HOST:PORT/mcp (default host 127.0.0.1) instead of stdio",
    )
    add_llm_args(p)
    p.set_defaults(func=cmd_mcp)
