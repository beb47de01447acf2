"""`memcompile mcp --store DIR [--http HOST:PORT --tokens FILE]`: serve the memory over MCP (stdio, or streamable HTTP)."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import sys

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


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] or None if text else None


def http_serving(args: argparse.Namespace) -> dict:
    """What serving over HTTP needs, checked before the store is opened: the address and access_rules()."""
    host, port = parse_http(args.http)
    return {"host": host, "port": port, **access_rules(args, host, port)}


def access_rules(args: argparse.Namespace, host: str, port: int) -> dict:
    """Who may reach a served surface (the MCP server, the inspector): the tokens (None with --no-auth, or on
    loopback without --tokens) and the allowed Host/Origin values; a non-loopback address without tokens is refused."""
    from ..integrations.tokens import BadTokensFile, Tokens

    if args.tokens and args.no_auth:
        raise UsageError("--tokens and --no-auth contradict each other: give one")
    if not args.tokens and not args.no_auth and not is_loopback(host):
        raise UsageError(
            f"refusing to serve every user's memory on {f'{host}:{port}' if port else host} without authentication: "
            "give --tokens FILE (lines 'TOKEN USER_ID' or 'TOKEN *'), or --no-auth to do it anyway"
        )
    try:
        tokens = Tokens.load(args.tokens, private=True) if args.tokens else None
    except BadTokensFile as exc:
        raise UsageError(str(exc)) from None
    return {
        "tokens": tokens,
        "allowed_hosts": _names(args.allowed_hosts),
        "allowed_origins": _names(args.allowed_origins),
    }


def cmd_mcp(args: argparse.Namespace) -> int:
    http = http_serving(args) if args.http else None
    if http is None and (args.tokens or args.no_auth or args.allowed_hosts or args.allowed_origins):
        raise UsageError("--tokens, --no-auth, --allowed-hosts and --allowed-origins are for --http (stdio needs none)")
    try:  # mcp is imported only by this command
        from ..integrations.http_limits import listen, serve
        from ..integrations.mcp_server import build_server
    except ImportError as exc:
        raise UsageError(
            f"the MCP server needs the mcp package: pip install 'memcompile-langgraph[mcp]' ({exc})"
        ) from None

    with contextlib.ExitStack() as stack:
        # bound before the store is opened and anything is announced: a port in use is one line
        sock = stack.enter_context(listen(http["host"], http["port"])) if http else None
        mem = open_memory(args, create=True)
        stack.callback(mem.close)
        if http is None or sock is None:
            serve_stdio(build_server(mem))
        else:
            server = build_server(mem, **http)
            host = f"[{http['host']}]" if ":" in http["host"] else http["host"]
            guard = f"{len(server.security.allowed_hosts)} allowed Host values"
            access = "bearer tokens required" if http["tokens"] else "NO authentication (--no-auth or loopback)"
            print(f"memcompile: MCP server at http://{host}:{http['port']}/mcp ({access}; {guard})", file=sys.stderr)
            serve(server.http_app(), sock)
    return 0


def serve_stdio(server) -> None:
    """mcp 1's stdio transport closes the process's stdout when the client goes (its wrapper of sys.stdout.buffer
    is collected); nothing is written there afterwards, but the exit's flush would fail on it."""
    server.run("stdio")
    if sys.stdout.closed:
        sys.stdout = open(os.devnull, "w")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve the memory as an MCP server (tools remember, recall, forget, stats)")
    add_store_args(p, create=True, user=False)
    p.add_argument(
        "--http",
        default=None,
        metavar="[HOST:]PORT",
        help="streamable HTTP at http://HOST:PORT/mcp (default host 127.0.0.1) instead of stdio",
    )
    add_access_args(p)
    add_llm_args(p)
    p.set_defaults(func=cmd_mcp)


def add_access_args(p: argparse.ArgumentParser) -> None:
    """--tokens, --no-auth, --allowed-hosts, --allowed-origins: who may reach a served surface (access_rules)."""
    p.add_argument(
        "--tokens",
        default=None,
        metavar="FILE",
        help="require 'Authorization: Bearer TOKEN' on every HTTP request; FILE has lines 'TOKEN USER_ID' (the token "
        "may use only that user) or 'TOKEN *' (any user). Needed to bind a non-loopback address",
    )
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="serve a non-loopback address without tokens: anyone who reaches it reads and forgets every user",
    )
    p.add_argument(
        "--allowed-hosts",
        default=None,
        metavar="H1,H2",
        help="Host header values accepted (e.g. mcp.example.org:443, or name:* for any port); "
        "default: derived from the bound address",
    )
    p.add_argument(
        "--allowed-origins",
        default=None,
        metavar="O1,O2",
        help="Origin header values accepted (e.g. https://app.example.org); default: http(s):// of the allowed hosts",
    )
