"""A Chroma server that is gone, stops answering, or fails: every call returns within the client's timeout
($MEMCOMPILE_CHROMA_TIMEOUT) with one line naming the vector store, and a writer lets go of the user's writer lock."""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.servers import free_port, start_detached, stop_group

from memcompile_langgraph import MemCompile
from memcompile_langgraph.store.protocols import VectorStoreError

from .harness import memcompile, synthetic_turns, write_json

pytestmark = pytest.mark.slow  # a chroma server of its own per test
TIMEOUT = 3  # seconds: the setting the tests run with


@pytest.fixture
def chroma_server(tmp_path):
    """A `chroma run` of this test's own, to kill or stop: (url, pid of its process group)."""
    beside = Path(sys.executable).parent / "chroma"
    chroma = str(beside) if beside.is_file() else shutil.which("chroma")
    if chroma is None:
        pytest.skip("the `chroma` command (chromadb's server) is not installed")
    port = free_port()
    cmd = [chroma, "run", "--path", str(tmp_path / "chroma-db"), "--host", "127.0.0.1", "--port", str(port)]
    pid = start_detached(cmd, f"http://127.0.0.1:{port}/api/v2/heartbeat", tmp_path / "chroma.log")
    yield f"http://127.0.0.1:{port}", pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGCONT)
    stop_group(pid)


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch):
    monkeypatch.setenv("MEMCOMPILE_CHROMA_TIMEOUT", str(TIMEOUT))


def _one_line_failure(call, within: float) -> str:
    started = time.monotonic()
    with pytest.raises(VectorStoreError) as err:
        call()
    assert time.monotonic() - started < within
    msg = str(err.value)
    assert "\n" not in msg and "vector store" in msg
    return msg


def _lock_is_free(mem: MemCompile, user: str) -> bool:
    with mem.engine.records.write_lock(user, blocking=False) as held:
        return held


@pytest.mark.parametrize("fault", ["killed", "stopped"])
def test_a_server_gone_or_silent_mid_session_fails_each_call_in_one_line(tmp_path, chroma_server, embeddings, fault):
    url, pid = chroma_server
    mem = MemCompile(tmp_path / "store", embeddings=embeddings, chroma_url=url)
    mem.add_turns(synthetic_turns("ann", 6), user_id="ann")
    os.killpg(pid, signal.SIGKILL if fault == "killed" else signal.SIGSTOP)
    # a write, while it holds the user's writer lock; then a read of the vectors, and a delete
    msg = _one_line_failure(lambda: mem.add_turns(synthetic_turns("ann", 2, seed=1), user_id="ann"), 6 * TIMEOUT)
    assert url in msg and ("no answer within" in msg if fault == "stopped" else "refused or dropped" in msg), msg
    assert _lock_is_free(mem, "ann")
    _one_line_failure(lambda: mem.engine.vectors.ids("ann"), 3 * TIMEOUT)
    _one_line_failure(lambda: mem.delete_turns("ann", ["D1:1"]), 3 * TIMEOUT)
    assert _lock_is_free(mem, "ann")
    mem.close()


@contextlib.contextmanager
def _silent_listener(answer: Callable[[socket.socket], None] | None = None):
    """A loopback TCP port that accepts connections and never answers (packets dropped beyond it); with `answer`,
    each connection is handed to it first, in a thread of its own."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                accepted.append(sock.accept()[0])
                if answer is not None:
                    threading.Thread(target=answer, args=(accepted[-1],), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        sock.close()


class _Failing(http.server.BaseHTTPRequestHandler):
    """Answers the heartbeat, and 503 to everything else: a server that is up but failing."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's method name
        body = b'{"nanosecond heartbeat": 1}' if self.path.endswith("/heartbeat") else b"unavailable"
        self.send_response(200 if self.path.endswith("/heartbeat") else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("server", ["silent", "failing"])
def test_opening_against_a_silent_or_failing_server_is_one_line_in_the_timeout(tmp_path, embeddings, server):
    store = tmp_path / "store"
    MemCompile(store, embeddings=None, dense=False).add_turns(synthetic_turns("ann", 3), user_id="ann")
    with contextlib.ExitStack() as stack:
        if server == "silent":
            url = stack.enter_context(_silent_listener())
        else:
            httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
            threading.Thread(target=httpd.serve_forever, daemon=True).start()
            stack.callback(httpd.server_close)
            stack.callback(httpd.shutdown)
            url = f"http://127.0.0.1:{httpd.server_address[1]}"
        mem = MemCompile(store, embeddings=embeddings, chroma_url=url)
        msg = _one_line_failure(lambda: mem.add_turns(synthetic_turns("ann", 2, seed=1), user_id="ann"), 4 * TIMEOUT)
        assert ("no answer within" in msg) if server == "silent" else ("503" in msg), msg
        assert _lock_is_free(mem, "ann")
        mem.close()
        path = write_json(tmp_path / "more.json", synthetic_turns("ann", 2, seed=2))
        started = time.monotonic()
        run = memcompile("ingest", path, "--store", store, "--chroma-url", url, "--user", "ann", "--quiet", timeout=120)
        # one line: the vector store's failure, or ingest's own check that the server answers before it stores
        assert run.code == 2 and len(run.err_lines) == 1 and ("vector store" in run.err or "Chroma server" in run.err)
        assert time.monotonic() - started < 60


def test_a_timeout_that_is_no_number_of_seconds_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCOMPILE_CHROMA_TIMEOUT", "soon")
    mem = MemCompile(tmp_path / "store", embeddings=None, dense=False, chroma_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(VectorStoreError, match="MEMCOMPILE_CHROMA_TIMEOUT"):
        mem.engine.vectors.ids("ann")
    mem.close()
