"""After the embedding model changes, the first add embeds only its own turns: the old packets' vectors are made
again by the re-embed job (runtime/upgrade.py), in the background or by `memcompile repair`. Meanwhile queries
compare the new model's query vectors with the new model's vectors only; the job leaves every packet with one
current vector, and a job killed half way is resumed. SQLite and PostgreSQL records, local Chroma."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from memcompile_langgraph.bench.synthetic import generate
from memcompile_langgraph.index.user import packet_document
from memcompile_langgraph.runtime import upgrade
from memcompile_langgraph.store.rows import REEMBEDDING

pytestmark = pytest.mark.slow  # a store of 600 turns built per case, a subprocess
TURNS = generate(600).turns  # more packets than a writer re-embeds on the spot, also after the job's first chunk
ONE = {"speaker": "Priya", "text": "I start at the observatory next week.", "time": "2030-06-01T09:00"}


class Counting(DeterministicFakeEmbedding):
    """Counts the documents it embeds per thread; the re-embed job's first call waits at `gate` while it is closed."""

    def __init__(self, size: int):
        super().__init__(size=size)
        object.__setattr__(self, "by_thread", {})
        object.__setattr__(self, "gate", threading.Event())
        object.__setattr__(self, "waiting", threading.Event())
        self.gate.set()

    def embed_documents(self, texts):
        name = threading.current_thread().name
        if name.startswith("memcompile-reembed") and not self.gate.is_set():
            self.waiting.set()
            assert self.gate.wait(60)
        self.by_thread[name] = self.by_thread.get(name, 0) + len(texts)
        return super().embed_documents(texts)

    @property
    def identity(self) -> str:  # one model whatever the class: the killed job's and the one that resumes it
        return f"fake:{self.size}"

    def job_docs(self) -> int:
        return sum(n for t, n in self.by_thread.items() if t.startswith("memcompile-reembed"))

    def other_docs(self) -> int:
        return sum(n for t, n in self.by_thread.items() if not t.startswith("memcompile-reembed"))


def _old_store(where):
    old = where.memory(embeddings=DeterministicFakeEmbedding(size=8))
    old.add_turns(TURNS, "ann")
    old.close()


def _assert_every_packet_has_its_current_vector(mem, model):
    index = mem.index("ann")
    ids, vectors = mem.engine.vectors.vectors("ann")
    assert sorted(ids) == sorted(index.packets)  # one vector per packet, no more
    stored = dict(zip(ids, vectors))
    for pid in index.packet_order:
        doc = packet_document(index.packets[pid], index.by_packet[pid])[: mem.config.embed_max_chars]
        assert np.allclose(stored[pid], model.embed_query(doc), atol=1e-6)
    assert len(index.vectors) == len(index.packets)  # the dense channel serves them all from the index


def test_first_add_after_a_model_change_leaves_the_old_packets_to_the_job(backend, tmp_path):
    where = backend.where(tmp_path / "store")
    _old_store(where)
    new = Counting(size=16)
    new.gate.clear()  # the job stops at its first embedding: the pending state, observed
    mem = where.memory(embeddings=new)
    try:
        assert mem.compile("Where does Priya work now?", "ann").trace["dense"]["foreign_vectors"]
        mem.switch_model()  # the explicit step: this model becomes the store's
        mem.add_turns([ONE], "ann")
        assert new.other_docs() == 1  # the writer embedded its own turn only
        assert new.waiting.wait(60)  # the job replaced the old vectors and is making them again
        assert mem.engine.records.embedding("ann") == mem.engine.embedding_id
        mem.add_turns([{**ONE, "text": "The observatory is on the hill.", "time": "2030-06-02T09:00"}], "ann")
        assert new.other_docs() == 2
        # only this model's vectors are stored: a query can meet nothing else
        ids, vectors = mem.engine.vectors.vectors("ann")
        assert ids and {len(v) for v in vectors} == {16}
        ctx = mem.compile("Where is the observatory?", "ann")
        assert not ctx.trace["dense"].get("foreign_vectors") and 0 < ctx.trace["dense"]["hits"] <= len(ids)
        new.gate.set()
        assert mem.host.cache.reembeds.wait(120)
        assert new.job_docs() == len(TURNS)  # each old packet once
        _assert_every_packet_has_its_current_vector(mem, DeterministicFakeEmbedding(size=16))
        assert mem.compile("Where is the observatory?", "ann").trace["dense"]["hits"] > 0
    finally:
        mem.close()
    fresh = where.memory(embeddings=Counting(size=16))  # another process: nothing left to do
    try:
        _assert_every_packet_has_its_current_vector(fresh, DeterministicFakeEmbedding(size=16))
        assert fresh.repair("ann")["made"] == {"ann": 0}
    finally:
        fresh.close()


def test_the_first_add_after_a_model_change_reads_the_old_snapshot_file_without_its_vectors(backend, tmp_path):
    where = backend.where(tmp_path / "store")
    _old_store(where)  # closed: its snapshot file, of the old model, is written
    new = Counting(size=16)
    new.gate.clear()
    mem = where.memory(embeddings=new)
    loads: list[tuple[int, int]] = []
    load = mem.engine.records.load
    mem.engine.records.load = lambda user_id, after=(-1, -1): loads.append(after) or load(user_id, after=after)
    try:
        mem.switch_model()
        mem.add_turns([ONE], "ann")
        assert loads and loads[0] != (-1, -1)  # the file's records were read, not all replayed from the records
        index = mem.index("ann")
        assert len(index.packets) == len(TURNS) + 1
        assert {len(v) for v in index.vectors.matrix()} <= {16}  # none of the old model's vectors came with it
        assert new.waiting.wait(60)
        new.gate.set()
        assert mem.host.cache.reembeds.wait(120)
        _assert_every_packet_has_its_current_vector(mem, DeterministicFakeEmbedding(size=16))
    finally:
        mem.close()


def test_vectors_before_digests_are_left_off_the_write_path(tmp_path):
    from memcompile_langgraph import MemCompile

    model = Counting(size=8)
    mem = MemCompile(tmp_path, embeddings=model)
    mem.add_turns(TURNS, "ann")
    ids, vectors = mem.engine.vectors.vectors("ann")
    mem.engine.vectors.upsert("ann", ids, vectors, [mem.index("ann").packets[i].dia_id for i in ids], None)
    mem.close()  # every vector as one written before vectors carried digests
    model.by_thread.clear()
    mem = MemCompile(tmp_path, embeddings=model)
    try:
        mem.add_turns([ONE], "ann")
        assert model.other_docs() == 1 and model.job_docs() == 0  # served as they are, no job started
        made = mem.repair("ann")["made"]["ann"]
        assert made == len(TURNS) and model.job_docs() == 0  # repair made them, in the caller's thread
        assert None not in mem.engine.vectors.sources("ann").values()
    finally:
        mem.close()


KILLED = """
import os, sys, threading
from langchain_core.embeddings import DeterministicFakeEmbedding
from memcompile_langgraph import MemCompile

class Stalls(DeterministicFakeEmbedding):
    calls: int = 0
    identity: str = "fake:16"
    def embed_documents(self, texts):
        self.calls += 1
        if self.calls == 2:  # the first chunk is stored; the second never is
            print("stalled", flush=True)
            threading.Event().wait()
        return super().embed_documents(texts)

url = sys.argv[2] or ""
MemCompile(sys.argv[1], records_url=url, embeddings=Stalls(size=16)).switch_model(now=True)
"""


def test_a_job_killed_half_way_is_resumed(backend, tmp_path):
    where = backend.where(tmp_path / "store")
    _old_store(where)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(where.path), where.url or ""], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "stalled"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    new = Counting(size=16)
    mem = where.memory(embeddings=new)
    try:
        assert mem.engine.records.embedding("ann") not in (REEMBEDDING, None)  # the kill came after the swap
        assert len(mem.engine.vectors.ids("ann")) == upgrade.CHUNK  # the first chunk, of the new model
        assert mem.repair("ann")["made"] == {"ann": len(TURNS) - upgrade.CHUNK}  # resumed, not started over
        _assert_every_packet_has_its_current_vector(mem, DeterministicFakeEmbedding(size=16))
    finally:
        mem.close()


def test_repair_says_its_progress_on_stderr(tmp_path, capsys, model_dir, monkeypatch):
    from support.record_backends import Where

    from memcompile_langgraph.cli import main

    monkeypatch.setenv("MEMCOMPILE_MODEL_DIR", str(model_dir))
    _old_store(Where(tmp_path))
    capsys.readouterr()
    assert main(["reembed", "--store", str(tmp_path)]) == 0  # the local model: another one, made the store's
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("memcompile: re-embed ann")]
    assert lines[-1] == f"memcompile: re-embed ann {len(TURNS)}/{len(TURNS)} vectors" and 2 <= len(lines) <= 4
    assert f"ann: {len(TURNS)} turns, {len(TURNS)} vectors made again" in out
    assert main(["repair", "--store", str(tmp_path), "--user", "ann", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "re-embed" not in err and "ann: 600 turns, 0 vectors made again" in out
