"""Real servers for the slow integration tests: a free loopback port, start, wait until ready, always stop; and
servers shared by the processes of one test run (the xdist workers), started once, stopped by the last user."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from .paths import ROOT

# `langgraph dev` offline: no analytics, no version check, no LangSmith tracing, no OpenAI key (the offline reader);
# no bytecode written: servers of parallel tests import one graphs/ folder, and each one's __pycache__ writes would
# make the others' file watchers reload
LANGGRAPH_OFFLINE = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "OPENAI_API_KEY": "",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def running(
    cmd: list[str],
    ready_url: str,
    log: Path,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    timeout: float = 120,
) -> Iterator[subprocess.Popen]:
    """Start cmd in its own process group, wait for ready_url to answer 200, and stop the whole group on exit."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while not _ready(ready_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{cmd[0]} did not become ready (exit {proc.poll()}):\n{log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.5)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def langgraph_dev(tmp: Path, config: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`langgraph dev` serving graphs/<config> offline on a free loopback port, its memory in tmp/store; yields its
    base URL. The server resolves the config's paths and writes its .langgraph_api/ state in its working directory:
    tmp, which sees the repository's graphs/, so nothing is left in the repository. --no-reload: files changing
    under the repository must not restart the server mid-test. A config written into tmp (an operator's own) is
    served in place of graphs/<config>."""
    port = free_port()
    (tmp / "graphs").symlink_to(ROOT / "graphs", target_is_directory=True)
    path = config if (tmp / config).is_file() else f"graphs/{config}"
    cmd = ["langgraph", "dev", "--config", path, "--port", str(port), "--host", "127.0.0.1"]
    cmd += ["--no-browser", "--no-reload"]
    env = {**LANGGRAPH_OFFLINE, "MEMCOMPILE_STORE": str(tmp / "store"), **(env or {})}
    base = f"http://127.0.0.1:{port}"
    with running(cmd, f"{base}/ok", tmp / "langgraph.log", env=env, cwd=str(tmp)):
        yield base


@contextlib.contextmanager
def shared(state_dir: Path, name: str, start: Callable[[], dict], stop: Callable[[dict], None]) -> Iterator[dict]:
    """A server for every process of a test run that asks for it (they share state_dir): the first to ask starts it
    (start() returns what the others need to reach and stop it), the last to let go stops it."""
    from filelock import FileLock

    state, lock = state_dir / f"{name}.json", FileLock(str(state_dir / f"{name}.lock"))
    with lock:
        server = json.loads(state.read_text()) if state.is_file() else {**start(), "users": 0}
        server["users"] += 1
        state.write_text(json.dumps(server))
    try:
        yield server
    finally:
        with lock:
            server = json.loads(state.read_text())
            server["users"] -= 1
            if server["users"]:
                state.write_text(json.dumps(server))
            else:
                state.unlink()
                stop(server)


def start_detached(cmd: list[str], ready_url: str, log: Path, timeout: float = 120) -> int:
    """Start cmd in a process group of its own that outlives this process; its pid once ready_url answers 200."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not _ready(ready_url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_group(proc.pid)
            raise RuntimeError(f"{cmd[0]} did not become ready (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return proc.pid


def stop_group(pid: int, timeout: float = 20) -> None:
    """Stop the process group a start_detached() began, from any process of the run."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped here when this process started it
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
