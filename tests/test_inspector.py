"""The inspector's pages and actions over a real store, through its ASGI app (Starlette's test client, no browser):
what each page shows, that stored text is escaped, who may see and forget what, and the request bounds. The
browser test (test_inspector_browser.py) drives the served command in headless Chromium."""

import html
import html.parser
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient
from support.inspected import DEMO, GOLD, OTHER, QUESTION, filled

from memcompile_langgraph.cli.demo_data import QUESTIONS, demo_turns
from memcompile_langgraph.integrations.inspector.app import COOKIE, MAX_BODY, build_app
from memcompile_langgraph.integrations.mcp_server import transport_security
from memcompile_langgraph.integrations.tokens import Tokens
from memcompile_langgraph.query_graph import STAGES

TOKEN_DEMO, TOKEN_ALL = "demo-token-0123456789abcdef", "admin-token-0123456789abcdef"


def rows(page: str) -> dict[str, dict[str, str]]:
    """The packets table of a query page: dia_id -> each column by its heading, and the row's state."""
    table = re.search(r'<table id="packets">(.*?)</table>', page, re.S).group(1)
    heads = [re.sub("<[^>]+>", "", h) for h in re.findall(r"<th>(.*?)</th>", table)]
    out = {}
    for state, tr in re.findall(r'<tr[^>]*data-why="(\w+)"[^>]*>(.*?)</tr>', table, re.S):
        cells = [html.unescape(re.sub("<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        found = dict(zip(heads, cells))
        out[found["dia_id"]] = {**found, "state": state}
    return out


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)


@pytest.fixture
def demo_store(backend, tmp_path, embeddings):
    """The demo conversation for DEMO and one private turn for OTHER, on SQLite and on PostgreSQL."""
    mem = filled(backend.where(tmp_path / "store"), embeddings)
    yield mem
    mem.close()


def test_users_timeline_and_query_show_the_store(demo_store):
    mem = demo_store
    client = TestClient(build_app(mem))
    users = client.get("/").text
    for user in (DEMO, OTHER):
        c = mem.engine.records.counts(user)
        cells = re.search(rf'user">{user}</a></td>(.*?)</tr>', users).group(1)
        assert re.findall(r'class="num">(\d+)<', cells) == [
            str(c[k]) for k in ("packets", "descriptors", "cells", "sessions")
        ]
    timeline = client.get("/timeline", params={"user": DEMO}).text
    assert re.findall(r"<h2>Session (\d+)", timeline) == ["1", "2", "3"]
    index = mem.index(DEMO)
    assert re.findall(r'data-dia="([^"]+)"', timeline) == [index.packets[p].dia_id for p in index.packet_order]
    claim = index.by_packet[index.packet_order[1]][0]
    assert (
        html.escape(claim.claim) in timeline and f"Cell {index.layout.of_descriptor[claim.descriptor_id]}" in timeline
    )

    question, gold = QUESTION, GOLD
    page = client.get("/query", params={"user": DEMO, "q": question}).text
    table = rows(page)
    compiled = mem.compile(question, user_id=DEMO)
    chosen = sorted((int(r["#"]), d) for d, r in table.items() if r["state"] == "selected")
    assert [d for _, d in chosen] == compiled.dia_ids
    assert table[gold]["state"] == "selected" and table[gold]["#"] == "1"
    assert float(table[gold]["fused"]) == pytest.approx(compiled.packets[0].score, abs=1e-3)
    # each channel's score, as the graph's own stages computed it
    out = mem.query_graph.invoke({"query": question}, context=mem.context(DEMO))
    gold_pid = index.by_dia[gold]
    bm25 = max(s for pos, s in out["bm25"] if index.descriptors[pos].packet_id == gold_pid)
    dense = next(h.similarity for h in out["dense"] if h.packet_id == gold_pid)
    assert float(table[gold]["BM25"]) == pytest.approx(bm25, abs=1e-3)
    assert float(table[gold]["dense"]) == pytest.approx(dense, abs=1e-3)
    assert table[gold]["Cell routing"].split()[1] in {rc.cell_id for rc in out["routing"].opened}
    # the others, each with its reason; the context exactly as compile returns it
    assert len(table) == len(index.packets)
    assert {r["state"] for r in table.values()} <= {"selected", "rank", "frontier", "budget"}
    assert html.escape(compiled.text) in page
    stages = re.findall(r'<tr><td>(\w+)</td><td class="num">', page)
    assert stages == list(STAGES)  # the graph's stage trace, in graph order


def test_each_packet_left_out_says_why(make_mem):
    """A pool budget below the packets reached leaves some out by budget; the rest of those not selected are past
    the anchors (rank) or not admitted by the frontier, each consistent with the graph's own output."""
    from memcompile_langgraph.config import DEFAULT_CONFIG

    mem = make_mem("store", turns=demo_turns(), user_id=DEMO, config=DEFAULT_CONFIG.with_overrides(pool_budget=11))
    question = QUESTIONS[0]
    table = rows(TestClient(build_app(mem)).get("/query", params={"user": DEMO, "q": question}).text)
    index = mem.index(DEMO)
    out = mem.query_graph.invoke({"query": question}, context=mem.context(DEMO))
    dia = lambda pids: {index.packets[p].dia_id for p in pids}  # noqa: E731
    pool, order = dia(p.packet_id for p in out["pool"]), [index.packets[p].dia_id for p in out["frontier_order"]]
    assert {d for d, r in table.items() if r["state"] == "selected"} == dia(out["selected"])
    budget = {d for d, r in table.items() if r["state"] == "budget"}
    assert budget and not budget & pool
    for d, r in table.items():
        if r["state"] == "frontier":
            assert d in order and int(r["frontier rank"]) == order.index(d) + 1 and d not in dia(out["selected"])
        if r["state"] == "rank":
            assert d in pool and d not in dia(out["anchors"])


def test_superseded_statements_are_marked_for_a_question(make_mem):
    turns = [
        {"speaker": "Tom", "text": "Our project board has 8 cards for the sprint.", "time": "2024-03-01"},
        {"speaker": "Ann", "text": "Great, I will review the board tomorrow.", "time": "2024-03-01"},
        {"speaker": "Tom", "text": "Update: the project board now has 10 cards for the sprint.", "time": "2024-03-08"},
    ]
    mem = make_mem("store", turns=turns, user_id="tom", dense=False)
    client = TestClient(build_app(mem))
    assert 'class="mark"' not in client.get("/timeline", params={"user": "tom"}).text
    marked = client.get("/timeline", params={"user": "tom", "about": "How many cards are on the project board?"}).text
    turns_shown = re.findall(r'<div class="turn"[^>]*data-dia="([^"]+)">(.*?)(?=<div class="turn"|<p>)', marked, re.S)
    later = mem.index("tom").packets[mem.index("tom").packet_order[2]].dia_id
    found = {d: re.search(r'<div class="mark">(.*?)</div>', body) for d, body in turns_shown}
    assert [d for d, m in found.items() if m] == [mem.index("tom").packets[mem.index("tom").packet_order[0]].dia_id]
    note = next(m.group(1) for m in found.values() if m)
    assert "superseded" in note and later in note and "10" in note


def test_forget_needs_confirmation_and_the_form_token(demo_store):
    mem = demo_store
    client = TestClient(build_app(mem))
    csrf = csrf_of(client.get("/forget", params={"user": DEMO, "turn": "D1:2"}).text)
    form = {"user": DEMO, "turn": "D1:2", "csrf": csrf}
    assert client.post("/forget", data=form).status_code == 400  # no confirm field
    assert client.post("/forget", data={**form, "confirm": "yes", "csrf": "0" * 64}).status_code == 403
    assert (
        TestClient(build_app(mem)).post("/forget", data={**form, "confirm": "yes"}).status_code == 403
    )  # another run's
    assert [t.packet.dia_id for t in mem.turns(DEMO, ["D1:2"])] == ["D1:2"]
    done = client.post("/forget", data={**form, "confirm": "yes"}, follow_redirects=False)
    assert done.status_code == 303
    after = client.get(done.headers["location"]).text
    assert "Removed 1 turn(s) (D1:2)." in after and 'data-dia="D1:2"' not in after
    assert mem.turns(DEMO, ["D1:2"]) == [] and len(mem.turns(DEMO)) == len(demo_turns()) - 1
    # the whole user
    csrf = csrf_of(client.get("/forget", params={"user": OTHER}).text)
    done = client.post("/forget", data={"user": OTHER, "csrf": csrf, "confirm": "yes"})
    assert OTHER not in mem.users() and f'user">{OTHER}<' not in done.text and DEMO in mem.users()


def test_a_token_bound_to_one_user_sees_and_forgets_only_that_user(demo_store, tmp_path):
    mem = demo_store
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_DEMO} {DEMO}\n{TOKEN_ALL} *\n")
    app = build_app(mem, Tokens.load(tokens))
    anonymous = TestClient(app)
    assert anonymous.get("/", follow_redirects=False).headers["location"] == "/login"
    assert anonymous.get("/timeline", params={"user": OTHER}, follow_redirects=False).status_code == 303
    assert anonymous.post("/login", data={"token": "wrong-token-0123456789"}).status_code == 401

    bound = TestClient(app)
    signed_in = bound.post("/login", data={"token": TOKEN_DEMO}, follow_redirects=False)
    cookie = signed_in.headers["set-cookie"].lower()
    assert signed_in.status_code == 303 and "httponly" in cookie and "samesite=strict" in cookie
    users = bound.get("/").text
    assert f'user">{DEMO}<' in users and OTHER not in users
    for path, params in (("/timeline", {"user": OTHER}), ("/query", {"user": OTHER, "q": "Where is the key?"})):
        page = bound.get(path, params=params)
        assert page.status_code == 403 and "flowerpot" not in page.text
    # a form made for this token, naming the other user
    csrf = csrf_of(bound.get("/forget", params={"user": DEMO, "turn": "D1:1"}).text)
    refused = bound.post("/forget", data={"user": OTHER, "csrf": csrf, "confirm": "yes"})
    assert refused.status_code == 403 and OTHER in mem.users()
    # signing out needs the form token, and then the cookie is gone
    assert bound.post("/logout", data={"csrf": "0" * 64}).status_code == 403
    out = bound.post("/logout", data={"csrf": csrf_of(bound.get("/").text)}, follow_redirects=False)
    assert out.headers["location"] == "/login" and bound.get("/", follow_redirects=False).status_code == 303
    # the header works as the cookie does; the operator's token sees everyone
    assert (
        TestClient(app, headers={"Authorization": f"Basic {TOKEN_ALL}"}).get("/", follow_redirects=False).status_code
        == 303
    )
    header = TestClient(app, headers={"Authorization": f"Bearer {TOKEN_ALL}"})
    assert "flowerpot" in header.get("/timeline", params={"user": OTHER}).text
    assert TestClient(app, cookies={COOKIE: TOKEN_ALL}).get("/").status_code == 401  # a token is no session


def signed_in(app, token: str) -> str:
    """The session cookie a sign-in with the token sets."""
    client = TestClient(app)
    done = client.post("/login", data={"token": token}, follow_redirects=False)
    assert done.status_code == 303
    return client.cookies[COOKIE]


def test_the_cookie_is_a_session_of_its_own_never_the_token(make_mem, tmp_path):
    mem = make_mem("store", turns=demo_turns()[:2], user_id=DEMO, dense=False)
    (tmp_path / "tokens").write_text(f"{TOKEN_DEMO} {DEMO}\n{TOKEN_ALL} *\n")
    app = build_app(mem, Tokens.load(tmp_path / "tokens"))
    client = TestClient(app)
    done = client.post("/login", data={"token": TOKEN_DEMO}, follow_redirects=False)
    cookie, session = done.headers["set-cookie"], client.cookies[COOKIE]
    assert TOKEN_DEMO not in cookie and session != TOKEN_DEMO and len(session) >= 32
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie and "Max-Age=" in cookie
    assert session != signed_in(app, TOKEN_DEMO)  # each sign-in its own
    assert DEMO in client.get("/").text
    for token in (TOKEN_DEMO, TOKEN_ALL):  # a token presented as the cookie is refused, with nothing shown
        refused = TestClient(app, cookies={COOKIE: token}).get("/", params={"user": DEMO})
        assert refused.status_code == 401 and DEMO not in refused.text
        assert TestClient(app, cookies={COOKIE: token}).get("/timeline", params={"user": DEMO}).status_code == 401
    assert (
        TestClient(build_app(mem, Tokens.load(tmp_path / "tokens")), cookies={COOKIE: session}).get("/").status_code
        == 401
    )  # another server (another port, another run) does not know this session
    # a token removed from the tokens file ends its sessions
    operator = signed_in(app, TOKEN_ALL)
    assert TestClient(app, cookies={COOKIE: operator}).get("/").status_code == 200
    (tmp_path / "tokens").write_text(f"{TOKEN_DEMO} {DEMO}\n")
    assert TestClient(app, cookies={COOKIE: operator}).get("/").status_code == 401
    # sign-out ends the session on the server: the cookie, kept and sent again, opens nothing
    client.post("/logout", data={"csrf": csrf_of(client.get("/").text)}).raise_for_status()
    assert TestClient(app, cookies={COOKIE: session}).get("/timeline", params={"user": DEMO}).status_code == 401


def test_a_session_ends_when_it_expires(make_mem, tmp_path):
    import time

    mem = make_mem("store", turns=demo_turns()[:2], user_id=DEMO, dense=False)
    (tmp_path / "tokens").write_text(f"{TOKEN_DEMO} {DEMO}\n")
    app = build_app(mem, Tokens.load(tmp_path / "tokens"), session_seconds=1)
    session = signed_in(app, TOKEN_DEMO)
    assert TestClient(app, cookies={COOKIE: session}).get("/").status_code == 200
    time.sleep(1.2)
    expired = TestClient(app, cookies={COOKIE: session}).get("/")
    assert expired.status_code == 401 and "session has ended" in expired.text


def test_host_origin_and_body_size_are_bounded(make_mem):
    mem = make_mem("store", turns=demo_turns()[:2], user_id=DEMO, dense=False)
    client = TestClient(
        build_app(mem, security=transport_security("127.0.0.1", 8123)), base_url="http://127.0.0.1:8123"
    )
    assert client.get("/").status_code == 200
    assert client.get("/", headers={"Host": "attacker.example:8123"}).status_code == 421  # DNS rebinding
    csrf = csrf_of(client.get("/forget", params={"user": DEMO, "turn": "D1:1"}).text)
    form = {"user": DEMO, "turn": "D1:1", "csrf": csrf, "confirm": "yes"}
    assert client.post("/forget", data=form, headers={"Origin": "http://attacker.example"}).status_code == 403
    assert client.post("/forget", data={**form, "pad": "x" * MAX_BODY}).status_code == 413
    assert len(mem.turns(DEMO)) == 2
    policy = client.get("/").headers["content-security-policy"]
    assert policy.startswith("default-src 'none'") and "script-src" not in policy


PAYLOADS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg onload=alert(1)>",
    "</div></td></table><iframe src=javascript:alert(1)>",
    "<!-- ",
    "&lt;b&gt;",
    "javascript:alert(1)",
    '" autofocus onfocus="alert(1)',
    "<a href='//evil'>x</a>",
    "<style>body{display:none}</style>",
]
hostile = st.lists(st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=12)), min_size=1, max_size=4).map("".join)
# the tags and attributes the pages themselves use: anything else would have come from stored text
TAGS = {"html", "head", "meta", "title", "link", "body", "header", "strong", "a", "span", "main", "h1", "h2", "h3"}
TAGS |= {"p", "table", "tr", "th", "td", "div", "ul", "li", "form", "input", "button", "pre", "label"}
ATTRS = {"charset", "name", "content", "rel", "href", "class", "id", "type", "value", "placeholder", "maxlength"}
ATTRS |= {"required", "method", "action", "min", "style", "data-dia", "data-why", "lang", "autocomplete"}


class Elements(html.parser.HTMLParser):
    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.text = set(), [], []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        raise AssertionError(f"a comment in the page: {data!r}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(speaker=hostile, text=hostile, dia=hostile, user=hostile)
def test_stored_html_and_script_render_as_text(make_mem, speaker, text, dia, user):
    from memcompile_langgraph.users import InvalidUserId, validate_user_id

    try:
        user = validate_user_id(user)
    except InvalidUserId:
        user = "u"
    mem = make_mem(dense=False)
    turn = {"speaker": speaker, "text": text, "dia_id": dia, "time": "2024-01-01"}
    if not mem.add_turns([turn], user_id=user)["stored"]:
        return  # refused input (no usable text or speaker): counted, nothing to show
    stored = mem.turns(user)[0].packet
    client = TestClient(build_app(mem))
    pages = [
        client.get("/").text,
        client.get("/timeline", params={"user": user}).text,
        client.get("/query", params={"user": user, "q": text}).text,
        client.get("/forget", params={"user": user, "turn": stored.dia_id}).text,
    ]
    for page in pages:
        parsed = Elements(page)
        assert parsed.tags <= TAGS
        assert {name for name, _ in parsed.attrs} <= ATTRS
        assert all(value.startswith("/") for name, value in parsed.attrs if name in ("href", "action"))  # this server's
    shown = "".join(Elements(pages[1]).text)
    assert stored.text in shown and stored.speaker in shown and stored.dia_id in shown and user in shown


CLI = [sys.executable, "-m", "memcompile_langgraph"]


def test_the_command_refuses_what_it_cannot_serve_in_one_line(tmp_path):
    from memcompile_langgraph import MemCompile

    store = tmp_path / "store"
    MemCompile(store, dense=False).close()
    cases = [
        (["inspect", "--store", str(tmp_path / "missing")], "no store at"),
        (["inspect", "--store", str(store), "--host", "0.0.0.0"], "refusing to serve every user's memory on 0.0.0.0 "),
        (["inspect", "--store", str(store), "--tokens", str(tmp_path / "none")], "tokens file"),
    ]
    for args, said in cases:
        run = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
        assert run.returncode == 2 and said in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_users_and_turns_come_in_pages(make_mem, monkeypatch):
    from memcompile_langgraph.integrations.inspector import pages

    monkeypatch.setattr(pages, "PAGE", 2)
    mem = make_mem("store", turns=demo_turns()[:3], user_id="a", dense=False)
    for user in ("b", "c"):
        mem.add_turns(demo_turns()[:1], user_id=user)
    client = TestClient(build_app(mem))
    first = client.get("/").text
    assert re.findall(r'class="user">(\w)<', first) == ["a", "b"] and 'href="/?offset=2"' in first
    assert re.findall(r'class="user">(\w)<', client.get("/?offset=2").text) == ["c"]
    turns = client.get("/timeline", params={"user": "a"}).text
    assert re.findall(r'data-dia="([^"]+)"', turns) == ["D1:1", "D1:2"] and "offset=2" in turns
    assert re.findall(r'data-dia="([^"]+)"', client.get("/timeline", params={"user": "a", "offset": 2}).text) == [
        "D1:3"
    ]


def test_a_user_with_nothing_stored_and_bad_parameters_get_a_page_that_says_so(make_mem):
    client = TestClient(build_app(make_mem(dense=False)))
    start = client.get("/query", params={"user": "nobody"})
    assert start.status_code == 200 and '<form method="get" action="/query"' in start.text
    assert "nothing is stored for user_id 'nobody'" in html.unescape(client.get("/query?user=nobody&q=dog").text)
    for path, status, said in (
        ("/query?user=&q=x", 400, "user id must not be empty"),
        ("/timeline?user=x&offset=-1", 400, "offset must be a whole number"),
        ("/query?user=x&q=a&max_tokens=0", 400, "max_tokens must be a positive integer"),
        ("/query?user=x&q=" + "a" * 2001, 400, "longer than 2000 characters"),
    ):
        page = client.get(path)
        assert page.status_code == status and said in html.unescape(page.text)


def test_a_tight_budget_says_which_selected_turns_it_cut_or_left_out(make_mem):
    """The context budget spends tokens on the lines most likely to answer: turns are cut or left out; the page says
    which, as the compiled context's packets do."""
    from memcompile_langgraph.integrations.inspector.explain import explain

    mem = make_mem("store", turns=demo_turns(), user_id=DEMO)
    # the tightest budget that both cuts a shown packet short and leaves packets out (where it falls depends on
    # the ranking, so it is searched for)
    budget, compiled = next(
        (t, c)
        for t in range(60, 600, 10)
        if "cut short" in (c := mem.compile(QUESTION, user_id=DEMO, max_tokens=t)).text and "left out" in c.text
    )
    shown = explain(mem, DEMO, QUESTION, max_tokens=budget)
    selected = sorted((r for r in shown.rows if r.selected_rank), key=lambda r: r.selected_rank)
    kept = [r for r in selected if not r.left_out]
    assert shown.context == compiled.text and kept and len(kept) < len(selected)
    assert all(r.left_out for r in selected[len(kept) :]) and "left out of the context" in selected[-1].detail
    assert [not r.left_out for r in selected] == [p.shown for p in compiled.packets]
    headers = [block.split("\n")[0] for block in compiled.text.split("\n\n")[: len(kept)]]
    assert all(h.startswith(f"[{r.packet.dia_id}]") for h, r in zip(headers, kept))
    assert any(r.cut for r in kept) and all(("lines cut" in r.detail) == r.cut for r in kept)
    assert kept[0].packet.dia_id == GOLD and GOLD in compiled.text
