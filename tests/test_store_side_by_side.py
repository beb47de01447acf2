"""MemCompileStore beside LangGraph's InMemoryStore: the same operation sequences, sequential and concurrent, the same
items in the same order, except where docs/integrations.md names a difference (listings across namespaces come in
namespace order; a query ranks by MemCompile's scores; list_namespaces shows namespaces that hold items)."""

import tempfile
from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore

NAMESPACES = [("a",), ("a", "b"), ("c",), ("a%2Ex",), ("a%b",), ("c", "x\ny")]
PREFIXES = [("a",), ("a", "b"), ("c",), ("z",)]
VALUE = st.fixed_dictionaries(
    {"kind": st.sampled_from(["vehicle", "pet"]), "n": st.integers(0, 3)},
    optional={
        "text": st.sampled_from(["I drive a green car.", "My beagle is called Biscuit."]),
        "tags": st.lists(st.sampled_from(["x", "y"]), max_size=2),
    },
)
FILTER = st.sampled_from([None, {"kind": "vehicle"}, {"n": {"$gte": 2}}, {"kind": {"$ne": "pet"}, "n": 1}])
OP = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from("kpq"), VALUE, st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from("kpq")),
    st.tuples(st.just("get"), st.sampled_from(NAMESPACES), st.sampled_from("kpq")),
    st.tuples(st.just("list"), st.sampled_from(PREFIXES), FILTER, st.integers(1, 4), st.integers(0, 2)),
    st.tuples(st.just("query"), st.sampled_from(PREFIXES), FILTER),
    st.tuples(st.just("namespaces"), st.sampled_from([None, ("a",), ("*", "b")]), st.sampled_from([None, 1])),
    st.tuples(st.just("batch"), st.sampled_from(NAMESPACES), st.sampled_from("kpq"), VALUE),
    st.tuples(
        st.just("concurrent"),
        st.sampled_from(NAMESPACES),
        st.sampled_from("kpq"),
        st.lists(VALUE, min_size=2, max_size=4),
    ),
)


def _listing(items):
    return [(tuple(i.namespace), i.key, i.value) for i in items]


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
        a, b = ref.get(op[1], op[2]), ours.get(op[1], op[2])
        assert (a and (a.key, a.value)) == (b and (b.key, b.value))
    elif kind == "list":
        _, prefix, filter_, limit, offset = op
        # InMemoryStore lists namespaces in the order they were first used; MemCompileStore in namespace order
        everything = sorted(_listing(ref.search(prefix, filter=filter_, limit=1000)), key=lambda t: t[0])
        assert (
            _listing(ours.search(prefix, filter=filter_, limit=limit, offset=offset))
            == everything[offset : offset + limit]
        )
    elif kind == "query":
        _, prefix, filter_ = op
        found = ours.search(prefix, query="What car do I drive?", filter=filter_, limit=1000)
        expected = _listing(ref.search(prefix, filter=filter_, limit=1000))
        assert sorted(_listing(found), key=repr) == sorted(
            expected, key=repr
        )  # the same set; the order is MemCompile's
        assert all(i.score is None or 0.0 <= i.score <= 1.0 for i in found)
        scored = [i.score for i in found if i.score is not None]
        assert scored == sorted(scored, reverse=True)
    elif kind == "namespaces":
        _, prefix, depth = op
        held = InMemoryStore()  # InMemoryStore also lists namespaces only read or emptied: the ones with items
        for item in ref.search((), limit=1000):
            held.put(tuple(item.namespace), item.key, item.value)
        expected = held.list_namespaces(prefix=prefix, max_depth=depth)
        assert ours.list_namespaces(prefix=prefix, max_depth=depth) == expected
    elif kind == "batch":
        _, ns, key, value = op
        ops = [GetOp(ns, key), PutOp(ns, key, value), GetOp(ns, key), SearchOp(ns[:1], limit=1000)]
        a, b = ref.batch(ops), ours.batch(ops)
        assert [x and (x.key, x.value) for x in a[:3]] == [x and (x.key, x.value) for x in b[:3]]
        assert sorted(_listing(a[3]), key=lambda t: t[0]) == _listing(b[3])
    elif kind == "concurrent":  # puts of one key at once: it ends with one of the values, whole, on both
        _, ns, key, values = op
        for s in (ref, ours):
            with ThreadPoolExecutor(len(values)) as pool:
                list(pool.map(lambda v, s=s: s.put(ns, key, v), values))
        a, b = ref.get(ns, key), ours.get(ns, key)
        assert a.value in values and b.value in values
        if a.value != b.value:  # which put came last differs between the two: make them agree again
            ref.put(ns, key, b.value)


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(OP, min_size=1, max_size=14))
def test_the_same_operations_give_the_same_items_on_both_stores(ops):
    with tempfile.TemporaryDirectory() as tmp:
        mem = MemCompile(tmp, dense=False)  # SQLite records in the temp directory
        try:
            ref, ours = InMemoryStore(), MemCompileStore(mem)
            for op in ops:
                _check(ref, ours, op)
        finally:
            mem.close()
