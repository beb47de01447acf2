"""Serving an ASGI app over HTTP with bounded requests: every server of the package (`memcompile mcp --http`) goes
through here.

A request's headers and body are bounded before the app (and so before any token check) sees them: the headers by
the HTTP parser itself (h11's buffer limit; httptools, which uvicorn prefers when installed, buffers headers of any
size), which answers 400 and closes the connection without reading further; the body by `BoundedBody`, which answers
413 as soon as the declared or received length passes the limit. `listen` binds before anything is announced, so a
port in use is one line (an OSError) and nothing claims to be serving.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_HEADER_BYTES = 64 * 1024  # request line and headers: far above any bearer token or browser's cookies
MAX_BODY_BYTES = 4 * 1024 * 1024  # the MCP SDK's own default for a posted message


class BoundedBody:
    """ASGI middleware: a request body over max_bytes is answered 413 before the app runs, and the rest is not read.

    The body (at most max_bytes) is read first and handed to the app whole; later receives (a client's disconnect
    during a streamed response) go to the server as usual."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_bytes:
            await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:  # a chunked body declares no length
                await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
                return
            if not message.get("more_body", False):
                break
        first: Message | None = {"type": "http.request", "body": bytes(body), "more_body": False}

        async def replay() -> Message:
            nonlocal first
            if first is None:
                return await receive()
            message, first = first, None
            return message

        await self.app(scope, replay, send)


async def _refuse(send: Send, status: int, text: str) -> None:
    body = f"{text}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + [(b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening; OSError with one line when the address cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait for TIME_WAIT
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(
    app: ASGIApp,
    sock: socket.socket,
    *,
    max_header_bytes: int = MAX_HEADER_BYTES,
    max_body_bytes: int = MAX_BODY_BYTES,
    log_level: str = "warning",
) -> None:
    """Serve app on a socket from `listen` until SIGINT or SIGTERM, then shut down and return (no re-raised
    signal: stopping the server is its normal end)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn's own raises the signal again once it has shut down (exit 130 or 143, and a traceback)
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            before = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(
        BoundedBody(app, max_body_bytes),
        http="h11",
        h11_max_incomplete_event_size=max_header_bytes,
        log_level=log_level,
        timeout_graceful_shutdown=5,  # an open event stream must not hold the exit for ever
    )
    Server(config).run(sockets=[sock])
