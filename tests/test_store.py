"""MemCompileStore under LangGraph's store semantics: put/get/search/delete/list_namespaces, sync and async."""

from datetime import timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from support.scripted_model import ScriptedChatModel

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore, namespace_user, user_namespace
from memcompile_langgraph.users import InvalidUserId, validate_user_id

TOM = ("memories", "tom")
BEAGLE = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}
NURSE = {"role": "user", "content": "I work as a night nurse in Boston."}
PIZZA = {"content": [{"type": "text", "text": "Ann's favourite pizza is margherita."}], "role": "assistant"}


@pytest.fixture
def store(tmp_path):
    mem = MemCompile(tmp_path / "store", dense=False)
    yield MemCompileStore(mem)
    mem.close()


@pytest.fixture
def filled(store):
    store.put(TOM, "beagle", BEAGLE)
    store.put(TOM, "nurse", NURSE)
    store.put(("memories", "ann"), "pizza", PIZZA)
    store.put(("memories", "ann", "work"), "job", {"kind": "job", "title": "architect", "years": 7})
    return store


def test_values_come_back_as_given_and_their_turns_are_indexed(filled):
    beagle = filled.get(TOM, "beagle")
    assert beagle.key == "beagle" and beagle.namespace == TOM and beagle.value == BEAGLE
    assert beagle.created_at == beagle.updated_at and beagle.created_at.tzinfo == timezone.utc
    assert filled.get(TOM, "nurse").value == NURSE and filled.get(("memories", "ann"), "pizza").value == PIZZA
    job = filled.get(("memories", "ann", "work"), "job").value
    assert job == {"kind": "job", "title": "architect", "years": 7}
    turn = filled.memory.turns("memories/ann/work")[0].packet  # any other JSON: one line per field is the text
    assert (turn.speaker, turn.text) == ("User", "kind: job\ntitle: architect\nyears: 7")
    pizza = filled.memory.turns("memories/ann")[0].packet
    assert (pizza.speaker, pizza.text) == ("Assistant", "Ann's favourite pizza is margherita.")
    # namespaces are separate users: the same key elsewhere is another item
    assert filled.get(("memories", "ann"), "beagle") is None and filled.get(("memories",), "beagle") is None
    assert filled.memory.users() == ["memories/ann", "memories/ann/work", "memories/tom"]


def test_put_under_an_existing_key_replaces_the_turn_and_keeps_its_place(filled):
    before = filled.get(TOM, "beagle")
    filled.put(TOM, "beagle", BEAGLE)  # the same turn again: kept as it is
    assert filled.get(TOM, "beagle") == before
    filled.put(TOM, "beagle", {**BEAGLE, "text": "I adopted a poodle named Biscuit."})
    after = filled.get(TOM, "beagle")
    assert after.value["text"] == "I adopted a poodle named Biscuit." and after.created_at > before.created_at
    assert filled.memory.stats("memories/tom")["packets"] == 2
    assert [i.key for i in filled.search(TOM)] == ["beagle", "nurse"]  # an update keeps its place
    found = filled.search(TOM, query="Which dog did Tom adopt?")
    compiled = found[0].memcompile["compiled"]
    assert found[0].key == "beagle" and "poodle" in compiled and "a beagle" not in compiled
    filled.put(TOM, "beagle", {**after.value, "tags": ["pets"]})  # same turn, other fields: the packet stays
    assert (
        filled.get(TOM, "beagle").value["tags"] == ["pets"] and filled.get(TOM, "beagle").created_at == after.created_at
    )


def test_delete_and_put_none_remove_the_turn(filled):
    filled.delete(TOM, "beagle")
    filled.put(TOM, "nurse", None)
    filled.delete(TOM, "never-stored")
    assert filled.get(TOM, "beagle") is None and filled.get(TOM, "nurse") is None
    assert filled.search(TOM, query="Which dog did Tom adopt?") == []
    assert TOM not in filled.list_namespaces()


def test_search_with_a_query_ranks_by_score_in_the_unit_interval(filled):
    query = "What is the name of Tom's beagle and where does he work?"
    items = filled.search(TOM, query=query)
    assert [i.score for i in items] == sorted((i.score for i in items), reverse=True)
    assert all(0.0 <= i.score <= 1.0 for i in items)
    top = items[0]
    assert top.key == "beagle" and top.memcompile["source"] in ("anchor", "frontier")
    assert top.memcompile["compiled"].startswith("[beagle] Tom | 2024-03-04")
    assert top.value == BEAGLE  # as put: where MemCompile holds it is an attribute of the item
    assert [i.key for i in filled.search(TOM, query=query, offset=1, limit=1)] == [items[1].key]
    assert [i.key for i in filled.search(TOM, query=query, filter={"role": "user"})] == ["nurse"]
    # a prefix spans users: one ranking by score, not namespace by namespace
    spanning = filled.search(("memories",), query="margherita pizza")
    assert spanning[0].key == "pizza" and [i.score for i in spanning] == sorted(
        (i.score for i in spanning), reverse=True
    )
    filled.put(TOM, "note", {"text": "Biscuit the beagle hates baths."}, index=False)
    ranked = filled.search(TOM, query="Biscuit beagle baths")
    assert ranked[-1].key == "note" and ranked[-1].score is None  # `index=False`: never a hit, listed last


def test_search_without_a_query_lists_items_with_filter_limit_offset(filled):
    assert [(i.namespace, i.key) for i in filled.search(("memories",))] == [
        (("memories", "ann"), "pizza"),
        (("memories", "ann", "work"), "job"),
        (TOM, "beagle"),
        (TOM, "nurse"),
    ]
    assert all(i.score is None for i in filled.search(("memories",)))
    assert [i.key for i in filled.search(("memories",), limit=2, offset=1)] == ["job", "beagle"]
    assert [i.key for i in filled.search(("memories",), filter={"speaker": "Tom"})] == ["beagle"]
    assert [i.key for i in filled.search(("memories",), filter={"kind": "job", "years": {"$gt": 5}})] == ["job"]
    assert [i.key for i in filled.search(("memories",), filter={"years": {"$lte": 5}})] == []
    assert [i.key for i in filled.search(("memories",), filter={"role": {"$ne": "user"}})] == ["pizza", "job", "beagle"]
    assert [i.key for i in filled.search(("memories", "ann"))] == ["pizza", "job"]
    assert filled.search(("memories", "bob")) == [] and filled.search(("other",)) == []
    with pytest.raises(ValueError, match="unsupported filter operator"):
        filled.search(("memories",), filter={"speaker": {"$regex": "T.*"}})


def test_list_namespaces_honors_prefix_suffix_max_depth(filled):
    filled.put(("docs", "tom"), "d1", {"text": "A document.", "speaker": "Tom"})
    all_ = [("docs", "tom"), ("memories", "ann"), ("memories", "ann", "work"), TOM]
    assert filled.list_namespaces() == all_
    assert filled.list_namespaces(prefix=("memories",)) == all_[1:]
    assert filled.list_namespaces(suffix=("tom",)) == [("docs", "tom"), TOM]
    assert filled.list_namespaces(prefix=("*", "tom")) == [("docs", "tom"), TOM]
    assert filled.list_namespaces(prefix=("memories",), suffix=("work",)) == [("memories", "ann", "work")]
    assert filled.list_namespaces(max_depth=1) == [("docs",), ("memories",)]
    assert filled.list_namespaces(prefix=("memories",), max_depth=2) == [("memories", "ann"), TOM]
    assert filled.list_namespaces(limit=2, offset=1) == all_[1:3]


async def test_async_methods_and_batches_read_before_their_puts(store):
    await store.aput(TOM, "beagle", BEAGLE)
    assert (await store.aget(TOM, "beagle")).value == BEAGLE
    assert [i.key for i in await store.asearch(TOM, query="What is the beagle called?")] == ["beagle"]
    assert await store.alist_namespaces() == [TOM]
    results = await store.abatch(
        [
            PutOp(TOM, "nurse", NURSE),
            GetOp(TOM, "nurse"),
            PutOp(TOM, "nurse", None),
            GetOp(TOM, "nurse"),
            SearchOp(TOM, limit=5),
        ]
    )
    assert results[0] is None and results[1] is None and results[3] is None  # as InMemoryStore: reads come first
    assert [i.key for i in results[4]] == ["beagle"] and await store.aget(TOM, "nurse") is None
    await store.adelete(TOM, "beagle")
    assert await store.aget(TOM, "beagle") is None


def test_custom_namespace_mapping_reads_memory_other_surfaces_wrote(tmp_path):
    mem = MemCompile(tmp_path / "s", dense=False)
    mem.add_turns([BEAGLE], user_id="tom")  # e.g. the chat agent's remember node
    store = MemCompileStore(mem, namespace_to_user=lambda ns: ns[-1], user_to_namespace=lambda user: ("users", user))
    assert store.get(("users", "tom"), "D1:1").value["text"] == BEAGLE["text"]
    assert store.list_namespaces() == [("users", "tom")]
    assert [i.key for i in store.search(("users",), query="What is the beagle called?")] == ["D1:1"]
    mem.close()


def test_search_calls_no_llm_unless_the_memory_was_built_with_one(tmp_path):
    answer_model = ScriptedChatModel(default="an answer")
    mem = MemCompile(tmp_path / "s", dense=False, answer_llm=answer_model)
    store = MemCompileStore(mem)
    store.put(TOM, "beagle", BEAGLE)
    assert [i.key for i in store.search(TOM, query="What is the beagle called?")] == ["beagle"]
    assert answer_model.calls == []
    mem.close()


def test_bad_input_is_one_clear_error_and_loses_nothing(filled):
    before = filled.search(("memories",))
    for namespace, key, value, error in [
        (("a.b",), "k", BEAGLE, InvalidNamespaceError),
        (("langgraph",), "k", BEAGLE, InvalidNamespaceError),
        ((), "k", BEAGLE, InvalidNamespaceError),
        (("x" * 300,), "k", BEAGLE, InvalidNamespaceError),  # a memory's id holds at most 256 characters
        (TOM, "beagle", {"text": "x", "at": float("nan")}, ValueError),
        (TOM, " spaced ", BEAGLE, ValueError),
    ]:
        with pytest.raises(error):
            filled.put(namespace, key, value)
    with pytest.raises(ValueError, match="JSON object"):
        filled.batch([PutOp(TOM, "nurse", None), PutOp(TOM, "beagle", ["not", "an", "object"])])
    for ttl in (0, -1, float("nan"), "5"):
        with pytest.raises(ValueError, match="ttl must be a positive number of minutes"):
            filled.put(TOM, "beagle", BEAGLE, ttl=ttl)
    assert filled.search(("memories",)) == before  # the batch's delete did not run either


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELDS = ["text", "content", "speaker", "role", "name", "time", "session", "x"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=4), key=st.text(min_size=1, max_size=12))
def test_any_value_is_stored_or_refused_without_harm(store, value, key):
    store.put(TOM, "anchor", BEAGLE)
    anchor = store.get(TOM, "anchor")
    try:
        store.put(TOM, key, value)
    except (ValueError, InvalidNamespaceError):
        stored = None
    else:
        stored = store.get(TOM, key)
        assert stored is not None and stored.key == key
    if key != "anchor":
        assert store.get(TOM, "anchor") == anchor
    if stored is not None:
        store.delete(TOM, key)
        assert store.get(TOM, key) is None


TURN_FIELDS = [*FIELDS, "session_label", "image_caption", "image_query"]
UNSEEN = st.sampled_from(["\u200b", " \n", "\x01", "\u202e"])  # text nothing of which can be shown


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.dictionaries(st.sampled_from(TURN_FIELDS), JSON | UNSEEN, max_size=4))
def test_every_json_object_is_a_value_as_in_the_in_memory_store(store, value):
    # InMemoryStore keeps any JSON object; a field a turn cannot hold ("session": [], "time": {...}, a "text" of
    # invisible characters) stays in the value only
    store.put(TOM, "k", value)
    assert store.get(TOM, "k").value == value
    assert [(i.key, i.value) for i in store.search(TOM)] == [("k", value)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(namespace=st.lists(st.text(max_size=6), max_size=3).map(tuple))
def test_any_namespace_is_a_user_or_refused_without_harm(store, namespace):
    store.put(TOM, "anchor", BEAGLE)
    anchor = store.get(TOM, "anchor")
    try:
        store.put(namespace, "k", {"speaker": "Tom", "text": "A turn."})
    except (InvalidNamespaceError, InvalidUserId):
        assert namespace not in store.list_namespaces()
    else:
        assert store.get(namespace, "k").value["text"] == "A turn." and namespace in store.list_namespaces()
        assert store.memory.users().count(namespace_user(namespace)) == 1
        store.delete(namespace, "k")
    assert store.get(TOM, "anchor") == anchor


def test_the_empty_key_is_a_key_as_in_the_in_memory_store(store):
    from langgraph.store.memory import InMemoryStore

    for s in (InMemoryStore(), store):
        s.put(TOM, "", BEAGLE)
        s.put(TOM, "\u2205x", {**BEAGLE, "text": "I adopted a cat."})  # the escape itself stays a plain key
        assert s.get(TOM, "").key == "" and s.get(TOM, "").value["text"] == BEAGLE["text"]
        assert s.get(TOM, "\u2205x").value["text"] == "I adopted a cat." and s.get(TOM, "x") is None
        assert sorted(i.key for i in s.search(TOM)) == ["", "\u2205x"]
        s.delete(TOM, "")
        assert s.get(TOM, "") is None and s.get(TOM, "\u2205x") is not None


LABEL = st.text(alphabet=st.sampled_from("ab./%25EF\u2205\u00e9e\u0301\u4e2d "), max_size=5) | st.text(max_size=4)
NAMESPACE = st.lists(LABEL, min_size=1, max_size=3).map(tuple)


def _user_or_none(namespace):
    try:
        return validate_user_id(namespace_user(namespace))
    except (InvalidNamespaceError, InvalidUserId):
        return None


@settings(max_examples=400, deadline=None)
@given(a=NAMESPACE, b=NAMESPACE)
def test_distinct_namespaces_are_distinct_users_and_the_mapping_inverts(a, b):
    ua, ub = _user_or_none(a), _user_or_none(b)
    if ua is not None:
        assert user_namespace(ua) == a  # round trip, also after the user id's NFC
        if ub is not None:
            assert (ua == ub) == (a == b)
            # a prefix holds a namespace exactly when its labels lead it: whole labels only
            under = user_namespace(ub)[: len(a)] == a
            assert under == (b[: len(a)] == a)


@settings(max_examples=200, deadline=None)
@given(user=st.text(min_size=1, max_size=12))
def test_every_user_id_is_one_namespace_or_hidden(user):
    namespace = user_namespace(user)
    if namespace is not None:
        assert namespace_user(namespace) == user


def test_a_user_reaches_no_other_users_memory_and_dotted_ids_reach_their_own(store):
    mem = store.memory
    mem.add_turns([{"speaker": "Tom", "text": "My PIN is 4321.", "time": "2024-03-04"}], user_id="tom.smith")
    mem.add_turns([{"speaker": "Tom", "text": "I like tea.", "time": "2024-03-04"}], user_id="tom")
    store.put(("tom", "smith"), "D1:1", {"text": "Written by tom."})  # a namespace below tom's: its own user
    assert [t.packet.text for t in mem.turns("tom.smith")] == ["My PIN is 4321."]
    assert all("4321" not in str(i.value) for i in store.search(("tom",), limit=100))
    assert all("4321" not in str(i.value) for i in store.search(("tom",), query="What is the PIN?", limit=100))
    store.delete(("tom", "smith"), "D1:1")
    assert len(mem.turns("tom.smith")) == 1
    # the user "tom.smith" reaches his own memory under ("tom%2Esmith",)
    assert store.get(("tom%2Esmith",), "D1:1").value["text"] == "My PIN is 4321."
    assert ("tom%2Esmith",) in store.list_namespaces() and ("tom", "smith") not in store.list_namespaces()
