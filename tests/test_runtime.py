"""The runtime: immutable published snapshots, forks that never leak into them, persisted snapshot files,
per-user load locks, a bounded cache, and graphs that take everything from their run's context."""

import gc
import json
import logging
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.ranking import assert_same_context

from memcompile_langgraph import MemCompile
from memcompile_langgraph import add_turns as ingest_module
from memcompile_langgraph.address.dense import similarities
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.index import persistent as persistent_module
from memcompile_langgraph.index.growarray import GrowArray
from memcompile_langgraph.process import gc_paused
from memcompile_langgraph.query_graph import query_graph
from memcompile_langgraph.runtime import cache as cache_module
from memcompile_langgraph.runtime import unit_of_work as uow_module
from memcompile_langgraph.runtime.user_state import UserState

QUESTIONS = ["Where does Priya work now?", "What is the beagle called?", "Who is coming to Lisbon?", "pottery class"]


def _turns(n: int, tag: str) -> list[dict]:
    return [
        {
            "speaker": "Ann" if i % 2 else "Bo",
            "text": f"{tag} note {i}: the {tag} kayak trip to lake {i}",
            "time": "2024-05-01",
        }
        for i in range(n)
    ]


def _fingerprint(index) -> tuple[tuple, list[np.ndarray]]:
    """Everything a query reads of a snapshot: (exact plain values, float arrays to compare with a tolerance)."""
    q = ["kayak", "lake", "beagl", "priya", "lisbon"]
    exact = (
        index.version,
        len(index.packets),
        len(index.descriptors),
        len(index.layout),
        len(index.vectors),
        tuple(sorted((c.cell_id, len(c), c.tokens, c.title) for c in index.layout.cells.values())),
        tuple(map(tuple, index.layout.route._cols[:, : len(index.layout)].tolist())),
    )
    probe = np.ones(index.vectors.dim, dtype=np.float32)
    floats = [index.bm25.scores(q), index.packet_bm25.scores(q)]
    return exact, floats + ([similarities(index.vectors, probe)] if len(index.vectors) else [])


def assert_same_fingerprint(a: tuple, b: tuple, atol: float = 0.0) -> None:
    """Two fingerprints: equal, floats within atol (vectors read back from Chroma differ from the live ones in the
    last bits, a few 1e-7; the same snapshot, or its pickle, gives the same bits)."""
    (exact_a, floats_a), (exact_b, floats_b) = a, b
    assert exact_a == exact_b and len(floats_a) == len(floats_b)
    for x, y in zip(floats_a, floats_b):
        np.testing.assert_allclose(x, y, rtol=0, atol=atol)


@pytest.fixture()
def small_batches(monkeypatch):
    monkeypatch.setattr(ingest_module, "INGEST_BATCH", 40)  # several batches in one unit of work, at small cost


def test_a_write_never_changes_a_published_snapshot(make_mem, small_batches):
    mem = make_mem("store", turns=demo_turns())
    old = mem.index("u")
    before = _fingerprint(old)
    answers = [mem.compile(q, "u").text for q in QUESTIONS]
    mem.add_turns(_turns(90, "later"), user_id="u")  # three batches: Cells, BM25 documents and vectors all extended
    assert_same_fingerprint(_fingerprint(old), before)
    new = mem.index("u")
    assert new is not old and len(new.packets) == len(old.packets) + 90 and new.version > old.version
    # a run pinned to the old snapshot (as a query that started before the write) answers exactly as before
    for q, text in zip(QUESTIONS, answers):
        context = mem.context("u")
        context._snapshot = old
        assert query_graph.invoke({"query": q}, context=context)["context"] == text


def test_the_extended_snapshot_equals_a_fresh_load(make_mem, tmp_path, embeddings, small_batches):
    mem = make_mem("store", turns=demo_turns())
    mem.add_turns(_turns(90, "later"), user_id="u")
    live = mem.index("u")
    again = MemCompile(tmp_path / "store", embeddings=embeddings)
    again.host.cache.files = None  # rebuilt from the records, not from a snapshot file
    fresh = again.index("u")
    assert_same_fingerprint(_fingerprint(live), _fingerprint(fresh), atol=1e-5)
    for q in QUESTIONS + ["kayak trip to lake 17"]:
        a, b = mem.compile(q, "u"), again.compile(q, "u")
        assert_same_context(a.packets, a.text, b.packets, b.text)


def test_writes_after_a_restart_layer_the_loaded_maps_and_equal_a_fresh_load(make_mem, tmp_path, monkeypatch):
    """The first write after opening takes the maps of the index read from the snapshot file as the bases of
    Layered maps (a store of this size is below the size where that starts: lowered here) instead of copying them."""
    make_mem("store", turns=demo_turns()).close()  # saves the snapshot file
    monkeypatch.setattr(persistent_module, "LAYERED_FROM", 1)
    mem = make_mem("store")
    loaded = mem.index("u")
    assert type(loaded.packets) is dict  # as read from the file
    before = _fingerprint(loaded)
    mem.add_turns(_turns(30, "later"), user_id="u")
    mem.add_turns(_turns(5, "again"), user_id="u")
    live = mem.index("u")
    assert type(live.packets) is persistent_module.Layered and live.packets._base is loaded.packets
    assert_same_fingerprint(_fingerprint(loaded), before)  # the snapshot the maps were layered on never changes
    fresh = make_mem("store")
    fresh.host.cache.files = None  # rebuilt from the records, not from a snapshot file
    assert_same_fingerprint(_fingerprint(live), _fingerprint(fresh.index("u")), atol=1e-5)
    for name in ("packets", "by_dia", "hashes", "position", "by_packet", "packet_position"):
        assert dict(getattr(live, name).items()) == dict(getattr(fresh.index("u"), name).items()), name
    for q in QUESTIONS + ["kayak trip to lake 17", "again note 4"]:
        a, b = mem.compile(q, "u"), fresh.compile(q, "u")
        assert_same_context(a.packets, a.text, b.packets, b.text)


def test_a_failed_write_publishes_nothing(make_mem, monkeypatch):
    mem = make_mem("store", turns=demo_turns())
    old = mem.index("u")

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(mem.engine.records, "commit", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        mem.add_turns(_turns(5, "lost"), user_id="u")
    assert mem.index("u") is old and mem.stats("u")["packets"] == len(demo_turns())


def test_a_batch_is_embedded_while_it_commits_and_its_vectors_stored_only_once_committed(
    make_mem, monkeypatch, small_batches
):
    mem = make_mem("store", turns=demo_turns())
    embed, commit = mem.engine.embeddings.embed_documents, mem.engine.records.commit
    embedding, seen = threading.Event(), []

    def embed_documents(texts):
        embedding.set()
        return embed(texts)

    def commit_second_fails(user, packets, placed, counts, **rows):
        seen.append(embedding.wait(timeout=10))  # the model already runs on this batch's packet documents
        embedding.clear()
        if len(seen) == 2:
            raise RuntimeError("disk full")
        return commit(user, packets, placed, counts, **rows)

    monkeypatch.setattr(mem.engine.embeddings, "embed_documents", embed_documents)
    monkeypatch.setattr(mem.engine.records, "commit", commit_second_fails)
    errors = []

    def add() -> None:
        try:
            mem.add_turns(_turns(90, "half"), user_id="u")  # batches of 40: the second one never commits
        except RuntimeError as exc:
            errors.append(str(exc))

    writer = threading.Thread(target=add)
    writer.start()
    writer.join(timeout=120)  # a job left waiting for a decision would hang the writer: a failure, not a hang
    assert not writer.is_alive() and errors == ["disk full"]
    assert seen == [True, True]
    stored = mem.engine.vectors.ids("u")
    assert len(stored) == len(demo_turns()) + 40 and stored == set(mem.index("u").packets)


def test_cold_start_reads_the_persisted_snapshot_then_replays_newer_records(tmp_path, embeddings, monkeypatch, caplog):
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 8)
    path = tmp_path / "store"
    first = MemCompile(path, embeddings=embeddings)
    first.add_turns(demo_turns(), user_id="u")
    saved = first.host.cache.files.path("u")
    assert saved.is_file()
    first.add_turns(_turns(3, "after"), user_id="u")  # fewer than PERSIST_EVERY: only in the records
    expected = [first.compile(q, "u").text for q in QUESTIONS + ["after note 2"]]
    held = first.index("u")
    fingerprint, records = _fingerprint(held), (dict(held.packets), list(held.descriptors), dict(held.by_packet))
    first.close()

    second = MemCompile(path, embeddings=embeddings)
    calls = []
    real_load = second.engine.records.load
    monkeypatch.setattr(
        second.engine.records, "load", lambda user, after=(-1, -1): calls.append(after) or real_load(user, after)
    )
    assert [second.compile(q, "u").text for q in QUESTIONS + ["after note 2"]] == expected
    assert len(calls) == 1 and calls[0][0] >= 0  # one incremental read after the snapshot's last packet
    loaded = second.index("u")
    assert_same_fingerprint(_fingerprint(loaded), fingerprint)
    assert (dict(loaded.packets), list(loaded.descriptors), dict(loaded.by_packet)) == records

    # a damaged file is never trusted: rebuilt from the records, same answers
    saved.write_bytes(saved.read_bytes()[:-50] + b"x" * 50)
    third = MemCompile(path, embeddings=embeddings)
    with caplog.at_level(logging.WARNING):
        assert [third.compile(q, "u").text for q in QUESTIONS + ["after note 2"]] == expected
    assert "damaged" in caplog.text


def test_gc_pauses_nest_across_threads_and_always_resume():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other_load():
        with gc_paused():
            inside.set()
            release.wait(10)

    loader = threading.Thread(target=other_load)
    loader.start()
    inside.wait(10)
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("a failed load")
    assert not gc.isenabled()  # the other load is still running
    release.set()
    loader.join()
    assert gc.isenabled()


def test_what_a_load_made_goes_to_the_oldest_generation_unless_the_host_freezes():
    def made_while_paused():
        with gc_paused():
            return [[i] for i in range(1000)]  # tracked containers, like the records of an index

    loaded = made_while_paused()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(o) in oldest for o in loaded) and gc.get_freeze_count() == 0
    gc.freeze()  # a host that keeps its own objects frozen (a pre-fork server) is left as it is
    try:
        again = made_while_paused()
        oldest = {id(o) for o in gc.get_objects(generation=2)}
        assert gc.get_freeze_count() > 0 and not any(id(o) in oldest for o in again)  # still frozen, not moved
    finally:
        gc.unfreeze()


def test_forget_and_delete_remove_the_snapshot_file(tmp_path, embeddings, monkeypatch):
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 1)
    mem = MemCompile(tmp_path / "store", embeddings=embeddings)
    mem.add_turns(demo_turns(), user_id="u")
    saved = mem.host.cache.files.path("u")
    assert saved.is_file()
    mem.delete_turns("u", ["D1:2"])
    assert not saved.exists()
    mem.add_turns(_turns(4, "more"), user_id="u")
    assert saved.is_file()
    mem.forget("u")
    assert not saved.exists() and mem.compile("kayak", "u").packets == []


def test_a_sweep_removes_the_files_of_users_forgotten_or_deleted_from_elsewhere(tmp_path, embeddings, monkeypatch):
    # as on a shared PostgreSQL store: another machine's forget reaches the records, not this machine's files
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 1)
    mem = MemCompile(tmp_path / "store", embeddings=embeddings)
    for user in ("kept", "forgotten", "deleted"):
        mem.add_turns(demo_turns(), user_id=user)
    files = mem.host.cache.files
    (files.folder / "junk.snapshot").write_bytes(b"not a snapshot")
    kept = files.path("kept").read_bytes()
    mac, head, payload = kept.split(b"\n", 2)
    earlier = json.dumps({**json.loads(head), "format": 1}).encode()  # an earlier release's file of a user it holds
    (files.folder / "kept.earlier.snapshot").write_bytes(mac + b"\n" + earlier + b"\n" + payload)
    mem.engine.records.forget("forgotten")
    mem.engine.records.delete_packets("deleted", [mem.index("deleted").by_dia["D1:2"]])
    assert files.sweep(mem.engine.records.head) == 4
    assert sorted(p.name for p in files.folder.iterdir()) == [files.path("kept").name]
    assert files.sweep(mem.engine.records.head) == 0
    mem.close()


def test_processes_of_other_builds_never_replace_each_others_snapshot_files(tmp_path, embeddings, monkeypatch):
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 1)
    dense = MemCompile(tmp_path / "store", embeddings=embeddings)
    dense.add_turns(demo_turns(), user_id="u")
    expected = dense.compile("Where does Priya work now?", "u").text
    dense.close()
    files = {f: f.read_bytes() for f in (tmp_path / "store" / "snapshots").glob("*.snapshot")}
    lexical = MemCompile(tmp_path / "store", dense=False)  # e.g. a process without the model
    calls = []
    real_load = lexical.engine.records.load
    monkeypatch.setattr(
        lexical.engine.records, "load", lambda user, after=(-1, -1): calls.append(after) or real_load(user, after)
    )
    assert lexical.compile("Where does Priya work now?", "u").packets
    assert calls and calls[0] != (-1, -1)  # the other model's file, read without its vectors: not rebuilt
    assert not lexical.index("u").vectors
    lexical.add_turns([{"speaker": "Tom", "text": "The kayak is blue.", "time": "2024-05-01"}], user_id="u")
    lexical.close()
    for f, data in files.items():  # the dense process's file is as it left it
        assert f.read_bytes() == data
    dense = MemCompile(tmp_path / "store", embeddings=embeddings)
    dense.add_turns([{"speaker": "Tom", "text": "The kayak is blue.", "time": "2024-05-01"}], user_id="u")
    expected = dense.compile("Where does Priya work now?", "u").text
    dense.close()
    again = MemCompile(tmp_path / "store", embeddings=embeddings)
    calls = []
    real_load = again.engine.records.load
    monkeypatch.setattr(
        again.engine.records, "load", lambda user, after=(-1, -1): calls.append(after) or real_load(user, after)
    )
    assert again.compile("Where does Priya work now?", "u").text == expected
    assert calls and calls[0] != (-1, -1)  # read from its own file, not rebuilt
    again.forget("u")
    assert not list((tmp_path / "store" / "snapshots").glob("*.snapshot"))  # a forget removes every build's file


def test_a_user_loading_cold_does_not_block_another_users_queries(make_mem):
    mem = make_mem("store", turns=demo_turns())
    mem.add_turns(_turns(5, "b"), user_id="b")
    cache = mem.host.cache
    cache.drop("u")
    with cache._map_lock:
        lock = cache._states.setdefault("u", UserState("u")).load_lock
    done = threading.Event()
    with lock:  # as if user u's cold load were under way
        t = threading.Thread(target=lambda: (mem.compile("kayak", "b"), done.set()))
        t.start()
        assert done.wait(30), "a query of user b waited for user u's load"
    t.join()


def test_the_cache_holds_at_most_cache_size_users(tmp_path, embeddings):
    mem = MemCompile(tmp_path / "store", embeddings=embeddings, cache_size=2)
    for user in ("a", "b", "c", "d"):
        mem.add_turns(_turns(3, user), user_id=user)
        mem.compile("kayak", user)
    assert len(mem.host.cache) == 2
    assert mem.compile("a note 1", "a").packets  # an evicted user is loaded again on demand
    threads = [threading.Thread(target=mem.compile, args=("kayak", user)) for user in ["a", "b"] + list("uvwxyz")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(mem.host.cache) == 2 and len(mem.host.cache._states) == 2  # nothing kept for ids nobody stored


def test_graphs_need_a_context_and_take_the_user_from_it(make_mem):
    mem = make_mem("store", turns=demo_turns())
    with pytest.raises(ValueError, match="context"):
        query_graph.invoke({"query": "kayak"})
    out = query_graph.invoke({"query": "What is the beagle called?"}, context=mem.context("u"))
    assert "Biscuit" in out["context"]
    assert query_graph.invoke({"query": "What is the beagle called?"}, context=mem.context("nobody"))["packets"] == []


# --- GrowArray against a model: forks never see each other's writes ------------------------------------------
_op = st.tuples(
    st.sampled_from(["append", "insert", "delete", "set", "fork"]),
    st.integers(0, 3),
    st.integers(0, 40),
    st.integers(-5, 5),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=60))
def test_growarray_views_behave_like_independent_lists(ops):
    views, models = [GrowArray(np.int64, 2)], [[]]
    for kind, who, pos, value in ops:
        i = who % len(views)
        view, model = views[i], models[i]
        if kind == "fork":
            views.append(view.fork())
            models.append(list(model))
        elif kind == "append":
            view.append(value)
            model.append(value)
        elif kind == "insert":
            at = pos % (len(model) + 1)
            view.insert(at, value)
            model.insert(at, value)
        elif model and kind == "delete":
            at = pos % len(model)
            view.delete(at)
            del model[at]
        elif model and kind == "set":
            at = pos % len(model)
            view.writable()[at] = value
            model[at] = value
        for v, m in zip(views, models):
            assert v.view().tolist() == m


def test_close_rewrites_the_snapshot_file_only_when_it_lags_by_a_64th(tmp_path):
    path = tmp_path / "store"
    mem = MemCompile(path, dense=False)
    mem.add_turns(_turns(200, "base"), user_id="u")
    mem.close()  # no file yet: written
    saved = MemCompile(path, dense=False).host.cache.files.path("u")
    first = saved.read_bytes()
    mem = MemCompile(path, dense=False)
    mem.add_turns(_turns(2, "late"), user_id="u")  # 2 < 202 // 64: left to the next process's incremental read
    mem.close()
    assert saved.read_bytes() == first
    again = MemCompile(path, dense=False)
    assert "late note 1" in again.compile("late note 1", "u").text.lower() and len(again.index("u").packets) == 202
    again.add_turns(_turns(3, "more"), user_id="u")  # 5 behind the file now: written
    again.close()
    assert saved.read_bytes() != first


@pytest.fixture()
def stores_behind(monkeypatch):
    """A user of any size counts as large enough to store its first write's vectors behind it."""
    monkeypatch.setattr(uow_module, "STORE_BEHIND_FROM", 1)


def _reopened(make_mem, tmp_path):
    """A store with the demo conversation, closed and opened again: its collection not loaded by this process."""
    make_mem("store", turns=demo_turns()).close()
    mem = make_mem("store")
    mem.compile(QUESTIONS[0], "u")  # from the snapshot file: the vector store is not touched
    assert not mem.engine.vectors.loaded("u")
    return mem


def test_the_first_write_after_opening_publishes_before_its_vectors_are_stored(
    make_mem, tmp_path, monkeypatch, stores_behind
):
    mem = _reopened(make_mem, tmp_path)
    gate, real = threading.Event(), uow_module.UnitOfWork._store_behind

    def held(self, items, vectors):
        assert gate.wait(60)
        real(self, items, vectors)

    monkeypatch.setattr(uow_module.UnitOfWork, "_store_behind", held)
    mem.add_turns(_turns(3, "later"), user_id="u")  # returns while its vectors wait at the gate
    index = mem.index("u")
    assert len(index.vectors) == len(index.packets) == len(demo_turns()) + 3  # searchable by the dense channel now
    assert len(mem.engine.vectors.ids("u")) == len(demo_turns())  # not in the vector store yet
    assert "later kayak trip" in mem.compile("later note 2 kayak trip", "u").text
    gate.set()
    stats = mem.stats("u")  # waits for the vectors left behind
    assert stats["vectors"] == stats["packets"] == len(demo_turns()) + 3
    assert mem.engine.vectors.loaded("u")
    mem.add_turns(_turns(2, "again"), user_id="u")  # loaded now: stored inside the unit
    assert uow_module.UnitOfWork._store_behind is held and mem.engine.vectors.ids("u") == set(mem.index("u").packets)


def test_vectors_left_behind_are_never_stored_for_packets_forgotten_meanwhile(
    make_mem, tmp_path, monkeypatch, stores_behind
):
    mem = _reopened(make_mem, tmp_path)
    gate, real, skipped = threading.Event(), uow_module.UnitOfWork._store_behind, []

    def held(self, items, vectors):
        assert gate.wait(60)
        real(self, items, vectors)
        skipped.append(not self.engine.vectors.ids("u"))

    monkeypatch.setattr(uow_module.UnitOfWork, "_store_behind", held)
    mem.add_turns(_turns(3, "later"), user_id="u")
    mem.forget("u")  # takes the writer lock before the job that stores the vectors
    gate.set()
    mem.host.settle("u")
    assert skipped == [True] and mem.engine.vectors.ids("u") == set() and mem.stats("u")["packets"] == 0


def test_vectors_a_crash_left_unstored_are_made_again_by_the_next_load(make_mem, tmp_path, monkeypatch, stores_behind):
    mem = _reopened(make_mem, tmp_path)
    # the process dies after the add returned, before the vector store got its vectors
    monkeypatch.setattr(uow_module.UnitOfWork, "_store_behind", lambda self, items, vectors: None)
    mem.add_turns(_turns(3, "later"), user_id="u")
    assert len(mem.engine.vectors.ids("u")) == len(demo_turns())
    monkeypatch.undo()
    after = make_mem("store")  # reads the snapshot file, then the newer records, whose vectors are missing
    index = after.index("u")
    assert len(index.vectors) == len(index.packets) == len(demo_turns()) + 3
    assert after.engine.vectors.ids("u") == set(index.packets)
    ctx = after.compile("later note 2 kayak trip", "u")
    assert ctx.trace["dense"]["hits"] > 0 and "later kayak trip" in ctx.text
