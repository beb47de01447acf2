"""Readers of a SQLite store never take its write lock: `query`, `export` and `stats` answer while another process
holds a write transaction (a VACUUM, an import, an sqlite3 shell), and a store on a read-only volume can be read."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from memcompile_langgraph.store.sqlite import FILE

from .harness import CLI, cli_env, memcompile, synthetic_turns, write_json

HOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
print("held", flush=True)
sys.stdin.read()  # until the test closes it
conn.execute("COMMIT")
"""
READS = (["query", "--user", "ann", "trip to Oslo"], ["export", "--user", "ann"], ["stats", "--json"])


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    path = write_json(tmp_path / "t.json", synthetic_turns("ann", 12))
    assert memcompile("ingest", path, "--store", root, "--records-url", "", "--user", "ann", "--quiet").code == 0
    return root


def _read_all(root) -> list[tuple[int, str, str]]:
    """The three reads at once, each given 45 s (a reader waiting for the write lock waits its 60 s busy timeout)."""
    procs = [
        subprocess.Popen(
            [*CLI, *args, "--store", str(root), "--records-url", ""],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        for args in READS
    ]
    out = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=45)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            stderr += "\n(still waiting after 45 s)"
        out.append((proc.returncode, stdout, stderr))
    return out


def _check(results) -> None:
    (q, q_out, q_err), (e, e_out, e_err), (s, s_out, s_err) = results
    assert q == 0 and "Oslo" in q_out, q_err
    assert e == 0 and len([line for line in e_out.splitlines() if '"dia_id"' in line]) == 12, e_err  # turns only
    assert s == 0 and json.loads(s_out)["ann"]["packets"] == 12, s_err


def test_reads_answer_while_another_process_holds_a_write_transaction(store):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(store / FILE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        _check(_read_all(store))
        from memcompile_langgraph import MemCompile

        mem = MemCompile(store, records_url="", dense=False, embeddings=None)  # the library's reads, in process
        assert len(mem.turns("ann")) == 12 and mem.stats("ann")["packets"] == 12
        assert mem.compile("trip to Oslo", user_id="ann").packets
        mem.close()
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0


@contextlib.contextmanager
def _read_only_mount(source):
    """`source` seen through a read-only bind mount (root only: root writes through a chmod a-w folder)."""
    target = source.with_name(f"{source.name}-ro")
    target.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], check=True, capture_output=True)
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=True)


@pytest.mark.parametrize("snapshots", [True, False], ids=["with-snapshot-files", "records-only"])
def test_a_store_on_a_read_only_volume_can_be_read(store, snapshots):
    import shutil

    if not snapshots:
        shutil.rmtree(store / "snapshots")
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*")}
    with _read_only_mount(store) as ro:
        _check(_read_all(ro))
        path = write_json(store.parent / "more.json", synthetic_turns("ann", 2, seed=1))
        run = memcompile("ingest", path, "--store", ro, "--records-url", "", "--user", "ann", "--quiet")
        assert run.code == 2 and "can be read, not written" in run.err_lines[-1], run.err  # one line, no traceback
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*")} == before
