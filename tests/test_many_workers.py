"""Many workers, one memory: 4 worker processes, each its own MemCompile on one real PostgreSQL and one real Chroma
server, ingest 4 users' LoCoMo dev conversations at once (every worker offers every turn), while 2 more processes
query throughout. Afterwards every turn is stored once, records and vectors agree, every worker compiles what a
single-process embedded store compiles, and a forget in one worker is seen by every other worker's next query."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.paths import LOCOMO, ROOT

from memcompile_langgraph import MemCompile
from memcompile_langgraph.ingest.loaders import load_file
from memcompile_langgraph.store.chroma import ChromaVectors
from memcompile_langgraph.store.postgres import PostgresRecords

pytestmark = pytest.mark.slow

USERS, CHUNK, QUESTIONS, WRITERS, READERS = 4, 64, 12, 4, 2
TURNS = 192  # of each conversation: three chunks per user still interleave every worker with every other

COMMON = """
import json, random, sys, time
from pathlib import Path
from memcompile_langgraph import MemCompile
from memcompile_langgraph.ingest.loaders import load_file

records_url, chroma_url, locomo, run = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
me, USERS, CHUNK, QUESTIONS, WRITERS, TURNS = map(int, sys.argv[5:11])
convs = load_file(locomo)[:USERS]
for c in convs:
    c.turns = c.turns[:TURNS]
questions = {c.user_id: [q["question"] for q in c.qa if q.get("category") != 5][:QUESTIONS] for c in convs}
mem = MemCompile(None, records_url=records_url, chroma_url=chroma_url)


def wait_for(*names):
    while not all((run / n).exists() for n in names):
        time.sleep(0.2)
"""

WRITER = (
    COMMON
    + """
order = convs[me:] + convs[:me]  # each worker starts with another user
stored, pos = {c.user_id: 0 for c in convs}, {c.user_id: 0 for c in convs}
while any(pos[c.user_id] < len(c.turns) for c in order):
    for c in order:  # chunk by chunk, round robin over the users
        i = pos[c.user_id]
        if i < len(c.turns):
            stored[c.user_id] += mem.add_turns(c.turns[i : i + CHUNK], user_id=c.user_id)["stored"]
            pos[c.user_id] = i + CHUNK
(run / f"ingested-{me}").write_text(json.dumps(stored))
wait_for(*(f"ingested-{w}" for w in range(WRITERS)))
compiled = {u: [mem.compile(q, user_id=u).text for q in qs] for u, qs in questions.items()}
(run / f"compiled-{me}").write_text(json.dumps(compiled))
first = convs[0].user_id
if me == 0:
    wait_for(*(f"compiled-{w}" for w in range(WRITERS)))
    mem.forget(first)
    (run / "forgot").write_text("")
wait_for("forgot")
(run / f"after-forget-{me}").write_text(json.dumps(len(mem.compile(questions[first][0], user_id=first).packets)))
"""
)

READER = (
    COMMON
    + """
dia = {c.user_id: {t["dia_id"] for t in c.turns} for c in convs}
rng, done, hits = random.Random(me), 0, 0
while not (run / "stop").exists():
    u = rng.choice(list(questions))
    ctx = mem.compile(rng.choice(questions[u]), user_id=u)
    got = {p.dia_id for p in ctx.packets}
    assert got <= dia[u], got - dia[u]  # never another user's turn
    done, hits = done + 1, hits + bool(got)
(run / f"read-{me}").write_text(json.dumps({"queries": done, "with_packets": hits}))
"""
)


def _spawn(script: str, *args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False", "MEMCOMPILE_RECORDS_URL": ""}
    args = (*args, USERS, CHUNK, QUESTIONS, WRITERS, TURNS)
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], env=env, stderr=subprocess.PIPE, text=True)


def _reference(tmp: Path, convs, embeddings) -> dict[str, list[str]]:
    """The same turns in the same chunks, one process, the embedded store."""
    mem = MemCompile(tmp / "reference", embeddings=embeddings, records_url="")
    out = {}
    for c in convs:
        for i in range(0, len(c.turns), CHUNK):
            mem.add_turns(c.turns[i : i + CHUNK], user_id=c.user_id)
        qs = [q["question"] for q in c.qa if q.get("category") != 5][:QUESTIONS]
        out[c.user_id] = [mem.compile(q, user_id=c.user_id).text for q in qs]
    mem.close()
    return out


def test_four_workers_and_two_readers_share_one_memory(tmp_path, postgres_url, chroma_url, embeddings):
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo dev split not found at {LOCOMO}")
    url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
    run = tmp_path / "run"
    run.mkdir()
    convs = load_file(LOCOMO)[:USERS]
    for c in convs:
        c.turns = c.turns[:TURNS]
    started = time.monotonic()
    procs = [_spawn(WRITER, url, chroma_url, LOCOMO, run, w) for w in range(WRITERS)]
    readers = [_spawn(READER, url, chroma_url, LOCOMO, run, r) for r in range(READERS)]
    try:
        while not all((run / f"ingested-{w}").exists() for w in range(WRITERS)):
            dead = [p.stderr.read()[-3000:] for p in procs + readers if p.poll() is not None]
            assert not dead, dead
            time.sleep(0.5)
        ingest_s = time.monotonic() - started
        (run / "stop").write_text("")
        for p in procs + readers:
            _, err = p.communicate(timeout=1200)
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs + readers:
            p.kill()
            p.wait()

    stored = [json.loads((run / f"ingested-{w}").read_text()) for w in range(WRITERS)]
    records = PostgresRecords(url)
    vectors = ChromaVectors(None, url=chroma_url, namespace=f"mc{records.store_id()[:12]}")
    first = convs[0].user_id
    for c in convs:  # every turn stored by exactly one worker
        assert sum(s[c.user_id] for s in stored) == len(c.turns)
    for c in convs[1:]:
        loaded = records.load(c.user_id)
        assert len(loaded.packets) == len({p.dia_id for p in loaded.packets}) == len(c.turns)
        assert vectors.ids(c.user_id) == {p.packet_id for p in loaded.packets}  # records and vectors agree
    assert records.head(first) == (0, 0, "") and vectors.ids(first) == set()  # forgotten everywhere

    reference = _reference(tmp_path, convs, embeddings)
    for w in range(WRITERS):
        assert json.loads((run / f"compiled-{w}").read_text()) == reference, f"worker {w}"
        assert json.loads((run / f"after-forget-{w}").read_text()) == 0, f"worker {w} still saw the forgotten user"
    reads = [json.loads((run / f"read-{r}").read_text()) for r in range(READERS)]
    assert all(r["queries"] > 0 for r in reads)
    print(
        f"\n{sum(len(c.turns) for c in convs)} turns by {WRITERS} workers in {ingest_s:.1f}s; "
        f"stored per worker {[sum(s.values()) for s in stored]}; reads during ingest {reads}"
    )
    records.close()
