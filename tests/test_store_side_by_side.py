"""MemCompileStore beside LangGraph's InMemoryStore: the same operation sequences (put, delete, get, search with
filters and pages, a query, list_namespaces with prefixes, suffixes, wildcards, depth and pages, batches and abatches
of mixed operations, concurrent puts of one key), the same items in the same order after every step, except where
docs/integrations.md names a difference (listings across namespaces come in namespace order; a query ranks by
MemCompile's scores; list_namespaces shows namespaces that hold items)."""

import asyncio
import tempfile
from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore

NAMESPACES = [("a",), ("a", "b"), ("c",), ("a%2Ex",), ("a%b",), ("c", "x\ny"), ("a", "b", "c"), ("x", "b")]
PREFIXES = [(), ("a",), ("a", "b"), ("c",), ("z",)]
KEYS = ["k", "p", "q", "", "\u2205p", "K 1"]
TEXT = st.sampled_from(["I drive a green car.", "My beagle is called Biscuit.", "2024-03-04", "2", "", "\u200b"])
SCALAR = st.none() | st.booleans() | st.integers(-3, 3) | TEXT | st.text(max_size=5)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["a", "n", "text"]), inner, max_size=2),
    max_leaves=4,
)
# any JSON object, also under the names of a turn's fields; "n" is always a number, so that InMemoryStore's
# ordered operators ($gt ...) do not raise on it (a difference the docs name)
VALUE = st.fixed_dictionaries(
    {"n": st.integers(0, 3)},
    optional={
        **{f: JSON for f in ("text", "content", "speaker", "role", "time", "session", "session_label", "tags")},
        "kind": st.sampled_from(["vehicle", "pet"]),
    },
)
KIND = st.sampled_from([{"$eq": "vehicle"}, {"$ne": "pet"}, "vehicle", {"$eq": None}])
NUMBER = st.integers(0, 3) | st.dictionaries(
    st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"]), st.integers(0, 3), min_size=1
)
FILTER = st.none() | st.fixed_dictionaries({}, optional={"kind": KIND, "n": NUMBER, "text": TEXT})
PATH = st.sampled_from([None, ("a",), ("*", "b"), ("a", "*"), ("b",), ("*",), ("c", "*", "y")])
OP = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), VALUE, st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("get"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("list"), st.sampled_from(PREFIXES), FILTER, st.integers(0, 4), st.integers(0, 3)),
    st.tuples(st.just("query"), st.sampled_from(PREFIXES), FILTER, st.integers(1, 3)),
    st.tuples(
        st.just("namespaces"),
        PATH,
        PATH,
        st.sampled_from([None, 0, 1, 2]),
        st.integers(0, 4),
        st.integers(0, 2),
    ),
    st.tuples(
        st.just("batch"),
        st.lists(
            st.tuples(
                st.sampled_from(["put", "delete", "get", "list"]), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)
            ),
            min_size=1,
            max_size=5,
        ),
        st.lists(VALUE, min_size=5, max_size=5),
        st.booleans(),
    ),
    st.tuples(
        st.just("concurrent"),
        st.sampled_from(NAMESPACES),
        st.sampled_from(KEYS),
        st.lists(VALUE, min_size=2, max_size=4),
    ),
)


def _listing(items):
    return [(tuple(i.namespace), i.key, i.value) for i in items]


def _by_namespace(items):
    """InMemoryStore's listing in namespace order (it lists namespaces in the order they were first used)."""
    return sorted(_listing(items), key=lambda t: t[0])


def _item(item):
    return item and (tuple(item.namespace), item.key, item.value)


def _batch_ops(specs, values):
    make = {
        "put": lambda ns, key, v: PutOp(ns, key, v),
        "delete": lambda ns, key, v: PutOp(ns, key, None),
        "get": lambda ns, key, v: GetOp(ns, key),
        "list": lambda ns, key, v: SearchOp(ns[:1], limit=1000),
    }
    return [make[kind](ns, key, v) for (kind, ns, key), v in zip(specs, values)]


def _check(ref: InMemoryStore, ours: MemCompileStore, op: tuple) -> None:
    kind = op[0]
    if kind == "put":
        _, ns, key, value, indexed = op
        for s in (ref, ours):
            s.put(ns, key, value, index=None if indexed else False)
    elif kind == "delete":
        for s in (ref, ours):
            s.delete(op[1], op[2])
    elif kind == "get":
        assert _item(ours.get(op[1], op[2])) == _item(ref.get(op[1], op[2]))
    elif kind == "list":
        _, prefix, filter_, limit, offset = op
        everything = _by_namespace(ref.search(prefix, filter=filter_, limit=1000))
        found = ours.search(prefix, filter=filter_, limit=limit, offset=offset)
        assert _listing(found) == everything[offset : offset + limit]
        assert all(i.score is None for i in found)
    elif kind == "query":  # the same items and the same filter; the order and the scores are MemCompile's
        _, prefix, filter_, page = op
        query = "What car do I drive?"
        found = ours.search(prefix, query=query, filter=filter_, limit=1000)
        expected = _listing(ref.search(prefix, filter=filter_, limit=1000))
        assert sorted(_listing(found), key=repr) == sorted(expected, key=repr)
        assert all(i.score is None or 0.0 <= i.score <= 1.0 for i in found)
        scored = [i.score for i in found if i.score is not None]
        assert scored == sorted(scored, reverse=True)
        # pages of the ranking, with limit and offset, are the ranking cut in pieces
        pages = [ours.search(prefix, query=query, filter=filter_, limit=page, offset=o) for o in range(0, 12, page)]
        assert [x for p in pages for x in _listing(p)] == _listing(found)[: len(pages) * page]
    elif kind == "namespaces":
        _, prefix, suffix, depth, limit, offset = op
        held = InMemoryStore()  # InMemoryStore also lists namespaces only read or emptied: the ones with items
        for item in ref.search((), limit=1000):
            held.put(tuple(item.namespace), item.key, item.value)
        options = {"prefix": prefix, "suffix": suffix, "max_depth": depth, "limit": limit, "offset": offset}
        assert ours.list_namespaces(**options) == held.list_namespaces(**options)
    elif kind == "batch":  # reads see the store before the batch's puts; the last put of a key wins
        _, specs, values, in_async = op
        ops = _batch_ops(specs, values)
        a = ref.batch(ops)
        b = asyncio.run(ours.abatch(ops)) if in_async else ours.batch(ops)
        for o, x, y in zip(ops, a, b):
            if isinstance(o, GetOp):
                assert _item(y) == _item(x)
            elif isinstance(o, SearchOp):
                assert _listing(y) == _by_namespace(x)
            else:
                assert y == x
    elif kind == "concurrent":  # puts of one key at once: it ends with one of the values, whole, on both
        _, ns, key, values = op
        for s in (ref, ours):
            with ThreadPoolExecutor(len(values)) as pool:
                list(pool.map(lambda v, s=s: s.put(ns, key, v), values))
        a, b = ref.get(ns, key), ours.get(ns, key)
        assert a.value in values and b.value in values
        if a.value != b.value:  # which put came last differs between the two: make them agree again
            ref.put(ns, key, b.value)
    # after every step both hold the same items, in the same order within a namespace
    assert _listing(ours.search((), limit=1000)) == _by_namespace(ref.search((), limit=1000))


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(OP, min_size=1, max_size=16))
def test_the_same_operations_give_the_same_items_on_both_stores(ops):
    with tempfile.TemporaryDirectory() as tmp:
        mem = MemCompile(tmp, dense=False)  # SQLite records in the temp directory
        try:
            ref, ours = InMemoryStore(), MemCompileStore(mem)
            for op in ops:
                _check(ref, ours, op)
        finally:
            mem.close()
