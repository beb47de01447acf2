"""Real servers for the slow integration tests: a free loopback port, start, wait until ready, always stop."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


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
