"""MemCompileStore's namespace <-> user mappings are one-to-one, and a prefix reaches only the namespaces under it,
whole labels at a time: no user reaches another's memory through a namespace (tom and "tom.smith")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import (
    MemCompileStore,
    join_namespace,
    one_label_namespace,
    one_label_user,
    split_user,
)

# LangGraph's namespace labels: non-empty, no ".", no NUL; "%" and the escapes themselves included on purpose
LABEL = st.text(st.characters(blacklist_characters=".\x00", blacklist_categories=("Cs",)), min_size=1, max_size=12)
LABEL = st.one_of(LABEL, st.sampled_from(["%", "%25", "%2E", "tom", "a%2", "%%"]))
NAMESPACE = st.lists(LABEL, min_size=1, max_size=4).map(tuple)


@given(NAMESPACE, NAMESPACE)
def test_distinct_namespaces_are_distinct_users_and_each_user_names_its_namespace(a, b):
    assert (join_namespace(a) == join_namespace(b)) == (a == b)
    assert split_user(join_namespace(a)) == a


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20))
def test_every_user_id_has_at_most_one_namespace_and_it_maps_back(user):
    for namespace in (split_user(user), one_label_namespace(user)):
        if namespace is not None:
            assert all(label and "." not in label for label in namespace)
    if split_user(user) is not None:
        assert join_namespace(split_user(user)) == user
    if one_label_namespace(user) is not None:
        assert one_label_user(one_label_namespace(user)) == user


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10), max_size=6, unique=True))
def test_one_label_namespaces_of_distinct_users_never_meet(users):
    namespaces = [one_label_namespace(u) for u in users]
    kept = [n for n in namespaces if n is not None]
    assert len(set(kept)) == len(kept)


@pytest.fixture(scope="module")
def shared():
    """One memory holding tom, tom.smith and memories.tom, written through the API (as other surfaces write)."""
    mem = MemCompile(None, dense=False)
    for user in ("tom", "tom.smith", "memories.tom"):
        mem.add_turns(
            [{"speaker": "User", "text": f"My secret word is {user.replace('.', 'x')}.", "time": "2024-05-01"}], user
        )
    yield mem
    mem.close()


@settings(max_examples=30, deadline=None)
@given(NAMESPACE)
def test_a_prefix_search_lists_only_the_namespaces_under_it(shared, prefix):
    store = MemCompileStore(shared)
    for item in store.search(prefix, limit=50):
        assert item.namespace[: len(prefix)] == prefix
    for item in store.search(prefix, query="secret word", limit=50):
        assert item.namespace[: len(prefix)] == prefix


def test_tom_and_tom_smith_are_two_memories(shared):
    store = MemCompileStore(shared)
    assert {i.value["text"] for i in store.search(("tom",), limit=10) if i.namespace == ("tom",)} == {
        "My secret word is tom."
    }
    assert [i.value["text"] for i in store.search(("tom", "smith"), limit=10)] == ["My secret word is tomxsmith."]
    served = MemCompileStore(shared, namespace_to_user=one_label_user, user_to_namespace=one_label_namespace)
    assert [i.value["text"] for i in served.search(("tom",), limit=10)] == ["My secret word is tom."]
    assert [i.value["text"] for i in served.search(("tom%2Esmith",), limit=10)] == ["My secret word is tomxsmith."]
    assert served.search(("tom", "smith")) == []
    with pytest.raises(ValueError, match="one label"):
        served.put(("tom", "smith"), "k", {"text": "Not tom's."})
    assert sorted(served.list_namespaces()) == [("memories%2Etom",), ("tom",), ("tom%2Esmith",)]
