"""Where a Chroma server is, and whether it answers: one bounded question, asked before a memory opens on it and
before chromadb's own client (which waits forever) is made. Light: chromadb is not imported."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlparse

import httpx

from .protocols import VectorStoreError
from .timeouts import env_seconds

TIMEOUT_ENV = "MEMCOMPILE_CHROMA_TIMEOUT"
DEFAULT_TIMEOUT = 5.0  # seconds any one operation on a Chroma server may take, all its requests together


def server_address(url: str) -> tuple[str, int, bool]:
    """(host, port, https) of a Chroma server URL, "host:port" too; chromadb's defaults where a part is missing."""
    u = urlparse(url if "://" in url else f"http://{url}")
    return u.hostname or "127.0.0.1", u.port or 8000, u.scheme == "https"


def server_timeout() -> float:
    """Seconds one operation on a Chroma server may take: $MEMCOMPILE_CHROMA_TIMEOUT, else 5."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT, "a Chroma server call may take", VectorStoreError)


class Deadline:
    """Ends what httpx clients wait for once `seconds` have passed: httpx bounds each read, not the whole answer,
    so a server that sends a byte at a time would hold a call forever. At the deadline the sockets of the clients'
    open connections are shut down (every call waiting on them fails at once), and `fired` says so. `clients` may
    grow while the deadline runs (chromadb makes its sessions as its client is constructed)."""

    def __init__(self, clients: list[httpx.Client], seconds: float):
        self.clients, self.fired = clients, False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        self.fired = True
        for client in list(self.clients):
            shut_connections(client)


def shut_connections(client: httpx.Client) -> None:
    """Shuts down the sockets of the client's open connections (through httpx's and httpcore's internals, looked up
    defensively: a version without them is left as it is, bounded by its per-read timeouts only)."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    for connection in list(getattr(pool, "connections", ())):
        stream = getattr(getattr(connection, "_connection", None), "_network_stream", None)
        sock = getattr(stream, "_sock", None)
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def heartbeat(url: str, timeout: float) -> None:
    """Asks the Chroma server at url whether it is there; raises httpx's error when no whole answer comes within
    timeout seconds. Any answer passes, an error status included: what it says is the vector store's business."""
    host, port, ssl = server_address(url)
    with httpx.Client(timeout=timeout) as client, Deadline([client], timeout) as deadline:
        try:
            client.get(f"{'https' if ssl else 'http'}://{host}:{port}/api/v2/heartbeat")
        except httpx.HTTPError as exc:
            if deadline.fired:
                raise httpx.ReadTimeout(f"no whole answer within {timeout:g} s") from exc
            raise


def chroma_unreachable(url: str, timeout: float = 1.0) -> str | None:
    """Why the Chroma server at url does not answer, in one line (None when it does): a memory opened on it still
    answers queries from current snapshot files, so without this line nobody would hear of it."""
    try:
        heartbeat(url, timeout)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:  # ValueError: a port that is not a number
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return None
