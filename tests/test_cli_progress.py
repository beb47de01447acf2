"""Ingest progress: two bars on a terminal; plain lines elsewhere (a pipe, a log file), never cursor escapes."""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest
from support.paths import DATA

pytestmark = pytest.mark.slow  # a process of its own per case

TURNS = DATA / "cat_and_cello.jsonl"


def _ingest(tmp_path, stderr) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "memcompile_langgraph", "ingest", str(TURNS), "--store", str(tmp_path / "s")]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, timeout=300, env={**os.environ})


def test_progress_into_a_pipe_is_plain_lines(tmp_path, model_dir):
    proc = _ingest(tmp_path, subprocess.PIPE)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "\x1b" not in err and "\r" not in err, repr(err)
    lines = err.splitlines()
    assert "memcompile: extract 2/2 turns" in lines and "memcompile: embed 2/2 turns" in lines


def test_progress_on_a_terminal_is_two_bars(tmp_path, model_dir):
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new pty is 0 columns wide
    try:
        proc = _ingest(tmp_path, child)
        os.close(child)
        child = -1
        out = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(main)
        if child >= 0:
            os.close(child)
    text = out.decode(errors="replace")
    assert proc.returncode == 0 and "extract" in text and "embed" in text and "\r" in text
    assert "memcompile: extract" not in text
