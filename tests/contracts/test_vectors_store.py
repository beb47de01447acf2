"""The VectorsStore contract (store/protocols.py), run against Chroma as users run it: a persistent directory, in
memory, and a real `chroma run` server."""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memcompile_langgraph.store.chroma import ChromaVectors
from memcompile_langgraph.store.protocols import VectorsStore


@pytest.fixture(params=["directory", "memory", pytest.param("server", marks=pytest.mark.slow)])
def opener(request, tmp_path):
    """A function opening the store again (a second process, or a restart, sees the same vectors)."""
    if request.param == "directory":
        return lambda: ChromaVectors(tmp_path / "store")
    if request.param == "memory":
        vs = ChromaVectors(None)
        return lambda: vs
    url, namespace = request.getfixturevalue("chroma_url"), f"t{uuid.uuid4().hex[:10]}"
    return lambda: ChromaVectors(None, url=url, namespace=namespace)


@pytest.fixture
def vectors(opener):
    return opener()


def unit(*xs: float) -> list[float]:
    n = math.sqrt(sum(x * x for x in xs))
    return [x / n for x in xs]


def names(vs: ChromaVectors) -> set[str]:
    """This store's collections (a Chroma server also holds other tests' stores, written meanwhile)."""
    return {c.name for c in vs.client.list_collections() if c.name.startswith(f"{vs.prefix}_")}


def test_implements_the_protocol(vectors):
    assert isinstance(vectors, VectorsStore)


def test_upsert_then_ids_vectors_and_query_nearest_first(vectors):
    vecs = {"a": unit(1, 0, 0, 0), "b": unit(1, 1, 0, 0), "c": unit(0, 0, 1, 0)}
    vectors.upsert("u", list(vecs), list(vecs.values()), ["D1:1", "D1:2", "D1:3"])
    assert vectors.ids("u") == {"a", "b", "c"}
    ids, got = vectors.vectors("u")
    assert sorted(ids) == ["a", "b", "c"]
    for i, v in zip(ids, got):
        assert [float(x) for x in v] == pytest.approx(vecs[i], abs=1e-6)  # stored as float32
    hits = vectors.query("u", unit(1, 0.1, 0, 0), k=2)
    assert [h[0] for h in hits] == ["a", "b"] and hits[0][1] > hits[1][1] and 0.9 < hits[0][1] <= 1.0001
    assert [h[0] for h in vectors.query("u", unit(0.1, 0, 1, 0), k=10)] == ["c", "a", "b"]  # k above the count


def test_upsert_replaces_a_vector_with_the_same_id(vectors):
    vectors.upsert("u", ["a", "b"], [unit(1, 0), unit(0, 1)], ["D1:1", "D1:2"])
    vectors.upsert("u", ["a"], [unit(0, 1)], ["D1:1"])
    assert vectors.ids("u") == {"a", "b"} and vectors.query("u", unit(0, 1), k=2)[1][1] > 0.99


def test_reads_of_an_unknown_user_are_empty_and_create_nothing(vectors):
    before = names(vectors)
    assert vectors.ids("ghost") == set() and vectors.vectors("ghost") == ([], [])
    assert vectors.query("ghost", unit(1, 0), k=5) == []
    vectors.delete("ghost", ["x"])
    vectors.drop("ghost")
    assert names(vectors) == before


def test_delete_removes_only_the_given_ids_of_that_user(vectors):
    vectors.upsert("u", ["a", "b", "c"], [unit(1, 0), unit(1, 1), unit(0, 1)], ["1", "2", "3"])
    vectors.upsert("v", ["a"], [unit(1, 0)], ["1"])
    vectors.delete("u", ["a", "c", "missing"])
    vectors.delete("u", [])
    assert vectors.ids("u") == {"b"} and vectors.ids("v") == {"a"}
    assert [h[0] for h in vectors.query("u", unit(1, 0), k=3)] == ["b"]


def test_each_vector_keeps_the_source_it_was_written_with(vectors):
    vectors.upsert("u", ["a", "b", "c"], [unit(1, 0), unit(1, 1), unit(0, 1)], ["1", "2", "3"], ["sa", "sb", "sc"])
    vectors.upsert("u", ["b"], [unit(1, 2)], ["2"])  # made again without one: it keeps none, not b's old one
    assert vectors.sources("u") == {"a": "sa", "b": None, "c": "sc"}
    ids, _, sources = vectors.vectors("u", ["c", "a"], sources=True)
    assert dict(zip(ids, sources)) == {"a": "sa", "c": "sc"}
    assert [(h[0], h[2]) for h in vectors.query("u", unit(0, 1), k=3, sources=True)] == [
        ("c", "sc"),
        ("b", None),
        ("a", "sa"),
    ]
    vectors.delete("u", ["b"])  # a local directory rebuilds the collection: the others keep theirs
    assert vectors.sources("u") == {"a": "sa", "c": "sc"} and vectors.sources("ghost") == {}


def test_drop_forgets_the_user_and_a_new_upsert_starts_again(vectors):
    vectors.upsert("u", ["a", "b"], [unit(1, 0), unit(0, 1)], ["1", "2"])
    vectors.upsert("v", ["z"], [unit(1, 0)], ["1"])
    vectors.drop("u")
    assert vectors.ids("u") == set() and vectors.name("u") not in names(vectors) and vectors.ids("v") == {"z"}
    vectors.upsert("u", ["c"], [unit(0, 1)], ["3"])
    assert vectors.ids("u") == {"c"}


def test_a_reopened_store_sees_the_vectors(opener):
    opener().upsert("u", ["a", "b"], [unit(1, 0), unit(0, 1)], ["1", "2"])
    again = opener()
    assert again.ids("u") == {"a", "b"} and again.query("u", unit(0, 1), k=1)[0][0] == "b"


@pytest.mark.slow
def test_batches_beyond_one_page_are_stored_and_read_whole(vectors):
    n = 5200  # above the upsert batch (2000) and the read page (5000)
    ids = [f"p{i}" for i in range(n)]
    vecs = [unit(1 + i % 7, 1 + i % 11, 1 + i % 13) for i in range(n)]
    vectors.upsert("big", ids, vecs, [f"D{i}" for i in range(n)])
    assert vectors.ids("big") == set(ids) and len(vectors.vectors("big")[0]) == n


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80))
def test_any_user_id_names_a_collection_of_its_own(vectors, user):
    pid = uuid.uuid4().hex
    vectors.upsert(user, [pid], [unit(1, 2)], ["D1:1"])
    assert pid in vectors.ids(user) and pid not in vectors.ids(user + "x")
    vectors.drop(user)
    assert vectors.ids(user) == set()
