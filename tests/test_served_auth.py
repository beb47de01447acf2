"""Served graphs with LangGraph custom auth (issue 26): a real `langgraph dev` with the example handler graphs/auth.py
(graphs/langgraph.auth.json). The memory user of every run is the authenticated one, never a client field."""

import json
from pathlib import Path

import httpx
import pytest
from support.paths import ROOT
from support.servers import langgraph_dev

from memcompile_langgraph import MemCompile

pytestmark = pytest.mark.slow

TOM, ANN = "tom-token-0123456789abcdef", "ann-token-0123456789abcdef"
SMITH = "smith-token-0123456789abcdef"  # the user "tom.smith": another person, not a namespace below tom
BEAGLE = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("served-auth")
    (tmp / "tokens").write_text(f"{TOM} tom\n{ANN} ann\n{SMITH} tom.smith\n")
    with langgraph_dev(tmp, "langgraph.auth.json", {"MEMCOMPILE_AUTH_TOKENS": str(tmp / "tokens")}) as base:
        yield base, tmp / "store"


def client(base: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base, headers=headers, timeout=300)


def run(c: httpx.Client, graph: str, payload: dict, **context) -> httpx.Response:
    return c.post("/runs/wait", json={"assistant_id": graph, "input": payload, "context": context})


def test_the_authenticated_user_is_the_memory_user(server):
    base, store = server
    with client(base, None) as anonymous, client(base, "not-a-token-0123456789") as forged:
        assert run(anonymous, "memcompile_query", {"query": "beagle"}, user_id="tom").status_code == 401
        assert run(forged, "memcompile_query", {"query": "beagle"}, user_id="tom").status_code == 401
    with client(base, TOM) as tom, client(base, ANN) as ann:
        stored = run(tom, "memcompile_ingest", {"turns": [BEAGLE]})  # no user_id: the token says whose
        assert len(stored.raise_for_status().json()["packets"]) == 1
        # ann cannot write into, nor read, tom's memory by naming him
        refused = run(ann, "memcompile_ingest", {"turns": [{**BEAGLE, "text": "I hate dogs."}]}, user_id="tom")
        assert "may not name another" in refused.text
        assert "may not name another" in run(ann, "memcompile_query", {"query": "beagle"}, user_id="tom").text
        chat = {"messages": [{"role": "user", "content": "What is my beagle called?"}]}
        messages = run(tom, "memcompile_chat", chat).raise_for_status().json()["messages"]
        assert "Biscuit" in messages[-1]["content"]
        messages = run(ann, "memcompile_chat", chat).raise_for_status().json()["messages"]
        assert "Biscuit" not in str(messages)
        # the store: the caller's own namespace only
        assert ann.get("/store/items", params={"namespace": "tom", "key": "D1:1"}).status_code == 403
        item = tom.get("/store/items", params={"namespace": "tom", "key": "D1:1"}).raise_for_status().json()
        assert item["value"]["text"] == BEAGLE["text"]
        assert ann.post("/threads/search", json={}).raise_for_status().json() == []  # tom's chat thread is his
    mem = MemCompile(store, dense=False)
    try:
        toms = [t.packet.text for t in mem.turns("tom")]
        assert toms[0] == BEAGLE["text"] and "What is my beagle called?" in toms and "I hate dogs." not in toms
        assert mem.turns("ann", limit=5) and all("Biscuit" not in t.packet.text for t in mem.turns("ann"))
    finally:
        mem.close()


STUDIO = {"x-auth-scheme": "langsmith"}  # what LangGraph Studio sends: langgraph-api takes it as a Studio session
OPERATOR_CONFIG = "langgraph.operator.json"  # an operator's own config: the example handler, Studio auth left on


@pytest.fixture(scope="module", params=["langgraph.auth.json", OPERATOR_CONFIG])
def studio_server(request, tmp_path_factory):
    """The shipped auth config, and one that names only the handler (langgraph-api then lets a Studio header in
    with no token check at all): a Studio header reaches no memory on either."""
    tmp = tmp_path_factory.mktemp("studio-auth")
    (tmp / "tokens").write_text(f"{TOM} tom\n{ANN} ann\n")
    shipped = json.loads((ROOT / "graphs" / "langgraph.auth.json").read_text())
    (tmp / OPERATOR_CONFIG).write_text(json.dumps({**shipped, "auth": {"path": shipped["auth"]["path"]}}))
    with langgraph_dev(tmp, request.param, {"MEMCOMPILE_AUTH_TOKENS": str(tmp / "tokens")}) as base:
        yield request.param, base, tmp / "store"


def test_a_studio_header_reaches_no_users_memory_without_a_token(studio_server):
    config, base, store = studio_server
    with client(base, TOM) as tom:
        run(tom, "memcompile_ingest", {"turns": [BEAGLE]}).raise_for_status()
    chat = {"messages": [{"role": "user", "content": "Studio asks: what is the beagle called?"}]}
    with client(base, None) as studio:
        studio.headers.update(STUDIO)
        answers = [
            run(studio, "memcompile_query", {"query": "What is the beagle called?"}, user_id="tom"),
            run(studio, "memcompile_chat", chat, user_id="tom"),
            studio.get("/store/items", params={"namespace": "tom", "key": "D1:1"}),
            studio.post("/store/items/search", json={"namespace_prefix": ["tom"]}),
            studio.post("/store/items/search", json={"namespace_prefix": []}),
            studio.post("/threads/search", json={}),
        ]
        assert all("Biscuit" not in a.text for a in answers), [a.text[:300] for a in answers]
        run(studio, "memcompile_ingest", {"turns": [{**BEAGLE, "text": "Studio wrote this."}]}, user_id="tom")
        put = {"namespace": ["tom"], "key": "studio", "value": {"speaker": "Tom", "text": "Studio put this."}}
        studio.put("/store/items", json=put)
        run(studio, "memcompile_ingest", {"turns": [{**BEAGLE, "text": "Studio wrote for itself."}]})
    with client(base, TOM) as tom, client(base, ANN) as ann:
        tom.headers.update(STUDIO)
        toms = run(tom, "memcompile_query", {"query": "What is the beagle called?"})
        if config == OPERATOR_CONFIG:  # langgraph-api ignores the token beside a Studio header: no memory at all
            assert "Biscuit" not in toms.text
        else:  # the shipped config checks the token: tom's own memory, and only his
            assert "Biscuit" in toms.raise_for_status().json()["context"]
            refused = run(tom, "memcompile_query", {"query": "beagle"}, user_id="ann")
            assert "may not name another" in refused.text
        assert run(ann, "memcompile_query", {"query": "Studio wrote put"}).raise_for_status().json()["context"] == ""
    mem = MemCompile(store, dense=False)
    try:
        written = [t.packet.text for user in mem.users() for t in mem.turns(user)]
        assert BEAGLE["text"] in written and not [text for text in written if "Studio" in text], written
    finally:
        mem.close()


@pytest.fixture
def served(tmp_path, monkeypatch):
    from memcompile_langgraph.served import served_memory

    monkeypatch.setenv("MEMCOMPILE_STORE", str(tmp_path / "store"))
    served_memory.cache_clear()
    yield served_memory()
    served_memory().close()
    served_memory.cache_clear()


def test_served_runs_normalize_the_user_id_as_the_api_does(served):
    from memcompile_langgraph.served import served_ingest_graph

    ingest_graph = served_ingest_graph()
    ingest_graph.invoke({"turns": [BEAGLE]}, context={"user_id": "Zoe\u0301"})  # decomposed, as a client may send it
    assert [t.packet.text for t in served.turns("Zo\u00e9")] == [BEAGLE["text"]]  # the API's (NFC) user
    served.forget("Zoe\u0301")
    assert served.turns("Zo\u00e9") == [] and served.users() == []


def test_served_runs_take_the_user_from_the_servers_auth_and_never_default(served):
    from memcompile_langgraph.served import served_ingest_graph
    from memcompile_langgraph.users import InvalidUserId, MissingUserId

    ingest_graph = served_ingest_graph()

    as_tom = {"configurable": {"langgraph_auth_user": {"identity": "tom", "is_authenticated": True}}}
    ingest_graph.invoke({"turns": [BEAGLE]}, as_tom, context={})
    with pytest.raises(InvalidUserId, match="may not name another"):
        ingest_graph.invoke({"turns": [{**BEAGLE, "text": "I hate dogs."}]}, as_tom, context={"user_id": "ann"})
    with pytest.raises(MissingUserId, match="needs a user_id"):
        ingest_graph.invoke({"turns": [BEAGLE]}, context={})
    assert served.users() == ["tom"] and len(served.turns("tom")) == 1


def test_a_studio_session_reaches_no_memory_unless_the_operator_names_its_user(served, monkeypatch):
    from memcompile_langgraph.served import served_ingest_graph
    from memcompile_langgraph.users import InvalidUserId

    ingest_graph = served_ingest_graph()

    studio = {"configurable": {"langgraph_auth_user": {"kind": "StudioUser", "identity": "dev"}}}
    with pytest.raises(InvalidUserId, match="names no user of this memory"):  # nor may it pick one
        ingest_graph.invoke({"turns": [BEAGLE]}, studio, context={"user_id": "ann"})
    monkeypatch.setenv("MEMCOMPILE_STUDIO_USER", "ann")  # the operator lets Studio act as ann
    ingest_graph.invoke({"turns": [BEAGLE]}, studio, context={})
    assert served.users() == ["ann"]


def test_the_package_graphs_given_no_memory_say_so_and_open_none(served):
    """Only the served graphs open the served memory: a run of the package's graphs names its memory."""
    from memcompile_langgraph.query_graph import query_graph

    with pytest.raises(ValueError, match="has no memory"):
        query_graph.invoke({"query": "What is the beagle called?"}, context={"user_id": "tom"})
    assert served.users() == []


def test_a_served_recall_for_an_unknown_user_says_nothing_is_stored(served):
    from memcompile_langgraph.served import served_query_graph

    query_graph = served_query_graph()
    out = query_graph.invoke({"query": "What is the beagle called?"}, context={"user_id": "nobody"})
    assert out["context"] == "" and out["note"] == "nothing is stored for user_id 'nobody'"
    served.add_turns([BEAGLE], user_id="tom")
    assert "note" not in query_graph.invoke({"query": "What is the beagle called?"}, context={"user_id": "tom"})


def test_tom_never_reaches_the_memory_of_the_user_tom_smith(server):
    base, _ = server
    with client(base, SMITH) as smith, client(base, TOM) as tom:
        # the secret holds letters no hex id has: a random packet id can hold "4711", and the output lists ids
        run(smith, "memcompile_ingest", {"turns": [{**BEAGLE, "text": "My PIN is quartz-4711."}]}).raise_for_status()
        own = smith.post("/store/items/search", json={"namespace_prefix": ["tom%2Esmith"]}).raise_for_status().json()
        assert [i["value"]["text"] for i in own["items"]] == ["My PIN is quartz-4711."]  # his own memory, reachable
        for namespace in (["tom", "smith"], ["tom%2Esmith"]):
            got = tom.get("/store/items", params={"namespace": ".".join(namespace), "key": "D1:1"})
            assert got.status_code == 403
        listed = tom.post("/store/items/search", json={"namespace_prefix": ["tom"]}).raise_for_status().json()
        assert "quartz" not in str(listed)
        assert "quartz" not in run(tom, "memcompile_query", {"query": "What is my PIN?"}).text


def test_a_studio_user_names_no_memory_user_unless_the_operator_chose_one(tmp_path):
    """A config that leaves Studio's sign-in on (as LangGraph's own default does): a Studio run may not pick the
    user; it acts as MEMCOMPILE_STUDIO_USER where the operator set one."""
    config = json.loads((Path(__file__).parents[1] / "graphs" / "langgraph.auth.json").read_text())
    del config["auth"]["disable_studio_auth"]
    (tmp_path / "studio.json").write_text(json.dumps(config))
    (tmp_path / "tokens").write_text(f"{TOM} tom\n")
    env = {"MEMCOMPILE_AUTH_TOKENS": str(tmp_path / "tokens")}
    with langgraph_dev(tmp_path, "./studio.json", env) as base:
        with client(base, TOM) as tom:
            run(tom, "memcompile_ingest", {"turns": [BEAGLE]}).raise_for_status()
        with httpx.Client(base_url=base, headers=STUDIO, timeout=300) as studio:
            for graph, payload in (
                ("memcompile_query", {"query": "beagle"}),
                ("memcompile_ingest", {"turns": [BEAGLE]}),
            ):
                answer = run(studio, graph, payload, user_id="tom")
                assert "names no user of this memory" in answer.text and "Biscuit" not in answer.text
    mem = MemCompile(tmp_path / "store", dense=False)
    try:
        assert [t.packet.text for t in mem.turns("tom")] == [BEAGLE["text"]]  # the Studio write stored nothing
    finally:
        mem.close()
    sub = tmp_path / "chosen"
    sub.mkdir()
    (sub / "studio.json").write_text(json.dumps(config))
    with langgraph_dev(sub, "./studio.json", {**env, "MEMCOMPILE_STUDIO_USER": "studio-demo"}) as base:
        with httpx.Client(base_url=base, headers=STUDIO, timeout=300) as studio:
            assert "may not name another" in run(studio, "memcompile_query", {"query": "beagle"}, user_id="tom").text
            assert run(studio, "memcompile_ingest", {"turns": [BEAGLE]}).raise_for_status().json()["packets"]
    mem = MemCompile(sub / "store", dense=False)
    try:
        assert [t.packet.text for t in mem.turns("studio-demo")] == [BEAGLE["text"]] and mem.users() == ["studio-demo"]
    finally:
        mem.close()


def chat_assistant(c: httpx.Client) -> dict:
    found = c.post("/assistants/search", json={"graph_id": "memcompile_chat"}).raise_for_status().json()
    return next(a for a in found if a["metadata"].get("created_by") == "system")


def test_shared_assistants_are_read_by_all_and_changed_by_none_but_their_owner(server):
    base, store = server
    with client(base, TOM) as tom, client(base, ANN) as ann:
        shared = chat_assistant(ann)  # readable by every signed-in user
        path = f"/assistants/{shared['assistant_id']}"
        spoof = {"context": {"user_name": "Mallory", "assistant_name": "Tom"}}
        assert ann.patch(path, json=spoof).status_code in (403, 404)
        assert ann.patch(path, json={"name": "renamed"}).status_code in (403, 404)  # nobody changes the graphs' own
        assert ann.delete(path).status_code in (403, 404)
        assert tom.get(path).raise_for_status().json()["context"] == shared["context"]
        # an assistant of one's own: no identity in it; only its creator changes or deletes it
        refused = ann.post("/assistants", json={"graph_id": "memcompile_chat", "context": {"user_name": "Tom"}})
        assert refused.status_code == 403 and "user_name" in refused.text
        config = {"configurable": {"user_id": "tom"}}
        assert ann.post("/assistants", json={"graph_id": "memcompile_chat", "config": config}).status_code == 403
        # nor passes for one of the graphs' own, which clients find by LangGraph's created_by mark
        look_alike = {"graph_id": "memcompile_chat", "name": "memcompile_chat", "metadata": {"created_by": "system"}}
        assert ann.post("/assistants", json=look_alike).status_code == 403
        own = ann.post("/assistants", json={"graph_id": "memcompile_chat", "name": "ann's"}).raise_for_status().json()
        assert (
            ann.patch(f"/assistants/{own['assistant_id']}", json={"metadata": {"created_by": "system"}}).status_code
            == 403
        )
        mine = f"/assistants/{own['assistant_id']}"
        assert tom.get(mine).raise_for_status().json()["name"] == "ann's"
        assert tom.patch(mine, json={"name": "tom's now"}).status_code in (403, 404)
        assert tom.delete(mine).status_code in (403, 404)
        assert ann.patch(mine, json={"context": {"assistant_name": "Tom"}}).status_code == 403
        assert ann.patch(mine, json={"name": "still ann's", "metadata": {"owner": "tom"}}).raise_for_status()
        assert tom.patch(mine, json={"name": "tom's now"}).status_code in (403, 404)  # ownership is not handed over
        # tom's turns are stored as tom's, whatever ann did
        chat = {"messages": [{"role": "user", "content": "I planted three apple trees."}]}
        tom.post("/runs/wait", json={"assistant_id": "memcompile_chat", "input": chat}).raise_for_status()
        ann.delete(mine).raise_for_status()
        assert ann.get(mine).status_code == 404
    mem = MemCompile(store, dense=False)
    try:
        said = {t.packet.text: t.packet.speaker for t in mem.turns("tom")}
        assert said["I planted three apple trees."] == "tom"
        assert {speaker for speaker in said.values()} <= {"tom", "Tom", "Assistant"}
    finally:
        mem.close()


def test_crons_are_their_owners_and_no_resource_is_left_without_a_rule(server):
    base, _ = server
    with client(base, TOM) as tom, client(base, ANN) as ann:
        made = tom.post(
            "/runs/crons",
            json={"assistant_id": "memcompile_query", "schedule": "0 0 1 1 *", "input": {"query": "beagle"}},
        )
        cron = made.raise_for_status().json()["cron_id"]
        assert [c["cron_id"] for c in tom.post("/runs/crons/search", json={}).raise_for_status().json()] == [cron]
        assert ann.post("/runs/crons/search", json={}).raise_for_status().json() == []
        assert ann.delete(f"/runs/crons/{cron}").status_code in (403, 404)
        assert [c["cron_id"] for c in tom.post("/runs/crons/search", json={}).json()] == [cron]
        tom.delete(f"/runs/crons/{cron}").raise_for_status()


def test_every_resource_langgraph_auth_names_has_a_rule(monkeypatch, tmp_path):
    """The handler module: each resource and action of LangGraph's AuthContext reaches a rule of its own, and one it
    does not name is refused."""
    import asyncio
    import importlib.util
    import typing

    from langgraph_sdk import Auth

    (tmp_path / "tokens").write_text(f"{TOM} tom\n")
    monkeypatch.setenv("MEMCOMPILE_AUTH_TOKENS", str(tmp_path / "tokens"))
    spec = importlib.util.spec_from_file_location("served_auth_example", ROOT / "graphs" / "auth.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handlers = module.auth._handlers
    hints = typing.get_type_hints(Auth.types.AuthContext)
    for resource in typing.get_args(hints["resource"]):
        named = resource in {r for r, _ in handlers}
        assert named or resource == "runs", resource  # LangGraph authorizes runs as their thread's
    user = Auth.types.MinimalUserDict(identity="tom")  # type: ignore[call-arg]
    unnamed = Auth.types.AuthContext(user=user, permissions=[], resource="runs", action="read")
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        asyncio.run(module.auth._global_handlers[-1](ctx=unnamed, value={}))
    assert refused.value.status_code == 403
