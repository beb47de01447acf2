"""The served store's mapping (one memory per namespace of one label, graphs/store.py) is one-to-one over every user
id, and no namespace lies below another user's: a prefix search of tom's own namespace holds only tom's memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore, one_label_namespace, one_label_user

USER_ID = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@given(USER_ID, USER_ID)
def test_distinct_users_have_distinct_one_label_namespaces_that_map_back(a, b):
    na, nb = one_label_namespace(a), one_label_namespace(b)
    if na is not None:
        assert len(na) == 1 and "." not in na[0] and one_label_user(na) == a
        if nb is not None:
            assert (na == nb) == (a == b)


@pytest.fixture(scope="module")
def shared():
    """One memory holding tom, tom.smith and tom/x, written through the API (as other surfaces write)."""
    mem = MemCompile(None, dense=False)
    for user in ("tom", "tom.smith", "tom/x"):
        text = f"My secret word is {user.replace('.', 'dot').replace('/', 'slash')}."
        mem.add_turns([{"speaker": "User", "text": text, "time": "2024-05-01"}], user)
    yield mem
    mem.close()


def test_a_served_store_keeps_each_users_memory_to_its_own_namespace(shared):
    served = MemCompileStore(shared, namespace_to_user=one_label_user, user_to_namespace=one_label_namespace)
    for query in (None, "secret word"):
        assert [i.value["text"] for i in served.search(("tom",), query=query, limit=10)] == ["My secret word is tom."]
    assert [i.value["text"] for i in served.search(("tom%2Esmith",), limit=10)] == ["My secret word is tomdotsmith."]
    assert [i.value["text"] for i in served.search(("tom/x",), limit=10)] == ["My secret word is tomslashx."]
    assert served.search(("tom", "x")) == []
    with pytest.raises(InvalidNamespaceError, match="one memory per label"):
        served.put(("tom", "x"), "k", {"text": "Not tom's."})
    assert sorted(served.list_namespaces()) == [("tom",), ("tom%2Esmith",), ("tom/x",)]
    default = MemCompileStore(shared)  # the default mapping lists tom/x below ("tom",): why a server uses one label
    assert "My secret word is tomslashx." in [i.value["text"] for i in default.search(("tom",), limit=10)]
