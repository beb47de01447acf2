"""Crash safety: `memcompile ingest` SIGKILLed at several moments, then run again to completion, leaves the
store exactly as one clean run does (offline extraction is deterministic), with Chroma and the records agreeing;
records in SQLite, then in PostgreSQL (where the killed writer's advisory lock goes with its connection)."""

from __future__ import annotations

import os
import random
import signal
import time

import numpy as np
import pytest

from .harness import memcompile, rows, snapshot, spawn, vector_view

pytestmark = pytest.mark.slow

RANDOM_KILLS = 3  # at random delays after start
TARGETED_KILLS = 2  # right after a batch committed its records, before its vectors are written


def _stored(store, user) -> int:
    try:
        return rows(store, "SELECT COUNT(*) FROM packets WHERE user_id=?", (user,))[0][0]
    except Exception:  # noqa: BLE001 - the database or its schema may not exist yet at the very start
        return 0


def _kill(proc) -> bool:
    """SIGKILL the run; False when it had already finished (too late to count as a crash)."""
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def _kill_after_commit(proc, store, user, before: int, timeout: float = 300) -> bool:
    """Poll the records and kill the moment a batch commit shows up (its embedding is then under way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if _stored(store, user) > before:
            return _kill(proc)
        time.sleep(0.05)
    return _kill(proc)


def test_sigkill_at_any_moment_then_rerun_equals_a_clean_run(conversation_file, tmp_path, backend):
    path, sample = conversation_file
    user = sample["sample_id"]
    clean, crashed = backend.where(tmp_path / "clean"), backend.where(tmp_path / "crashed")

    started = time.monotonic()
    run = memcompile("ingest", path, *clean.cli, "--quiet")
    clean_seconds = time.monotonic() - started
    assert run.code == 0, run.err
    expected = snapshot(clean, user)
    assert len(expected["packets"]) > 256  # two batches: a kill can fall between their transactions

    rng = random.Random(20261129)
    kills, states = 0, []
    # first right after batch 1 commits, then at random moments, last right after the final batch commits
    plan = ["after_commit"] + ["random"] * RANDOM_KILLS + ["after_commit"] * (TARGETED_KILLS - 1)
    for i, how in enumerate(plan):
        before = _stored(crashed, user)
        if before == len(expected["packets"]):
            break  # a run got to the end: later kills would only hit the reconcile-and-skip path
        proc = spawn("ingest", path, *crashed.cli, "--quiet", log=tmp_path / f"kill{i}.log")
        if how == "random":
            time.sleep(rng.uniform(0.05, 0.35) * clean_seconds)  # start-up, reconcile, extraction or embedding
            killed = _kill(proc)
        else:
            killed = _kill_after_commit(proc, crashed, user, before)
        kills += killed
        states.append((how, _stored(crashed, user), len(vector_view(crashed, user)["vector_ids"])))

    assert kills >= 4, f"too few runs were still alive when killed: {states}"
    # the targeted kills must have caught records without their vectors, the case reconcile repairs
    assert any(how == "after_commit" and vectors < packets for how, packets, vectors in states), states

    run = memcompile("ingest", path, *crashed.cli, "--quiet")
    assert run.code == 0, run.err
    got = snapshot(crashed, user)
    assert got["packets"] == expected["packets"]  # every turn exactly once, same ids
    assert got["descriptors"] == expected["descriptors"]  # same claims, metadata and Cells
    ids = {p[0] for p in got["packets"]}
    assert got["vector_ids"] == ids == got["indexed_ids"]
    assert expected["vector_ids"] == ids == expected["indexed_ids"]
    # each vector built from its packet's document as the clean run built it (not one a killed run left half-made)
    for pid in ids:
        assert np.allclose(got["vectors"][pid], expected["vectors"][pid], atol=1e-6), pid

    # a further run stores nothing and changes nothing
    run = memcompile("ingest", path, *crashed.cli, "--quiet")
    assert run.code == 0 and "stored 0 turns" in run.out, run.out
    assert snapshot(crashed, user) == got
    print(f"kills survived: {kills}; states after each kill (how, packets, vectors): {states}")
