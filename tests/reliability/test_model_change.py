"""Two workers on two embedding models write to one store (a rolling model change): the store has one model at a
time, so the worker on the other model neither drops nor re-embeds anyone's vectors; it answers lexically and stores
its turns without vectors, and says so once. `switch_model` (`memcompile reembed`) is the one step that changes the
store's model. SQLite and PostgreSQL records, local Chroma."""

from __future__ import annotations

import logging
import threading

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from memcompile_langgraph.bench.synthetic import generate

from .harness import memcompile

pytestmark = pytest.mark.slow  # 600 turns embedded per case, both record backends

TURNS = generate(600).turns


class Counting(DeterministicFakeEmbedding):
    """Counts the documents it embeds, on any thread."""

    def __init__(self, size: int):
        super().__init__(size=size)
        object.__setattr__(self, "docs", 0)
        object.__setattr__(self, "lock", threading.Lock())

    def embed_documents(self, texts):
        with self.lock:
            object.__setattr__(self, "docs", self.docs + len(texts))
        return super().embed_documents(texts)


def _turn(i: int) -> dict:
    return {"speaker": "Priya", "text": f"Note {i}: the observatory shift moved to slot {i}.", "dia_id": f"X{i}:1"}


def test_workers_on_two_models_alternating_writes_do_not_undo_each_other(backend, tmp_path, caplog):
    where = backend.where(tmp_path / "store")
    old, new = Counting(size=8), Counting(size=16)
    a = where.memory(embeddings=old)
    a.add_turns(TURNS, "ann")  # the store's model is a's: its first writer's
    b = where.memory(embeddings=new)
    try:
        old_docs = old.docs
        with caplog.at_level(logging.WARNING):
            for i in range(4):  # 4 + 4 alternating writes
                a.add_turns([_turn(2 * i)], "ann")
                b.add_turns([_turn(2 * i + 1)], "ann")
                assert b.compile("Where is the observatory shift?", "ann").packets  # lexically
            a.host.cache.reembeds.wait(60)
            b.host.cache.reembeds.wait(60)
        assert new.docs == 0  # b made no vector: neither its turns' nor a re-embed of a's
        # a embedded its own four turns and, as its loads found them without vectors, b's; none of the 600 again
        assert 4 <= old.docs - old_docs <= 16
        said = [r.getMessage() for r in caplog.records if "not the store's" in r.getMessage()]
        assert len(said) == 1, said  # b said it once
        assert not [r for r in caplog.records if "made again" in r.getMessage()]
        # a's dense channel serves all of it; b's four turns get their vectors from a's next load of the user
        ctx = a.compile("Where is the observatory shift?", "ann")
        assert ctx.trace["dense"]["hits"] > 0 and not ctx.trace["dense"].get("foreign_vectors")
        assert old.docs - old_docs <= 16 and a.stats("ann")["vectors"] == len(TURNS) + 8

        # the explicit step: b's model becomes the store's, and now a is the one that stays off
        b.switch_model(now=True)
        assert new.docs == len(TURNS) + 8 and b.engine.records.embedding("ann") == b.engine.embedding_id
        before = (old.docs, new.docs)
        a.add_turns([_turn(100)], "ann")
        b.add_turns([_turn(101)], "ann")
        b.host.cache.reembeds.wait(60)
        # no flip back: a makes nothing, b its turn and a's (a few documents, not the 600 again)
        assert old.docs == before[0] and 2 <= new.docs - before[1] <= 4
        assert b.compile("Where is the observatory shift?", "ann").trace["dense"]["hits"] > 0
    finally:
        a.close()
        b.close()


def test_memcompile_reembed_switches_the_store_model(tmp_path, monkeypatch):
    from memcompile_langgraph import MemCompile

    store = tmp_path / "store"
    mem = MemCompile(store, embeddings=DeterministicFakeEmbedding(size=8))  # another model than the CLI's
    mem.add_turns(TURNS[:20], "ann")
    mem.close()
    run = memcompile("reembed", "--store", store, "--quiet")
    assert run.code == 0 and "store's embedding model is now" in run.out and "ann: 20 turns" in run.out, run.err
    again = MemCompile(store)  # the default model, as the CLI's
    try:
        assert again.engine.records.store_model() == again.engine.embedding_id
        assert again.stats("ann")["vectors"] == 20
    finally:
        again.close()
