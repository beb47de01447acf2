"""MemCompileStore as LangGraph defines a store: one ranking across namespaces with scores that are similarities,
TTL (per put, the store's default, refresh on read, the sweeper, the served store's langgraph.json), the index
config, values returned as put, and every label InMemoryStore accepts."""

from __future__ import annotations

import hashlib
import json
import runpy
import tempfile
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore
from support.paths import ROOT

from memcompile_langgraph import MemCompile, upkeep
from memcompile_langgraph.integrations import base_store
from memcompile_langgraph.integrations.base_store import MemCompileStore, namespace_user, user_namespace
from memcompile_langgraph.integrations.store_values import read_document
from memcompile_langgraph.served import served_memory

BEAGLE = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}


@pytest.fixture(params=[False, True], ids=["lexical", "dense"])
def store(request, tmp_path):
    kwargs = {"embeddings": request.getfixturevalue("embeddings")} if request.param else {"dense": False}
    mem = MemCompile(tmp_path / "store", **kwargs)
    yield MemCompileStore(mem)
    mem.close()


def test_one_search_over_several_namespaces_is_one_ranking(store):
    store.put(("memories", "ann"), "pizza", {"text": "My favourite pizza is margherita with basil."})
    store.put(("memories", "ann"), "job", {"text": "I work as an architect in Lisbon."})
    store.put(("memories", "tom"), "dog", BEAGLE)
    found = store.search(("memories",), query="What is the name of the beagle?")
    assert found[0].key == "dog" and found[0].namespace == ("memories", "tom")
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)


def test_scores_are_similarities_in_the_unit_interval(store):
    store.put(("tom",), "dog", BEAGLE)
    store.put(("tom",), "job", {"text": "I work as a night nurse in Boston."})
    related = store.search(("tom",), query="the beagle named Biscuit")
    assert related[0].key == "dog" and 0.3 <= related[0].score <= 1.0
    unrelated = store.search(("tom",), query="poisson")
    assert all(0.0 <= i.score <= 0.25 for i in unrelated) and max(i.score for i in unrelated) < related[0].score
    store.put(("tom",), "dog", {**BEAGLE, "text": "I repaired the roof of the garden shed."})  # edited away
    after = next(i for i in store.search(("tom",), query="the beagle named Biscuit") if i.key == "dog")
    assert after.score < related[0].score - 0.2


def test_values_come_back_as_put_and_provenance_is_an_attribute(store):
    store.put(("tom",), "dog", BEAGLE)
    [hit] = store.search(("tom",), query="What is the beagle called?")
    assert hit.value == BEAGLE
    assert hit.memcompile["compiled"].startswith("[dog] Tom | 2024-03-04") and hit.memcompile["rank"] == 1
    hit.value["text"] = "changed by the caller"
    assert store.get(("tom",), "dog").value == BEAGLE


def test_ttl_per_put_default_refresh_and_sweeper(tmp_path):
    mem = MemCompile(tmp_path / "store", dense=False)
    store = MemCompileStore(mem, ttl={"default_ttl": 0.1, "refresh_on_read": True, "sweep_interval_minutes": 0.01})
    assert store.supports_ttl and store.ttl_config["default_ttl"] == 0.1
    store.put(("a",), "refreshed", {"text": "Read often."})  # the default: 6 seconds
    store.put(("a",), "fixed", {"text": "Never read."}, ttl=0.1)
    store.put(("a",), "forever", {"text": "No time to live."}, ttl=None)
    start = time.time()
    time.sleep(3.5)
    assert store.get(("a",), "refreshed") is not None  # lives 6 seconds from now
    assert store.get(("a",), "fixed", refresh_ttl=False) is not None
    time.sleep(max(0.0, start + 7.0 - time.time()))
    assert {i.key for i in store.search(("a",))} == {"refreshed", "forever"}
    store.start_ttl_sweeper()
    deadline = time.time() + 20
    while len(mem.turns("a")) > 1 and time.time() < deadline:
        time.sleep(0.2)
    assert store.stop_ttl_sweeper(timeout=5)
    assert [t.packet.text for t in mem.turns("a")] == ["No time to live."]
    mem.close()


def test_an_item_lives_its_ttl_from_when_it_is_stored(tmp_path, monkeypatch):
    mem = MemCompile(tmp_path / "store", dense=False)
    store = MemCompileStore(mem)
    invoke = base_store.ingest_graph.invoke

    def slow_invoke(*args, **kwargs):  # an ingest that takes a while, as the first one loading a model does
        time.sleep(1.5)
        return invoke(*args, **kwargs)

    monkeypatch.setattr(base_store.ingest_graph, "invoke", slow_invoke)
    store.put(("a",), "k", {"text": "Expires in six seconds."}, ttl=0.1)
    [expiry] = mem.engine.records.expiries("a", [t.packet.packet_id for t in mem.turns("a")]).values()
    assert expiry.at - time.time() == pytest.approx(6.0, abs=0.5)
    mem.close()


def test_the_served_store_reads_the_ttl_of_langgraph_json(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCOMPILE_STORE", str(tmp_path / "served"))
    ttl = {"default_ttl": 60, "refresh_on_read": False, "sweep_interval_minutes": 5}
    monkeypatch.setenv("LANGGRAPH_STORE", json.dumps({"path": "./graphs/store.py:store", "ttl": ttl}))
    served_memory.cache_clear()  # the memory of this test's $MEMCOMPILE_STORE
    store = runpy.run_path(str(ROOT / "graphs" / "store.py"))["store"]
    try:
        assert store.ttl_config == ttl and store._sweeper is not None
        store.put(("tom",), "k", {"text": "Expires in an hour."})
        [expiry] = store.memory.engine.records.expiries(
            "tom", [t.packet.packet_id for t in store.memory.turns("tom")]
        ).values()
        assert abs(expiry.at - time.time() - 3600) < 60 and expiry.ttl == 60
    finally:
        store.stop_ttl_sweeper(timeout=1)
        store.memory.close()
        served_memory.cache_clear()


def _embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding of 64 dimensions: each word counted in a bucket chosen by its hash."""
    calls.append(len(texts))
    out = []
    for text in texts:
        vec = [0.0] * 64
        for word in text.lower().split():
            vec[hashlib.sha256(word.strip(".,?!").encode()).digest()[0] % 64] += 1.0
        out.append(vec)
    return out


calls: list[int] = []


def test_the_index_config_names_fields_and_embeddings(tmp_path):
    index = {"fields": ["memo", "tags[*]"], "dims": 64, "embed": _embed}
    store = MemCompileStore.open(str(tmp_path / "store"), index=index)
    try:
        assert store.index_config == index and store.embeddings.embed_query("a b") == _embed(["a b"])[0]
        store.put(("tom",), "k", {"memo": "I adopted a beagle.", "tags": ["pets"], "noise": "xyzzy"})
        assert [t.packet.text for t in store.memory.turns("tom")] == ["I adopted a beagle.\npets"]
        assert sum(calls) > 0  # the dense channel embeds with the given function
        store.put(("tom",), "j", {"memo": "Only this.", "noise": "xyzzy"}, index=["noise"])  # a put's index wins
        assert store.memory.turns("tom")[-1].packet.text == "xyzzy"
        assert store.search(("tom",), query="beagle")[0].key == "k"
    finally:
        store.memory.close()
    plain = MemCompile(tmp_path / "plain", dense=False)
    with pytest.raises(ValueError, match="must be the memory's embeddings"):
        MemCompileStore(plain, index=index)
    plain.close()


def test_an_item_of_several_fields_scores_as_its_best_field(tmp_path):
    store = MemCompileStore.open(
        str(tmp_path / "store"), index={"fields": ["memo", "tags[*]"], "dims": 64, "embed": _embed}
    )
    try:
        store.put(("tom",), "a", {"memo": "beagle", "tags": ["garden", "roof"]})
        store.put(("tom",), "b", {"memo": "The garden shed roof.", "tags": ["beagle"]})
        store.put(("tom",), "c", {"memo": "beagle garden"}, index=["memo"])  # one field: scored as a whole
        found = {i.key: i.score for i in store.search(("tom",), query="beagle")}
        assert found["a"] == pytest.approx(1.0, abs=1e-6) and found["b"] == pytest.approx(1.0, abs=1e-6)
        assert found["c"] < 0.9
    finally:
        store.memory.close()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(paths=JSON, value=st.dictionaries(st.text(max_size=4), JSON, max_size=3))
def test_a_stored_document_with_any_paths_reads_back_without_harm(paths, value):
    doc = read_document(json.dumps({"value": value, "position": 3, "indexed": True, "paths": paths}))
    assert doc is not None and doc.value == value and doc.position == 3
    assert doc.paths is None or all(isinstance(p, str) for p in doc.paths)
    assert all(isinstance(t, str) and t.strip() for t in doc.texts())


LABELS = ["a%b", "line\n", "tab\tx", "%2", "50%", "e\u0301", "tom\u202e", " ", "x/y", "%25", "a%25b", "\u2205"]


def test_every_label_the_in_memory_store_accepts_is_a_namespace(tmp_path):
    mem = MemCompile(tmp_path / "store", dense=False)
    ours, ref = MemCompileStore(mem), InMemoryStore()
    for n, label in enumerate(LABELS):
        for s in (ours, ref):
            s.put((label, "x"), "k", {"text": f"Note {n}."})
    for n, label in enumerate(LABELS):
        assert ours.get((label, "x"), "k").value == ref.get((label, "x"), "k").value == {"text": f"Note {n}."}
    assert sorted(ours.list_namespaces()) == sorted(ref.list_namespaces())
    assert [i.key for i in ours.search(("a%b",))] == ["k"]
    for bad in [("a.b",), ("langgraph",), ("",)]:
        for s in (ours, ref):
            with pytest.raises(InvalidNamespaceError):
                s.put(bad, "k", {"text": "x"})
    mem.close()


@pytest.fixture(scope="module")
def in_memory():
    mem = MemCompile(None, dense=False)
    yield MemCompileStore(mem)
    mem.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(namespace=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3).map(tuple))
def test_a_namespace_is_refused_exactly_as_the_in_memory_store_refuses_it(in_memory, namespace):
    try:
        InMemoryStore().put(namespace, "k", {"text": "x"})
    except InvalidNamespaceError:
        with pytest.raises(InvalidNamespaceError):
            in_memory.put(namespace, "k", {"text": "x"})
        return
    assert user_namespace(namespace_user(namespace)) == namespace  # accepted: a namespace of its own


def test_puts_awaited_together_are_written_together_and_each_fails_with_its_group(tmp_path, monkeypatch):
    import asyncio

    store = MemCompileStore(MemCompile(tmp_path / "m", dense=False))
    units: list[int] = []
    write = MemCompileStore._write_user

    def counted(self, user, ops):
        units.append(len(ops))
        return write(self, user, ops)

    monkeypatch.setattr(MemCompileStore, "_write_user", counted)

    async def put_all(n: int, key) -> list:
        puts = (store.aput(("u",), key(i), {"text": f"note {i} on topic {i % 5}"}) for i in range(n))
        return await asyncio.gather(*puts, return_exceptions=True)

    try:
        assert asyncio.run(put_all(60, lambda i: f"k{i}")) == [None] * 60
        assert sum(units) == 60 and len(units) < 60  # one ingest and commit for many puts
        assert {i.key for i in store.search(("u",), limit=100)} == {f"k{i}" for i in range(60)}
        # puts of one key awaited together: the last queued wins, whole
        assert asyncio.run(put_all(20, lambda i: "same")) == [None] * 20
        assert store.get(("u",), "same").value == {"text": "note 19 on topic 4"}

        def broken(self, user, ops):
            raise RuntimeError("records gone")

        monkeypatch.setattr(MemCompileStore, "_write_user", broken)
        # every put of a failed group fails with it; none is left unanswered
        failed = asyncio.run(put_all(10, lambda i: f"x{i}"))
        assert all(isinstance(e, RuntimeError) and str(e) == "records gone" for e in failed)
        monkeypatch.setattr(MemCompileStore, "_write_user", counted)
        store.put(("u",), "after", {"text": "the queue writes again"})  # a failed group leaves no writer behind
        assert store.get(("u",), "after").value == {"text": "the queue writes again"}
        assert store.get(("u",), "x0") is None
    finally:
        store.memory.close()


class Clock:
    """The time the store and the sweep read, moved by the test (whole seconds, so sums are exact)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def time(self) -> float:
        return self.now


def test_a_refused_batch_does_not_refresh_what_it_read():
    """A batch refused for one of its puts changes nothing, not even the ttl its reads would have started again."""
    clock = Clock()
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as tmp:
        patch.setattr(base_store, "time", clock)
        store = MemCompileStore(MemCompile(tmp, dense=False))
        try:
            store.put(("u",), "k", {"text": "A note that lives a minute."}, ttl=1)
            clock.now += 45
            with pytest.raises(ValueError):
                store.batch([GetOp(("u",), "k", refresh_ttl=True), PutOp(("u",), "bad", {"text": "x"}, ttl=-1)])
            assert store.get(("u",), "bad") is None
            clock.now += 30  # past the minute from the put, within one from the refused refresh
            assert store.get(("u",), "k", refresh_ttl=False) is None
        finally:
            store.memory.close()


TTL_KEYS = ["k", "p"]
TTL_OP = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(TTL_KEYS),
        st.integers(0, 1),
        st.integers(0, 1),
        st.sampled_from([None, 1, 2]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(TTL_KEYS)),
    st.tuples(st.just("get"), st.sampled_from(TTL_KEYS), st.booleans()),
    st.tuples(st.just("search"), st.booleans()),
    st.tuples(st.just("batch"), st.sampled_from(TTL_KEYS), st.booleans(), st.sampled_from([None, 1])),
    st.tuples(st.just("sweep")),
)
WAIT = st.sampled_from([0, 30, 45])  # seconds after each step: a read between two waits is refreshed or gone


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(TTL_OP, WAIT), min_size=3, max_size=16))
@example(steps=[(("put", "k", 0, 0, 1), 45), (("get", "k", True), 30), (("search", False), 0)])  # refreshed
def test_ttl_follows_langgraphs_rules_step_by_step(steps):
    """LangGraph's TTL against a model of it: a put's ttl (minutes) runs from the put, a read with refresh_ttl
    starts it again, an expired item is gone for reads and for a put (which makes it anew, last in the listing),
    and the sweep removes exactly the expired items."""
    clock = Clock()
    model: dict[str, list] = {}  # key -> [value, expires at or None, ttl]

    def live(key: str) -> bool:
        return key in model and (model[key][1] is None or model[key][1] > clock.now)

    def refresh(key: str) -> None:
        if model[key][2] is not None:
            model[key][1] = clock.now + model[key][2] * 60

    def put(key: str, value: dict | None, ttl: int | None) -> None:
        if not live(key) or value is None:
            model.pop(key, None)  # gone: a put makes it anew, at the end of the listing
        if value is not None:
            expires = None if ttl is None else clock.now + ttl * 60
            model[key] = [value, expires, ttl]

    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as tmp:
        patch.setattr(base_store, "time", clock)
        patch.setattr(upkeep, "time", clock)
        mem = MemCompile(tmp, dense=False)
        store = MemCompileStore(mem)
        try:
            for op, wait in steps:
                kind = op[0]
                if kind == "put":  # the same text with another "n" keeps the turn; other text replaces it
                    _, key, text, n, ttl = op
                    value = {"text": f"Note {text} of {key}.", "n": n}
                    store.put(("u",), key, value, ttl=ttl)
                    put(key, value, ttl)
                elif kind == "delete":
                    store.delete(("u",), op[1])
                    put(op[1], None, None)
                elif kind == "get":
                    _, key, fresh = op
                    got = store.get(("u",), key, refresh_ttl=fresh)
                    assert (got and got.value) == (model[key][0] if live(key) else None)
                    if live(key) and fresh:
                        refresh(key)
                elif kind == "search":
                    found = store.search(("u",), limit=10, refresh_ttl=op[1])
                    alive = [k for k in model if live(k)]
                    assert [(i.key, i.value) for i in found] == [(k, model[k][0]) for k in alive]
                    for key in alive if op[1] else ():
                        refresh(key)
                elif kind == "batch":  # the read sees the store before the put, and refreshes first
                    _, key, fresh, ttl = op
                    value = {"text": f"Batched {key}.", "n": 0}
                    got, _ = store.batch([GetOp(("u",), key, fresh), PutOp(("u",), key, value, ttl=ttl)])
                    assert (got and got.value) == (model[key][0] if live(key) else None)
                    if live(key) and fresh:
                        refresh(key)
                    put(key, value, ttl)
                else:
                    expired = [k for k in model if not live(k)]
                    assert store.sweep_ttl() == len(expired)
                    for key in expired:
                        del model[key]
                    assert sorted(t.packet.dia_id for t in mem.turns("u")) == sorted(model)
                clock.now += wait
        finally:
            mem.close()
