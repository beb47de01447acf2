"""Concurrent writers and readers on one store, with real processes: no corruption, no duplicates, no vector
lost or stale in Chroma, and a reader never undoes a live writer's work. Tests that concern records run with them in
SQLite, then in PostgreSQL (`backend`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.runtime.consistency import reconcile
from memcompile_langgraph.runtime.user_state import Repair
from memcompile_langgraph.store.chroma import ChromaVectors

from .harness import cli_env, packet_ids, rows, spawn, synthetic_turns, vector_view, write_json

# Upserts batches of 20 random vectors for one user from a separate process (Chroma's own write path).
UPSERT_SCRIPT = """
import random, sys
from memcompile_langgraph.store.chroma import ChromaVectors
path, tag, batches, user = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
vs = ChromaVectors(path)
rng = random.Random(tag)
for i in range(batches):
    ids = [f"{tag}-{i}-{j}" for j in range(20)]
    vs.upsert(user, ids, [[rng.gauss(0, 1) for _ in range(384)] for _ in ids], ids)
"""

# Adds turns to one user in batches of 5 from a separate process: argv store, records URL ("": SQLite), user, turns.
ADD_SCRIPT = """
import json, sys
from memcompile_langgraph import MemCompile
path, url, user, turns = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
mem = MemCompile(path, records_url=url)
stored = sum(mem.add_turns(turns[i : i + 5], user_id=user)["stored"] for i in range(0, len(turns), 5))
assert stored == len(turns), stored
"""

pytestmark = pytest.mark.slow  # every test here runs CLI or writer subprocesses


def _python(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)], env=cli_env(), stderr=subprocess.PIPE, text=True
    )


def test_two_processes_writing_chroma_lose_no_vector(tmp_path):
    """One collection written from two processes: with Chroma's PersistentClient alone, 20 of these 2,000
    vectors were missing from its index and reading the embeddings back failed ("Error finding id"): each
    process persisted its own stale HNSW index over the other's."""
    store, batches = tmp_path / "store", 50
    procs = [_python(UPSERT_SCRIPT, store, tag, batches, "shared") for tag in ("A", "B")]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    view = vector_view(store, "shared")
    assert len(view["vector_ids"]) == 2 * batches * 20
    assert view["indexed_ids"] == view["vector_ids"]  # each read back ("Error finding id" when a process lost it)


def test_a_long_lived_reader_sees_another_process_writes(tmp_path):
    store = tmp_path / "store"
    reader = ChromaVectors(store)
    probe = [1.0] + [0.0] * 383
    own = [f"own{i}" for i in range(20)]
    reader.upsert("user0", own, [[float(i == j % 384) for i in range(384)] for j in range(20)], own)
    assert len(reader.query("user0", probe, 1000)) == 20  # this process has the collection's index loaded
    p = _python(UPSERT_SCRIPT, store, "W", 1, "user0")
    assert p.wait(timeout=300) == 0
    assert len(reader.query("user0", probe, 1000)) == 40  # and sees the other process's 20 as well


def test_two_ingests_of_one_file_into_one_store(tmp_path, backend):
    """Same file, same users, two CLI processes at once: every turn stored exactly once."""
    samples = [
        {"sample_id": f"conc{i}", "conversation": _locomo(synthetic_turns(f"conc{i}", 40, seed=i))} for i in range(3)
    ]
    path = write_json(tmp_path / "three.json", samples)
    store = backend.where(tmp_path / "store")
    procs = [spawn("ingest", path, *store.cli, "--quiet", log=tmp_path / f"p{i}.log") for i in range(2)]
    for p in procs:
        assert p.wait(timeout=600) == 0
    logs = [(tmp_path / f"p{i}.log").read_text() for i in range(2)]
    assert not any("Traceback" in log for log in logs), logs
    for s in samples:
        user = s["sample_id"]
        stored = [int(log.split(f"{user}: stored ")[1].split()[0]) for log in logs]
        assert sorted(stored) == [0, 40], logs  # one process stored them, the other found them stored
        dias = [r[0] for r in rows(store, "SELECT dia_id FROM packets WHERE user_id=?", (user,))]
        assert len(dias) == len(set(dias)) == 40
        view = vector_view(store, user)
        assert view["vector_ids"] == view["indexed_ids"] == packet_ids(store, user)
    if backend.name == "sqlite":
        assert rows(store, "PRAGMA integrity_check") == [("ok",)]


def test_two_processes_adding_different_turns_to_one_user(tmp_path, backend):
    """Two writers of one user at once, each adding its own turns a few at a time (so the writer lock changes hands
    many times): no turn lost, none stored twice, records and vectors agree."""
    store = backend.where(tmp_path / "store")
    sides = {
        side: [{**t, "dia_id": f"{side}:{i}"} for i, t in enumerate(synthetic_turns(f"two{side}", 40, seed=n))]
        for n, side in enumerate("AB")
    }
    procs = [_python(ADD_SCRIPT, store.path, store.url or "", "shared", json.dumps(turns)) for turns in sides.values()]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    dias = [r[0] for r in rows(store, "SELECT dia_id FROM packets WHERE user_id=?", ("shared",))]
    assert len(dias) == len(set(dias)) and set(dias) == {t["dia_id"] for turns in sides.values() for t in turns}
    view = vector_view(store, "shared")
    assert view["vector_ids"] == view["indexed_ids"] == packet_ids(store, "shared")
    mem = store.memory()
    assert mem.stats("shared")["packets"] == 80 == mem.stats("shared")["vectors"]
    ctx = mem.compile("twoa note 3 trip", user_id="shared")
    assert ctx.packets
    mem.close()


def test_two_processes_ingesting_different_users_at_once(tmp_path, backend):
    """Interleaved Chroma writes from two processes; every user's vectors complete and searchable."""
    store = backend.where(tmp_path / "store")
    files = []
    for side in ("left", "right"):
        samples = [
            {"sample_id": f"{side}{i}", "conversation": _locomo(synthetic_turns(f"{side}{i}", 30, seed=i))}
            for i in range(4)
        ]
        files.append(write_json(tmp_path / f"{side}.json", samples))
    procs = [spawn("ingest", f, *store.cli, "--quiet", log=tmp_path / f"{f.stem}.log") for f in files]
    for p in procs:
        assert p.wait(timeout=600) == 0
    for side in ("left", "right"):
        for i in range(4):
            user = f"{side}{i}"
            view = vector_view(store, user)
            assert len(packet_ids(store, user)) == 30
            assert view["vector_ids"] == view["indexed_ids"] == packet_ids(store, user), user


def test_reader_reconcile_never_removes_a_live_writer_vectors(tmp_path, embeddings, backend):
    """The old race: a reader loads records, a writer commits and embeds more, the reader's reconcile then took
    the writer's new vectors for orphans. Now reconcile only runs against the records it loaded."""
    store = backend.where(tmp_path / "store")
    reader = store.memory(embeddings=embeddings)
    reader.add_turns(synthetic_turns("race", 10), user_id="race")
    stale = reader.index("race")  # loaded at this version
    writer = _python(ADD_SCRIPT, store.path, store.url or "", "race", json.dumps(synthetic_turns("race", 20)[10:]))
    _, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    assert reconcile(reader.engine, stale) is Repair.STALE  # the records moved on: nothing is touched
    assert len(vector_view(store, "race")["vector_ids"]) == 20


def test_reconcile_skips_while_another_process_writes_then_repairs(tmp_path, embeddings):
    store = tmp_path / "store"
    mem = MemCompile(store, embeddings=embeddings)
    mem.add_turns(synthetic_turns("held", 6), user_id="held")
    lost = sorted(packet_ids(store, "held"))[:2]
    mem.engine.vectors.delete("held", lost)  # as if a crash had hit between commit and embedding
    lock = mem.engine.records.writer_lock_path("held")
    holder = _python(
        "import fcntl,sys,time; f=open(sys.argv[1],'a+'); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(60)", lock
    )
    holder.stderr.close()
    try:
        time.sleep(0.5)
        while not _locked(lock):
            time.sleep(0.1)
        fresh = MemCompile(store, embeddings=embeddings)
        started = time.monotonic()
        fresh.compile("trip to Lisbon", user_id="held")  # loads the index: reconcile must not wait for the writer
        assert time.monotonic() - started < 30
        assert not set(lost) & vector_view(store, "held")["vector_ids"]
    finally:
        holder.kill()
        holder.wait()
    fresh.compile("trip to Oslo", user_id="held")  # the next refresh repairs what was skipped
    assert vector_view(store, "held")["vector_ids"] == packet_ids(store, "held")


def test_threads_writing_and_reading_one_user(tmp_path, embeddings, backend):
    mem = backend.where(tmp_path / "store").memory(embeddings=embeddings)
    turns = synthetic_turns("thr", 60)
    errors: list[BaseException] = []

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        return run

    writers = [threading.Thread(target=guarded(lambda: mem.add_turns(turns, user_id="thr"))) for _ in range(3)]
    reader = threading.Thread(target=guarded(lambda: [mem.compile("kayak trip", user_id="thr") for _ in range(10)]))
    for t in [*writers, reader]:
        t.start()
    for t in [*writers, reader]:
        t.join(timeout=300)
    assert not errors, errors
    assert mem.stats("thr")["packets"] == 60 == mem.stats("thr")["vectors"]


def _locked(path) -> bool:
    import fcntl

    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def _locomo(turns: list[dict]) -> dict:
    """Turns as one LoCoMo conversation: a session per calendar day, dia_ids D<session>:<n>."""
    conv: dict = {"speaker_a": turns[0]["speaker"], "speaker_b": turns[1]["speaker"]}
    days: dict[str, list] = {}
    for t in turns:
        days.setdefault(t["time"][:10], []).append(t)
    for s, (day, items) in enumerate(sorted(days.items()), start=1):
        conv[f"session_{s}_date_time"] = (
            f"10:00 am on {int(day[8:])} {['January', 'February', 'March'][int(day[5:7]) - 1]}, {day[:4]}"
        )
        conv[f"session_{s}"] = [
            {"speaker": t["speaker"], "text": t["text"], "dia_id": f"D{s}:{n}"} for n, t in enumerate(items, 1)
        ]
    return conv


def _waits_for_a_lock(pid: int) -> bool:
    """Whether the process is blocked on a file lock (a request /proc/locks lists with "->")."""
    with open("/proc/locks") as locks:
        return any(line.split()[1] == "->" and line.split()[5] == str(pid) for line in locks)


def test_a_process_opening_the_llm_file_while_another_sets_it_up_waits_for_it(tmp_path):
    """Workers with a model opening a new store's LLM file at once: one of them finds the other switching the new file
    to WAL (here: its setup lock held, the file's write lock taken) and waits, instead of failing with "database is
    locked"."""
    import sqlite3

    from memcompile_langgraph.store.layout import private_file, private_folder
    from memcompile_langgraph.store.llm_file import FILENAME
    from memcompile_langgraph.store.locks import FileLock

    store = tmp_path / "store"
    with FileLock(private_folder(store / "locks") / "setup.lock").hold():
        other = sqlite3.connect(private_file(store / FILENAME), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        opener = _python(
            "import sys; from memcompile_langgraph.store.llm_file import LLMStore; LLMStore(sys.argv[1])", store
        )
        while opener.poll() is None and not _waits_for_a_lock(opener.pid):
            time.sleep(0.05)
        other.execute("ROLLBACK")
        other.close()
    _, err = opener.communicate(timeout=120)
    assert opener.returncode == 0, err[-2000:]
