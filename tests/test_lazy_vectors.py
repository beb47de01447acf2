"""The vector store opens at its first real use: a query answered from a current snapshot file never opens it, one
whose snapshot lags the records does (for the newer packets' vectors) unless close() left the lag's vectors in the
tail file, and a writer does; the open happens once however many threads ask at the same moment."""

import threading
import time

import pytest
from support.ranking import assert_same_context

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.runtime import cache as cache_module
from memcompile_langgraph.store.open import LazyVectors
from memcompile_langgraph.store.protocols import VectorStoreError

QUESTIONS = ["Where does Priya work now?", "Who is coming to Lisbon?", "What is the beagle called?"]
LATER = [{"speaker": "Ann", "text": "My new canoe is moored at the old harbour in Porto.", "time": "2024-07-01"}]


def test_a_query_from_a_current_snapshot_file_never_opens_the_vector_store(tmp_path, embeddings):
    path = tmp_path / "store"
    writer = MemCompile(path, embeddings=embeddings)
    assert not writer.engine.vectors.opened  # opening a store opens no Chroma client
    writer.add_turns(demo_turns(), user_id="u")
    assert writer.engine.vectors.opened  # a writer stores vectors
    expected = [writer.compile(q, "u") for q in QUESTIONS]
    writer.close()

    reader = MemCompile(path, embeddings=embeddings)
    got = [reader.compile(q, "u") for q in QUESTIONS]
    assert not reader.engine.vectors.opened
    assert [c.text for c in got] == [c.text for c in expected]
    assert all(c.trace["dense"]["hits"] > 0 for c in got)  # the dense channel answered, from the snapshot's vectors
    assert reader.stats("u")["vectors"] == len(demo_turns())  # stats asks the vector store itself: opened now
    assert reader.engine.vectors.opened
    reader.close()


def test_a_snapshot_file_behind_the_records_opens_the_vector_store_for_the_newer_packets(
    tmp_path, embeddings, monkeypatch
):
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 8)
    path = tmp_path / "store"
    writer = MemCompile(path, embeddings=embeddings)
    writer.add_turns(demo_turns(), user_id="u")
    writer.add_turns(LATER, user_id="u")  # fewer than PERSIST_EVERY and no close: only the records have it
    expected = writer.compile("Where is the canoe moored?", "u")

    reader = MemCompile(path, embeddings=embeddings)
    got = reader.compile("Where is the canoe moored?", "u")
    assert reader.engine.vectors.opened
    assert len(reader.index("u").vectors) == len(demo_turns()) + 1  # the newer packet's vector came from Chroma
    assert "Porto" in got.text
    assert_same_context(got.packets, got.text, expected.packets, expected.text)  # that vector was read back
    writer.close()
    reader.close()


def _store_with_a_tail(path, embeddings):
    """A store whose snapshot file holds 130 turns and whose tail file the one turn added after it: (the snapshot
    files, the snapshot's bytes, what the writer compiled for the canoe question)."""
    many = [
        {"speaker": "Bo", "text": f"note {i}: the kayak trip to lake {i}", "time": "2024-05-01"} for i in range(130)
    ]
    first = MemCompile(path, embeddings=embeddings)
    first.add_turns(many, user_id="u")
    first.close()  # no file yet: the whole snapshot is written
    files = first.host.cache.files
    snapshot = files.path("u").read_bytes()
    writer = MemCompile(path, embeddings=embeddings)
    writer.add_turns(LATER, user_id="u")  # 1 < 131 // 64: the snapshot stays, the new vector goes to the tail
    expected = writer.compile("Where is the canoe moored?", "u")
    writer.close()
    return files, snapshot, expected


def test_a_small_lag_left_at_close_is_read_from_the_tail_file_without_opening_the_vector_store(tmp_path, embeddings):
    path = tmp_path / "store"
    files, snapshot, expected = _store_with_a_tail(path, embeddings)
    assert files.path("u").read_bytes() == snapshot and files.path("u", ".tail").exists()

    reader = MemCompile(path, embeddings=embeddings)
    got = reader.compile("Where is the canoe moored?", "u")
    assert not reader.engine.vectors.opened
    assert len(reader.index("u").vectors) == 131 and "Porto" in got.text
    assert [p.dia_id for p in got.packets] == [p.dia_id for p in expected.packets]
    reader.add_turns([{**LATER[0], "text": "The canoe has a red sail now."}] * 2, user_id="u")
    reader.close()  # 2 more: the snapshot is rewritten and the tail goes
    assert files.path("u").read_bytes() != snapshot and not files.path("u", ".tail").exists()


def test_a_damaged_tail_file_is_ignored_and_the_vector_store_answers(tmp_path, embeddings):
    path = tmp_path / "store"
    files, _, _ = _store_with_a_tail(path, embeddings)
    tail = files.path("u", ".tail")
    tail.write_bytes(tail.read_bytes()[:-40] + b"x" * 40)

    reader = MemCompile(path, embeddings=embeddings)
    assert "Porto" in reader.compile("Where is the canoe moored?", "u").text
    assert reader.engine.vectors.opened and len(reader.index("u").vectors) == 131
    assert not tail.exists()  # removed: it can never be used
    reader.close()


def test_the_store_opens_once_whichever_threads_ask_first():
    opened, gate = [], threading.Barrier(8)

    class Store:
        def ids(self, user_id):
            return {user_id}

    def connect():
        opened.append(1)
        return Store()

    lazy = LazyVectors(connect)
    results = []

    def ask():
        gate.wait()
        results.append(lazy.ids("u"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1 and results == [{"u"}] * 8


def test_a_failed_open_raises_to_its_caller_and_the_next_use_after_the_deadline_tries_again(monkeypatch):
    monkeypatch.setenv("MEMCOMPILE_CHROMA_TIMEOUT", "0.3")
    attempts = []

    class Store:
        def ids(self, user_id):
            return set()

    def connect():
        attempts.append(1)
        if len(attempts) == 1:
            raise VectorStoreError("vector store http://127.0.0.1:9 cannot be opened: connection refused")
        return Store()

    lazy = LazyVectors(connect)
    with pytest.raises(VectorStoreError, match="cannot be opened"):
        lazy.ids("u")
    with pytest.raises(VectorStoreError, match="cannot be opened"):  # within the deadline: not asked again
        lazy.ids("u")
    assert not lazy.opened and len(attempts) == 1
    time.sleep(0.4)
    assert lazy.ids("u") == set() and lazy.opened and len(attempts) == 2


def test_warm_up_opens_the_vector_store_before_the_first_write_and_queries_answer_as_without(tmp_path, embeddings):
    path = tmp_path / "store"
    writer = MemCompile(path, embeddings=embeddings)
    writer.add_turns(demo_turns(), user_id="u")
    writer.close()

    worker = MemCompile(path, embeddings=embeddings)
    worker.warm_up()  # what a server does at its start: the first add after opening does not open Chroma
    assert worker.engine.vectors.opened
    reader = MemCompile(path, embeddings=embeddings)
    for q in QUESTIONS:
        assert worker.compile(q, "u").text == reader.compile(q, "u").text
    assert not reader.engine.vectors.opened  # without warm_up a reader still never opens it
    reader.close()
    worker.close()


def test_a_relative_store_path_opened_from_another_directory_reaches_that_directorys_vectors(
    tmp_path, embeddings, monkeypatch
):
    turn = {"a": "I adopted a beagle named Biscuit.", "b": "I moved to Lisbon last spring."}
    for folder, text in turn.items():
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        mem = MemCompile("./.memcompile", embeddings=embeddings)
        mem.add_turns([{"speaker": "Tom", "text": text, "dia_id": folder}], user_id="tom")
        assert mem.stats("tom")["vectors"] == 1
        mem.close()
    for folder in turn:
        monkeypatch.chdir(tmp_path / folder)
        mem = MemCompile("./.memcompile", embeddings=embeddings)
        assert mem.stats("tom")["vectors"] == 1  # its own vector, not the first directory's
        assert mem.delete_turns("tom", [folder]) == 1
        assert mem.stats("tom")["vectors"] == 0
        mem.close()
