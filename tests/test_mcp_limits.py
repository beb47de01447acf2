"""`memcompile mcp --http` under requests an attacker sends: headers and bodies of any size are refused before the
token check reads them, with bounded memory, while other clients are served; and the server's start and stop as an
operator meets them (a port in use, SIGINT/SIGTERM)."""

import signal
import socket
import subprocess
import threading
import time

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from support.servers import free_port, running
from test_mcp_auth import BEAGLE, CLI, ENV, INIT, MCP_HEADERS, TOM, result, session_calls

from memcompile_langgraph.integrations.http_limits import MAX_BODY_BYTES, MAX_HEADER_BYTES

pytestmark = pytest.mark.slow

HUGE = 64 * 1024 * 1024  # an Authorization header far over any limit


def peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


@pytest.fixture
def tokens_server(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOM} tom\n")
    tokens.chmod(0o600)
    port = free_port()
    cmd = [*CLI, "mcp", "--store", str(tmp_path / "store"), "--http", str(port), "--tokens", str(tokens)]
    log = tmp_path / "mcp.log"
    with running(cmd, f"http://127.0.0.1:{port}/health", log, env=ENV) as proc:
        yield proc, port, log


def send_huge_header(port: int, out: dict) -> None:
    """An unauthenticated POST whose Authorization header is HUGE bytes, sent in chunks until the server answers
    or closes; records how much was sent and the status line."""
    chunk = b"A" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer ".encode())
        sent = 0
        try:
            while sent < HUGE:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.sendall(b"\r\nContent-Length: 0\r\n\r\n")
        except OSError:  # the server closed the connection: it stopped reading
            pass
        out["sent"] = sent
        sock.settimeout(60)
        try:
            out["reply"] = sock.recv(200)
        except OSError:
            out["reply"] = b""


async def test_huge_header_is_refused_unread_and_others_are_served(tokens_server):
    proc, port, log = tokens_server
    url = f"http://127.0.0.1:{port}/mcp"
    (stored,) = await session_calls(url, TOM, [("remember", {"turns": [BEAGLE], "user_id": "tom"})])
    assert stored[1]["stored"] == 1
    before = peak_rss_kb(proc.pid)
    attack: dict = {}
    attacker = threading.Thread(target=send_huge_header, args=(port, attack))
    attacker.start()
    served = 0
    while not served or attacker.is_alive():  # other clients are served while the attacker sends
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).text == "ok"
        served += 1
    attacker.join()
    assert served >= 1
    # the server answered (400, or closed the connection) long before the header was sent: it stopped reading
    assert attack["sent"] < HUGE // 2, attack
    assert attack["reply"] == b"" or attack["reply"].startswith((b"HTTP/1.1 400", b"HTTP/1.1 431")), attack
    grown = peak_rss_kb(proc.pid) - before
    assert grown * 1024 < HUGE // 8, f"the server's peak memory grew by {grown} kB"
    (recalled,) = await session_calls(url, TOM, [("recall", {"query": "What is the beagle called?", "user_id": "tom"})])
    assert "Biscuit" in recalled[1]["context"]  # nothing lost, still serving
    # a header just under the limit still reaches the token check
    near = {**MCP_HEADERS, "Authorization": "Bearer " + "x" * (MAX_HEADER_BYTES - 1024)}
    assert httpx.post(url, json=INIT, headers=near).status_code == 401
    assert "Traceback" not in log.read_text()


def test_oversized_body_is_refused_before_it_is_read(tokens_server):
    _, port, _ = tokens_server
    url = f"http://127.0.0.1:{port}/mcp"
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {TOM}"}
    with socket.create_connection(("127.0.0.1", port)) as sock:  # declares a body it never sends
        head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
        sock.sendall(head.encode())
        sock.settimeout(30)
        assert sock.recv(100).startswith(b"HTTP/1.1 413")

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b" " * 65536

    assert httpx.post(url, content=chunks(), headers=auth).status_code == 413
    assert httpx.post(url, json=INIT, headers=auth).status_code == 200  # a body under the limit is served


def test_port_in_use_is_one_line_and_announces_nothing(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            [*CLI, "mcp", "--store", str(tmp_path / "s"), "--http", str(port)],
            capture_output=True,
            text=True,
            env={**ENV, "PATH": "/usr/bin:/bin"},
            timeout=120,
        )
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in run.stderr and "MCP server at" not in run.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_signal_stops_the_http_server_cleanly(tmp_path, sig):
    port = free_port()
    cmd = [*CLI, "mcp", "--store", str(tmp_path / "store"), "--http", str(port)]
    log = tmp_path / "mcp.log"
    with running(cmd, f"http://127.0.0.1:{port}/health", log, env=ENV) as proc:
        url = f"http://127.0.0.1:{port}/mcp"
        async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()  # a session open (its event stream too) while the signal comes
            error, stats = result(await session.call_tool("stats", {"user_id": "tom"}))
            assert not error and stats["packets"] == 0
            proc.send_signal(sig)
            start = time.monotonic()
            while proc.poll() is None and time.monotonic() - start < 30:
                time.sleep(0.1)
        assert proc.wait(timeout=30) == 0
    text = log.read_text()
    assert "Traceback" not in text and "error" not in text.lower(), text
