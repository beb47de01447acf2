"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: scripted replies per call type, faults, and a
record of every request. Call types are told apart by the system prompt the stage sends."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memcompile_langgraph.llm.prompts import SYSTEMS


@dataclass(frozen=True)
class Status:
    """Answer with this HTTP status (429, 500, ...) instead of a completion."""

    code: int


@dataclass(frozen=True)
class Slow:
    """Wait `seconds` (beyond the client timeout) before sending `reply`."""

    seconds: float
    reply: Any = None


Reply = Any  # str content | Status | Slow | callable(body) -> str


def _user_text(body: dict) -> str:
    return next((m["content"] for m in body["messages"] if m["role"] == "user"), "")


def _quoted_after(label: str, text: str) -> str:
    m = re.search(rf"^{label}: (\".*\")$", text, re.M)
    return json.loads(m.group(1)) if m else ""


def default_reply(call_type: str, body: dict) -> str:
    """A well-formed reply for each stage, derived from the request."""
    user = _user_text(body)
    if call_type == "fact":
        current = user.split("Current turn:", 1)[-1]
        speaker = re.search(r"^speaker: (.*)$", current, re.M).group(1)
        return json.dumps([f"{speaker} said: {_quoted_after('text', current)}"])
    if call_type == "metadata":
        fact = _quoted_after("Fact", user)
        words = [w for w in re.findall(r"[A-Za-z]{5,}", fact)][:3]
        return json.dumps(
            {
                "people": [],
                "keywords": [w.lower() for w in words],
                "time": ["", ""],
                "needs_profile_extraction": False,
                "event": {
                    "subject_people": [],
                    "predicate": "say",
                    "focus_terms": words[:1],
                    "goal_context_terms": [],
                    "event_type": "occurrence",
                    "event_time": "",
                    "polarity": "neutral",
                    "confidence": 0.9,
                },
            }
        )
    if call_type == "intent":
        q = _quoted_after("Question", user)
        return json.dumps(
            {"need_attribute": False, "people": [], "keywords": re.findall(r"[A-Za-z]{5,}", q)[:3], "time": None}
        )
    if call_type in ("schedule", "frontier"):
        labels = re.findall(r"^\[(C\d+)\]", user, re.M)
        k = int(re.search(r"Return exactly (\d+) distinct labels", user).group(1))
        return json.dumps({"ranked_candidate_ids": labels[:k]})
    if call_type == "update":  # every pair decided, none an update
        pairs = re.findall(r"^\[(U\d+)\]$", user, re.M)
        return json.dumps({"updates": [{"pair": p, "update": False} for p in pairs]})
    if call_type == "judge":
        return json.dumps({"label": "CORRECT"})
    return "Biscuit"


def call_type_of(body: dict) -> str:
    system = next((m["content"] for m in body.get("messages", []) if m["role"] == "system"), "")
    for name, text in SYSTEMS.items():
        if system == text:
            return "answer" if name == "answer_temporal" else name
    return "unknown"


class FakeOpenAI:
    def __init__(self):
        self.requests: list[dict] = []  # {"call_type", "body"} of every request, faults included
        self._scripts: dict[str, deque] = defaultdict(deque)
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0  # how many requests were served at the same time, at most
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def script(self, call_type: str, *replies: Reply) -> None:
        """Queue replies for the next requests of a call type; afterwards default replies resume."""
        with self._lock:
            self._scripts[call_type].extend(replies)

    def count(self, call_type: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if call_type is None or r["call_type"] == call_type)

    def of(self, call_type: str) -> list[dict]:
        with self._lock:
            return [r["body"] for r in self.requests if r["call_type"] == call_type]

    def _next(self, body: dict) -> tuple[str, Reply]:
        call_type = call_type_of(body)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests.append({"call_type": call_type, "body": body})
            queue = self._scripts[call_type]
            reply = queue.popleft() if queue else None
        return call_type, reply

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def do_POST(self):
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                call_type, reply = server._next(body)
                try:
                    self._reply(call_type, body, reply)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _reply(self, call_type: str, body: dict, reply: Reply) -> None:
                if isinstance(reply, Slow):
                    time.sleep(reply.seconds)
                    reply = reply.reply
                if isinstance(reply, Status):
                    return self._send(
                        reply.code,
                        {"error": {"message": f"scripted {reply.code}", "type": "scripted", "code": reply.code}},
                    )
                if reply is None:
                    reply = default_reply(call_type, body)
                elif callable(reply):
                    reply = reply(body)
                prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
                completion = len(reply.split())
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                        ],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                        },
                    },
                )

        return Handler
