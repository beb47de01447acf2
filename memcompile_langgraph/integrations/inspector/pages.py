"""The inspector's pages, rendered on the server. Stored text is untrusted: every value reaches the page through
el(), which escapes whatever is not markup el() built itself, in text and attributes alike; the pages carry no
script at all (and the server's Content-Security-Policy allows none)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from urllib.parse import urlencode

from .explain import Explanation, Row, Timeline, when

PAGE = 200  # users or turns per page

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
header{background:#1d3557;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center}
header a{color:#fff}form.logout{margin:0}header .who{margin-left:auto;font-size:.9em;opacity:.85}
main{padding:1em 1.4em;max-width:1400px}
h1{font-size:1.35em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:1.4em 0 .4em}h3{font-size:1em;margin:1em 0 .3em}
table{border-collapse:collapse;background:#fff;margin:.3em 0 1em}
th,td{border:1px solid #d5d9e0;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eef1f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.selected td{background:#e7f6e9}tr.selected td.why{color:#17692a;font-weight:600}
.claims{margin:.2em 0 0 1em;padding:0;color:#3b4654}.claims li{list-style:square}
.cell{color:#6a5acd;font-size:.85em}.mark{color:#b3261e;font-weight:600}
.turn{background:#fff;border:1px solid #d5d9e0;border-radius:4px;padding:.5em .7em;margin:.35em 0}
.turn .head{font-weight:600}.turn .head .dia{font-family:monospace;margin-right:.5em}
pre{background:#fff;border:1px solid #d5d9e0;padding:.7em;white-space:pre-wrap;word-break:break-word}
input[type=text]{width:32em;padding:.3em}input.budget{width:7em}button{padding:.3em .8em}
.note{background:#fff7d6;border:1px solid #e8d48b;padding:.5em .8em;border-radius:4px}
.danger{background:#fdecea;border:1px solid #e6a29c;padding:.6em .9em;border-radius:4px}
.muted{color:#6b7684}td.detail{min-width:15em}
"""


class Html(str):
    """Markup built by el(): inserted as is; any other str is escaped."""


def text(value: object) -> Html:
    return Html(html.escape("" if value is None else str(value), quote=True))


def el(tag: str, *children: object, **attrs: object) -> Html:
    """<tag attrs>children</tag>; attribute names take a trailing _ off (class_), False/None leave one out."""
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{text(value)}"')
    inner = "".join(c if isinstance(c, Html) else text(c) for c in _flat(children))
    return Html(f"<{' '.join(parts)}>" + ("" if tag in ("input", "meta", "link", "img") else f"{inner}</{tag}>"))


def _flat(children: Iterable[object]) -> Iterable[object]:
    for c in children:
        if isinstance(c, (list, tuple)) or (hasattr(c, "__next__") and not isinstance(c, str)):
            yield from _flat(c)  # type: ignore[arg-type]
        elif c is not None:
            yield c


def href(path: str, **params: object) -> str:
    given = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{path}?{urlencode(given)}" if given else path


def fmt(value: float | int | None) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def num(value: float | int | None) -> Html:
    return el("td", fmt(value), class_="num muted" if value is None else "num")


def layout(title: str, body: object, who: str = "", signout: str = "") -> Html:
    """The page around a body; `signout`: the caller's form token, for the sign-out button (signed-in callers)."""
    nav = [el("a", "Users", href="/")]
    if who:
        nav.append(el("span", who, class_="who"))
    if signout:
        button = el("button", "Sign out", type="submit", id="logout")
        nav.append(el("form", hidden(csrf=signout), button, method="post", action="/logout", class_="logout"))
    return Html(
        "<!DOCTYPE html>"
        + el(
            "html",
            el(
                "head",
                el("meta", charset="utf-8"),
                el("meta", name="viewport", content="width=device-width, initial-scale=1"),
                el("title", f"{title} · memcompile inspector"),
                el("link", rel="stylesheet", href="/style.css"),
            ),
            el("body", el("header", el("strong", "memcompile inspector"), nav), el("main", body)),
            lang="en",
        )
    )


def hidden(**fields: object) -> list[Html]:
    return [el("input", type="hidden", name=k, value=v) for k, v in fields.items()]


def users_page(counts: list[tuple[str, dict[str, int]]], forgot: str = "", offset: int = 0, total: int = 0) -> Html:
    rows = [
        el(
            "tr",
            el("td", el("a", user, href=href("/timeline", user=user), class_="user")),
            [num(c[k]) for k in ("packets", "descriptors", "cells", "sessions")],
            el(
                "td",
                el("a", "query", href=href("/query", user=user)),
                " · ",
                el("a", "forget…", href=href("/forget", user=user)),
            ),
        )
        for user, c in counts
    ]
    head = el("tr", [el("th", h) for h in ("user", "turns", "claims", "Cells", "sessions", "")])
    body = [el("h1", "Users")]
    if forgot:
        body.append(el("p", f"Forgot everything stored for user {forgot!r}.", class_="note"))
    body.append(el("table", head, rows, id="users") if rows else el("p", "Nothing is stored yet.", class_="muted"))
    pages = []
    if offset > 0:
        pages.append(el("a", "← earlier", href=href("/", offset=max(0, offset - PAGE))))
    if offset + len(counts) < total:
        pages.append(el("a", "later →", href=href("/", offset=offset + len(counts))))
    body.append(el("p", *pages))
    return Html("".join(body))


def query_form(user: str, query: str = "", max_tokens: int | None = None) -> Html:
    return el(
        "form",
        hidden(user=user),
        el("input", type="text", name="q", value=query, placeholder="a question", maxlength=2000, required=True),
        " budget ",
        el("input", type="number", name="max_tokens", value=max_tokens, min=1, placeholder="tokens", class_="budget"),
        " ",
        el("button", "Compile", type="submit", id="run"),
        method="get",
        action="/query",
        id="query-form",
    )


def timeline_page(t: Timeline, removed: str = "") -> Html:
    body = [el("h1", "Timeline of ", el("span", t.user, class_="user"))]
    if removed:
        body.append(el("p", removed, class_="note"))
    body.append(query_form(t.user))
    body.append(
        el(
            "form",
            hidden(user=t.user),
            "Mark superseded statements about ",
            el("input", type="text", name="about", value=t.about, placeholder="e.g. how many cards", maxlength=2000),
            " ",
            el("button", "Mark", type="submit"),
            method="get",
            action="/timeline",
            id="about-form",
        )
    )
    shown = sum(len(s.turns) for s in t.sessions)
    body.append(el("p", f"{t.total} turns; showing {t.offset + 1 if shown else 0}–{t.offset + shown}.", class_="muted"))
    for s in t.sessions:
        body.append(el("h2", f"Session {s.number}", el("span", f" {s.time}", class_="muted")))
        for turn in s.turns:
            p = turn.packet
            claims = el(
                "ul",
                [
                    el("li", c.text, " ", el("span", f"Cell {c.cell_id}: {c.cell_title}", class_="cell"))
                    for c in turn.claims
                ],
                class_="claims",
            )
            body.append(
                el(
                    "div",
                    el(
                        "div",
                        el("span", p.dia_id, class_="dia"),
                        p.speaker,
                        el("span", f" · {when(p)}", class_="muted"),
                        " ",
                        el("a", "forget…", href=href("/forget", user=t.user, turn=p.dia_id), class_="forget"),
                        class_="head",
                    ),
                    el("div", p.text, class_="text"),
                    el("div", turn.mark, class_="mark") if turn.mark else None,
                    claims if turn.claims else None,
                    class_="turn",
                    id=f"turn-{p.packet_id}",
                    data_dia=p.dia_id,
                )
            )
    pages = []
    if t.offset > 0:
        pages.append(
            el("a", "← earlier", href=href("/timeline", user=t.user, about=t.about, offset=max(0, t.offset - t.limit)))
        )
    if t.offset + t.limit < t.total:
        pages.append(el("a", "later →", href=href("/timeline", user=t.user, about=t.about, offset=t.offset + t.limit)))
    body.append(el("p", *pages))
    return Html("".join(body))


def _row(r: Row) -> Html:
    p = r.packet
    return el(
        "tr",
        el("td", r.selected_rank or ""),
        el("td", p.dia_id, class_="dia"),
        el("td", p.speaker),
        el("td", r.claim),
        num(r.bm25),
        num(r.dense),
        el("td", fmt(r.cell), " ", el("span", ", ".join(r.cells), class_="cell"), class_="num"),
        num(r.address),
        num(r.fused),
        num(r.pool_rank),
        num(r.frontier_rank),
        el("td", r.why, class_="why"),
        el(
            "td",
            r.detail,
            el("span", f" superseded by {r.superseded_by}", class_="mark") if r.superseded_by else None,
            class_="detail",
        ),
        class_="selected" if r.selected_rank else None,
        data_dia=p.dia_id,
        data_why=r.why,
    )


def query_start_page(user: str) -> Html:
    return Html(el("h1", "Query of ", el("span", user, class_="user")) + query_form(user))


def query_page(e: Explanation) -> Html:
    body = [el("h1", "Query of ", el("span", e.user, class_="user")), query_form(e.user, e.query, e.max_tokens)]
    if e.note:
        body.append(el("p", e.note, class_="note"))
    body.append(el("h2", "Packets: channel scores and the decision"))
    body.append(
        el(
            "p",
            f"{len(e.selected)} selected of {len(e.rows)} packets reached. ",
            "; ".join(f"{k} {v}" for k, v in e.constants.items()),
            class_="muted",
        )
    )
    head = (
        "#",
        "dia_id",
        "speaker",
        "claim",
        "BM25",
        "dense",
        "Cell routing",
        "address s(p,q)",
        "fused",
        "pool rank",
        "frontier rank",
        "decision",
        "why",
    )
    body.append(el("table", el("tr", [el("th", h) for h in head]), [_row(r) for r in e.rows], id="packets"))
    body.append(el("h2", f"Context as the agent receives it ({e.tokens} tokens of a {e.max_tokens}-token budget)"))
    body.append(el("pre", e.context or "(no memory matched)", id="context"))
    i = e.intent
    body.append(el("h2", "Stages"))
    body.append(
        el(
            "table",
            el("tr", el("th", "stage"), el("th", "ms"), el("th", "counts")),
            [
                el(
                    "tr",
                    el("td", name),
                    num(info.get("ms")),
                    el("td", ", ".join(f"{k}={v}" for k, v in info.items() if k != "ms")),
                )
                for name, info in e.stages
            ],
            id="stages",
        )
    )
    body.append(el("h3", "intent"))
    body.append(
        el(
            "table",
            [
                el("tr", el("th", k), el("td", v))
                for k, v in (
                    ("terms", " ".join(i.terms)),
                    ("people", ", ".join(i.people)),
                    ("keywords", ", ".join(i.keywords)),
                    ("time", i.time or ""),
                    ("temporal", "yes" if i.temporal else "no"),
                )
            ],
        )
    )
    body.append(el("h3", f"bm25: {len(e.bm25)} claims"))
    body.append(_table(("dia_id", "claim", "BM25"), [(p.dia_id, claim, s) for p, claim, s in e.bm25[:20]], len(e.bm25)))
    body.append(el("h3", f"cell_routing: {len(e.routing.opened)} Cells opened ({e.routing.stop})"))
    body.append(
        _table(
            ("Cell", "title", "u(c,q)", "redundancy", "gain"),
            [
                (rc.cell_id, e.cell_titles.get(rc.cell_id, ""), rc.base, rc.redundancy, rc.gain)
                for rc in e.routing.opened
            ],
        )
    )
    body.append(el("h3", f"candidates: {len(e.candidates)} claims"))
    body.append(
        _table(
            ("dia_id", "claim", "r_i", "b_i", "channels"),
            [(p.dia_id, claim, r, b, " ".join(ch)) for p, claim, r, b, ch in e.candidates[:20]],
            len(e.candidates),
        )
    )
    return Html("".join(body))


def _table(head: tuple[str, ...], rows: list[tuple[object, ...]], total: int | None = None) -> Html:
    cells = [el("tr", [num(v) if isinstance(v, float) else el("td", v) for v in r]) for r in rows]
    more = el("p", f"… and {total - len(rows)} more", class_="muted") if total and total > len(rows) else None
    return Html(el("table", el("tr", [el("th", h) for h in head]), cells) + (more or ""))


def confirm_page(user: str, turn: str, csrf: str, detail: str) -> Html:
    what = f"turn {turn} of user {user!r}" if turn else f"everything stored for user {user!r}"
    return Html(
        el("h1", "Forget ", what, "?")
        + el("p", detail, class_="danger")
        + el(
            "form",
            hidden(user=user, turn=turn, csrf=csrf),
            el(
                "label",
                el("input", type="checkbox", name="confirm", value="yes", required=True, id="confirm"),
                " I understand this cannot be undone",
            ),
            " ",
            el("button", "Forget", type="submit", id="forget"),
            " ",
            el("a", "cancel", href=href("/timeline", user=user) if turn else "/"),
            method="post",
            action="/forget",
            id="forget-form",
        )
    )


def login_page(message: str = "") -> Html:
    return Html(
        el("h1", "Sign in")
        + (el("p", message, class_="danger") if message else "")
        + el(
            "form",
            el(
                "label",
                "Token ",
                el("input", type="password", name="token", id="token", required=True, autocomplete="off"),
            ),
            " ",
            el("button", "Sign in", type="submit", id="login"),
            method="post",
            action="/login",
        )
        + el(
            "p", "A token of the server's tokens file; a token bound to one user shows only that user.", class_="muted"
        )
    )


def message_page(heading: str, message: str) -> Html:
    return Html(el("h1", heading) + el("p", message, class_="danger") + el("p", el("a", "back to the users", href="/")))
