"""Every MCP tool and every BaseStore operation driven with arbitrary JSON arguments and user ids (issue 26): never a
crash (only the clear errors of bad input), never another user's data, never a write to a user the caller was not
given. The MCP tools run in process through the server's own call path, with the caller's token set as the SDK's
auth middleware sets it."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import ValidationError

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore
from memcompile_langgraph.integrations.mcp_server import build_server

TOM_SAYS = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}
ANN_SAYS = {"speaker": "Ann", "text": "My locker code is 4711.", "time": "5 March 2024"}
SECRET = "4711"
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
USER_IDS = st.sampled_from(["tom", "ann", "Tom", "tom ", "t\u00f6m", "to\u0308m", "", "*", "default"]) | st.text(
    max_size=10
)
TURN = st.fixed_dictionaries(
    {"speaker": st.sampled_from(["Tom", "Ann"]) | st.text(max_size=6), "text": st.text(max_size=30)},
    optional={"time": JSON, "dia_id": JSON, "session": JSON},
)
SHAPES = {  # each tool's own arguments (mostly valid, so calls get past validation), then extra keys or anything
    "remember": {"user_id": USER_IDS, "turns": st.lists(TURN, min_size=1, max_size=3) | JSON},
    "recall": {"user_id": USER_IDS, "query": st.sampled_from(["What is the locker code?", "beagle"]) | JSON},
    "forget": {"user_id": USER_IDS},
    "stats": {"user_id": USER_IDS},
}
OPTIONAL = {"recall": {"k": st.integers(-2, 20) | JSON}, "forget": {"dia_ids": st.lists(st.text(max_size=5)) | JSON}}
EXTRA = st.dictionaries(st.sampled_from(["user", "users", "userId", "token"]) | st.text(max_size=8), JSON, max_size=1)


def calls(name: str) -> st.SearchStrategy:
    shaped = st.fixed_dictionaries(SHAPES[name], optional=OPTIONAL.get(name, {}))
    anything = st.dictionaries(st.sampled_from(["user_id", "query", "turns", "k", "dia_ids"]), JSON, max_size=4)
    args = st.one_of(shaped, st.builds(lambda a, b: {**b, **a}, shaped, EXTRA), anything)
    return st.tuples(st.just(name), args)


CALLS = st.one_of([calls(name) for name in SHAPES])
# what bad input may raise: the clear errors of validation, never TypeError, KeyError, RecursionError ...
CLEAR = (ValueError, ValidationError, ToolError, InvalidNamespaceError, NotImplementedError)


def _root(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


@pytest.fixture(scope="module")
def served():
    mem = MemCompile(None, dense=False)
    mem.add_turns([TOM_SAYS], user_id="tom")
    mem.add_turns([ANN_SAYS], user_id="ann")
    yield mem, build_server(mem)
    mem.close()


def _texts(mem: MemCompile, user: str) -> list[str]:
    return [t.packet.text for t in mem.turns(user)]


async def _call(server, grant: str, name: str, args: dict):
    token = auth_context_var.set(AuthenticatedUser(AccessToken(token="", client_id=grant, scopes=[])))
    try:
        return await server.call_tool(name, args)
    finally:
        auth_context_var.reset(token)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=CALLS)
def test_a_tom_token_with_any_arguments_reaches_tom_only(served, call):
    (name, args), (mem, server) = call, served
    ann_before = _texts(mem, "ann")
    try:
        out = asyncio.run(_call(server, "tom", name, args))
    except ToolError as exc:
        assert isinstance(_root(exc), CLEAR), repr(_root(exc))
        out = None
    assert _texts(mem, "ann") == ann_before  # never a write to (or a forget of) a user it was not given
    assert set(mem.users()) <= {"tom", "ann"}
    assert SECRET not in str(out)  # never another user's data
    if not _texts(mem, "tom"):
        mem.add_turns([TOM_SAYS], user_id="tom")  # a permitted forget: put tom back for the next example


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=CALLS)
def test_an_any_user_token_never_crashes_the_server(served, call):
    (name, args), (mem, server) = call, served
    try:
        asyncio.run(_call(server, "*", name, args))
    except ToolError as exc:
        assert isinstance(_root(exc), CLEAR), repr(_root(exc))
    for user in ("tom", "ann"):
        if not _texts(mem, user):
            mem.add_turns([TOM_SAYS if user == "tom" else ANN_SAYS], user_id=user)


# --- BaseStore -------------------------------------------------------------------------------------------------
NAMESPACES = st.sampled_from([("tom",), ("ann",), ("memories", "tom"), ("t\u00f6m",), ("to\u0308m",)]) | st.lists(
    st.text(max_size=6), max_size=3
).map(tuple)
OPS = st.one_of(
    st.tuples(st.just("put"), NAMESPACES, st.text(max_size=6), JSON | TURN),
    st.tuples(st.just("get"), NAMESPACES, st.text(max_size=6)),
    st.tuples(st.just("delete"), NAMESPACES, st.text(max_size=6)),
    st.tuples(
        st.just("search"),
        NAMESPACES,
        st.none() | st.text(max_size=20),
        st.none() | st.dictionaries(st.text(max_size=6), JSON, max_size=2),
        st.integers(-1, 5),
        st.integers(-1, 3),
    ),
    st.tuples(st.just("list_namespaces"), st.none() | NAMESPACES, st.none() | st.integers(-1, 3)),
)


@pytest.fixture(scope="module")
def store():
    mem = MemCompile(None, dense=False)
    s = MemCompileStore(mem)
    s.put(("ann",), "code", ANN_SAYS)
    yield s
    mem.close()


def _run(store: MemCompileStore, op: tuple):
    kind, *rest = op
    if kind == "put":
        namespace, key, value = rest
        return store.put(namespace, key, value)
    if kind == "get":
        return store.get(*rest)
    if kind == "delete":
        return store.delete(*rest)
    if kind == "search":
        namespace, query, filter_, limit, offset = rest
        return store.search(namespace, query=query, filter=filter_, limit=limit, offset=offset)
    prefix, depth = rest
    return store.list_namespaces(prefix=prefix, max_depth=depth)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=OPS)
def test_any_store_operation_touches_its_own_namespace_only(store, op):
    ann_before = store.get(("ann",), "code")
    try:
        out = _run(store, op)
    except CLEAR as exc:
        out = exc
    except Exception as exc:  # noqa: BLE001 - the assertion names what escaped
        pytest.fail(f"{op!r} raised {type(exc).__name__}: {exc}")
    kind, namespace = op[0], tuple(op[1] or ())
    if kind == "get" and out is not None and not isinstance(out, Exception):
        assert tuple(out.namespace) == namespace  # an item of the namespace asked for, never another's
    if kind == "search" and isinstance(out, list):
        assert all(tuple(i.namespace[: len(namespace)]) == namespace for i in out)
    if namespace != ("ann",):
        assert store.get(("ann",), "code") == ann_before  # a write lands in its own namespace only
    else:
        store.put(("ann",), "code", ANN_SAYS)
