"""A Chroma server that accepts connections and never answers: with the default setting, a query answers from the
lexical channels within a few seconds, saying why in one line, and the calls after it fail at once instead of each
waiting again. A real hung socket, no mock."""

from __future__ import annotations

import logging
import shutil
import time

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.store.protocols import VectorStoreError

from .harness import synthetic_turns
from .test_chroma_server_faults import _silent_listener

pytestmark = pytest.mark.slow  # waits out the default deadline a few times
DEFAULT_TIMEOUT = 5  # seconds: the documented default of MEMCOMPILE_CHROMA_TIMEOUT


def test_a_query_against_a_hung_server_answers_within_the_default_deadline(tmp_path, embeddings, caplog, monkeypatch):
    monkeypatch.delenv("MEMCOMPILE_CHROMA_TIMEOUT", raising=False)  # the default is what is promised
    store = tmp_path / "store"
    turns = synthetic_turns("ann", 8)
    first = MemCompile(store, embeddings=embeddings)
    first.add_turns(turns, user_id="ann")  # the model is recorded
    first.close()
    shutil.rmtree(store / "snapshots")  # a worker with no snapshot file: the load asks the server for the vectors
    with _silent_listener() as url:
        mem = MemCompile(store, embeddings=embeddings, chroma_url=url)
        try:
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                started = time.monotonic()
                ctx = mem.compile(turns[0]["text"], user_id="ann")
                took = time.monotonic() - started
            assert took < 2 * DEFAULT_TIMEOUT + 3, took  # one deadline, not one per request or per stage
            assert ctx.packets, "the lexical channels answer without the vector store"
            said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(said) == 1 and "\n" not in said[0] and url in said[0], said
            # the next call within the deadline is not made to wait again
            started = time.monotonic()
            with pytest.raises(VectorStoreError):
                mem.engine.vectors.ids("ann")
            assert time.monotonic() - started < 1.0
        finally:
            mem.close()
