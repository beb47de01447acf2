"""The inspector's web app (Starlette) and its server (uvicorn, which the `mcp` extra brings, as http_limits runs it).

Access is the MCP server's (docs/security.md): without a tokens file every user is shown (loopback, or --no-auth);
with one, a request carries `Authorization: Bearer TOKEN`, or the cookie of a session the sign-in form started, and a
token bound to one user reaches that user only, on every page and action. The cookie is never the token: it names a
random session of this process (HttpOnly, SameSite=Strict), which ends SESSION_SECONDS after sign-in, at sign-out, or
when its token leaves the tokens file; a cookie sent to another server on the host is worth nothing there. Host and
Origin are checked as the MCP server checks them (against DNS rebinding). Forgetting is a POST with a confirm field and
a form token tied to the caller's credential (CSRF: another site's page cannot read it). Request bodies and headers
are bounded before anything reads them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from mcp.server.transport_security import (
    RequestBodyLimitMiddleware,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ...evidence.budget import validate_max_tokens
from ...memory import MemCompile
from ...users import InvalidUserId, validate_user_id
from ..http_limits import listen
from ..http_limits import serve as serve_app
from ..mcp_server import transport_security
from ..tokens import Grant, Tokens
from . import pages
from .explain import explain, timeline

COOKIE = "memcompile_inspector"
MAX_BODY = 64 * 1024  # bytes of a form: a token, a user id and a dia_id fit many times over
MAX_HEADERS = 16 * 1024  # bytes of a request's head: its target and headers
MAX_QUERY = 2000  # characters of a question or a parameter
SESSION_SECONDS = 3600  # a sign-in lasts an hour: a cookie copied off a machine is soon worth nothing
MAX_SESSIONS = 1024  # live sign-ins held; past it the oldest ends (a sign-in loop cannot grow the process)
HEADERS = {
    # no script, no frames, forms to this server only: stored text that slipped through escaping could not run
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null"
    "Cache-Control": "no-store",
}


class Refused(Exception):
    def __init__(self, status: int, heading: str, message: str):
        super().__init__(message)
        self.status, self.heading, self.message = status, heading, message


@dataclass(frozen=True)
class Caller:
    grant: Grant
    credential: str  # the token presented ("" without a tokens file)
    form_token: str  # what this caller's forms carry (CSRF): tied to the credential and this process

    def user(self, user_id: str) -> str:
        """The validated user id, when this caller may see it."""
        try:
            user_id = validate_user_id(user_id)
        except InvalidUserId as exc:
            raise Refused(400, "Bad user id", str(exc)) from None
        if not self.grant.allows(user_id):
            raise Refused(
                403, "Not yours", f"this token is for user {self.grant.user_id!r}; it may not see {user_id!r}"
            )
        return user_id

    @property
    def label(self) -> str:
        if not self.credential:
            return "no authentication: every user"
        return f"signed in as {self.grant.user_id}" if self.grant.user_id else "signed in: every user"


class Sessions:
    """The sign-in sessions of one process: a random id (the cookie) -> the token it signed in with and its end.
    The token is checked against the tokens file on every request, so a token removed from it ends its sessions."""

    def __init__(self, lifetime: float = SESSION_SECONDS):
        self.lifetime = lifetime
        self._live: dict[str, tuple[str, float]] = {}

    def start(self, token: str) -> str:
        now = time.monotonic()
        self._live = {sid: held for sid, held in self._live.items() if held[1] > now}
        while len(self._live) >= MAX_SESSIONS:
            del self._live[next(iter(self._live))]
        sid = secrets.token_urlsafe(32)
        self._live[sid] = (token, now + self.lifetime)
        return sid

    def token(self, sid: str) -> str | None:
        """The token a live session signed in with; None for an unknown, ended or expired one."""
        held = self._live.get(sid)
        if held is None or held[1] <= time.monotonic():
            self._live.pop(sid, None)
            return None
        return held[0]

    def end(self, sid: str) -> None:
        self._live.pop(sid, None)


class BoundHead:
    """431 for a request head over MAX_HEADERS: h11 bounds a head that arrives in pieces, but one read (up to
    256 KiB) may bring a whole larger head at once."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = len(scope.get("raw_path", b"")) + len(scope.get("query_string", b""))
            size += sum(len(k) + len(v) + 4 for k, v in scope["headers"])
            if size > MAX_HEADERS:
                await Response("Request header fields too large", 431)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class CheckHostOrigin:
    """The MCP SDK's Host/Origin validation (what the MCP server applies) in front of every request."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings):
        self.app, self.check = app, TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self.check.validate_request(HTTPConnection(scope), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def page(title: str, body: str, caller: Caller | None = None, status: int = 200) -> HTMLResponse:
    who, signout = (caller.label, caller.form_token if caller.credential else "") if caller else ("", "")
    return HTMLResponse(pages.layout(title, body, who, signout), status, headers=HEADERS)


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, 303, headers=HEADERS)


def param(request: Request, name: str, default: str = "") -> str:
    value = request.query_params.get(name, default)
    if len(value) > MAX_QUERY:
        raise Refused(400, "Too long", f"{name} is longer than {MAX_QUERY} characters")
    return value


def int_param(request: Request, name: str, default: int | None = None) -> int | None:
    value = param(request, name).strip()
    if not value:
        return default
    if not value.isdecimal():
        raise Refused(400, "Bad number", f"{name} must be a whole number, got {value!r}")
    return int(value)


async def form(request: Request) -> dict[str, str]:
    """An urlencoded form (its size already bounded by RequestBodyLimitMiddleware): one value per field."""
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, max_num_fields=16).items()}


def build_app(
    mem: MemCompile,
    tokens: Tokens | None = None,
    security: TransportSecuritySettings | None = None,
    session_seconds: float = SESSION_SECONDS,
) -> Starlette:
    secret = secrets.token_bytes(32)  # per process: a form token of an earlier run is worthless
    sessions = Sessions(session_seconds)

    def caller_of(request: Request) -> Caller | None:
        if tokens is None:
            return caller(Grant(None), "")
        header = request.headers.get("authorization", "")
        if header:
            grant = tokens.bearer(header)
            return caller(grant, header.partition(" ")[2].strip()) if grant is not None else None
        sid = request.cookies.get(COOKIE, "")
        token = sessions.token(sid) if sid else None
        grant = tokens.grant(token) if token is not None else None
        return caller(grant, sid) if grant is not None else None

    def caller(grant: Grant, credential: str) -> Caller:
        token = hmac.new(secret, credential.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return Caller(grant, credential, token)

    def endpoint(fn: Callable[[Request, Caller], Any]) -> Callable[[Request], Any]:
        async def handle(request: Request) -> Response:
            caller = caller_of(request)
            if caller is None:
                if request.method == "GET" and not request.cookies.get(COOKIE):
                    return see_other("/login")
                ended = request.cookies.get(COOKIE) and not request.headers.get("authorization")
                message = "Your session has ended: sign in again." if ended else "Sign in first."
                response = page("Sign in", pages.login_page(message), status=401)
                response.delete_cookie(COOKIE, path="/")
                return response
            try:
                return await fn(request, caller)
            except Refused as exc:
                return page(exc.heading, pages.message_page(exc.heading, exc.message), caller, exc.status)
            except ValueError as exc:  # a query with nothing usable, a bad budget
                return page("Bad input", pages.message_page("Bad input", str(exc)), caller, 400)

        return handle

    async def users(request: Request, caller: Caller) -> Response:
        offset = int_param(request, "offset", 0) or 0
        every = [caller.grant.user_id] if caller.grant.user_id else await run_in_threadpool(mem.users)
        names = every[offset : offset + pages.PAGE]
        counts = await run_in_threadpool(lambda: [(u, mem.engine.records.counts(u)) for u in names])
        return page("Users", pages.users_page(counts, param(request, "forgot"), offset, len(every)), caller)

    async def timeline_view(request: Request, caller: Caller) -> Response:
        user = caller.user(param(request, "user"))
        offset = int_param(request, "offset", 0) or 0
        t = await run_in_threadpool(timeline, mem, user, offset, pages.PAGE, param(request, "about"))
        gone, count = param(request, "gone"), int_param(request, "count")
        removed = f"Removed {count} turn(s) ({gone})." if gone and count is not None else ""
        return page(f"Timeline of {user}", pages.timeline_page(t, removed), caller)

    async def query_view(request: Request, caller: Caller) -> Response:
        user = caller.user(param(request, "user"))
        query = param(request, "q")
        if not query.strip():
            return page(f"Query of {user}", pages.query_start_page(user), caller)
        budget = validate_max_tokens(int_param(request, "max_tokens"))
        e = await run_in_threadpool(explain, mem, user, query, budget)
        return page(f"Query of {user}", pages.query_page(e), caller)

    async def forget_confirm(request: Request, caller: Caller) -> Response:
        user, turn = caller.user(param(request, "user")), param(request, "turn")
        if turn:
            detail = "Removes the turn with its claims, Cell memberships and vector. This cannot be undone."
        else:
            detail = (
                "Removes every turn, claim, Cell, vector, cached reply and counter of this user. It cannot be undone."
            )
        return page("Forget?", pages.confirm_page(user, turn, caller.form_token, detail), caller)

    async def forget(request: Request, caller: Caller) -> Response:
        fields = await form(request)
        if not hmac.compare_digest(fields.get("csrf", ""), caller.form_token):
            raise Refused(403, "Stale form", "this form was not made by this server for you: open it again")
        user, turn = caller.user(fields.get("user", "")), fields.get("turn", "")
        if fields.get("confirm") != "yes":
            raise Refused(400, "Not confirmed", "tick the confirmation box to forget")
        if turn:
            count = await run_in_threadpool(mem.delete_turns, user, [turn])
            return see_other(pages.href("/timeline", user=user, gone=turn, count=count))
        await run_in_threadpool(mem.forget, user)
        return see_other(pages.href("/", forgot=user))

    async def login(request: Request) -> Response:
        if tokens is None:
            return see_other("/")
        if request.method == "GET":
            return page("Sign in", pages.login_page())
        presented = (await form(request)).get("token", "").strip()
        if tokens.grant(presented) is None:
            return page("Sign in", pages.login_page("That is not a token of this server."), status=401)
        response = see_other("/")
        lifetime = int(sessions.lifetime)
        response.set_cookie(
            COOKIE, sessions.start(presented), max_age=lifetime, httponly=True, samesite="strict", path="/"
        )
        return response

    async def logout(request: Request, caller: Caller) -> Response:
        if not hmac.compare_digest((await form(request)).get("csrf", ""), caller.form_token):
            raise Refused(403, "Stale form", "this form was not made by this server for you: open it again")
        sessions.end(request.cookies.get(COOKIE, ""))
        response = see_other("/login")
        response.delete_cookie(COOKIE, path="/")
        return response

    async def style(request: Request) -> Response:
        return Response(pages.STYLE, media_type="text/css", headers=HEADERS)

    routes = [
        Route("/", endpoint(users)),
        Route("/timeline", endpoint(timeline_view)),
        Route("/query", endpoint(query_view)),
        Route("/forget", endpoint(forget_confirm), methods=["GET"]),
        Route("/forget", endpoint(forget), methods=["POST"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", endpoint(logout), methods=["POST"]),
        Route("/style.css", style),
    ]
    middleware = [Middleware(BoundHead), Middleware(RequestBodyLimitMiddleware, max_body_size=MAX_BODY)]
    if security is not None:
        middleware.insert(1, Middleware(CheckHostOrigin, settings=security))
    return Starlette(routes=routes, middleware=middleware)


def serve(
    mem: MemCompile,
    host: str = "127.0.0.1",
    port: int = 0,
    tokens: Tokens | None = None,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Bind host:port (0: a free port), announce the page's URL, and serve until interrupted (the MCP server's
    listener and uvicorn settings: integrations/http_limits.py)."""
    sock = listen(host, port)
    port = sock.getsockname()[1]
    app = build_app(mem, tokens, transport_security(host, port, allowed_hosts, allowed_origins))
    announce(f"http://{f'[{host}]' if ':' in host else host}:{port}/")
    serve_app(app, sock, max_header_bytes=MAX_HEADERS, max_body_bytes=MAX_BODY)
