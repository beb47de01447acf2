"""One LLM call: messages -> text, with bounded backoff on transient errors, the response cache and the ledger."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from ..config import DEFAULT_CONFIG, MemCompileConfig
from ..text.terms import count_tokens
from .replies import ResponseCache, identity
from .table6 import table6_model
from .usage import UsageLedger

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1  # bump when prompts or request layouts change, so old cache entries stop matching
T = TypeVar("T")


class LLMUnavailable(RuntimeError):
    """The model could not be reached or kept failing after the bounded attempts."""


class InvalidReply(ValueError):
    """A reply that does not satisfy its stage's schema; `partial` keeps what was still usable."""

    def __init__(self, reason: str, partial: Any = None):
        super().__init__(reason)
        self.partial = partial


@dataclass(frozen=True)
class Request:
    """Everything that identifies one request; `turns` holds earlier replies and schema corrections."""

    call_type: str  # fact | metadata | intent | schedule | frontier | answer | judge
    system: str
    user: str
    response_format: str = "text"  # "text" or "json_object"
    bound: tuple[str, ...] = ()  # extra identity, e.g. ordered candidate ids and content hashes
    turns: tuple[tuple[str, str], ...] = ()  # (role, text) after the first user message

    def corrected(self, reply: str, correction: str) -> Request:
        return replace(self, turns=(*self.turns, ("assistant", reply), ("user", correction)))

    def messages(self) -> list[Any]:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        out: list[Any] = [SystemMessage(self.system), HumanMessage(self.user)]
        for role, text in self.turns:
            out.append(AIMessage(text) if role == "assistant" else HumanMessage(text))
        return out


def message_text(message: Any) -> str:
    """Text of an AIMessage whether content is a string or a list of content blocks; a refusal reads as empty."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else b.get("text", "") for b in content if isinstance(b, (str, dict))]
        return "".join(p for p in parts if isinstance(p, str)).strip()
    return ""


def status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    return code if isinstance(code, int) else None


def is_transient(exc: BaseException) -> bool:
    """429, 5xx, timeouts and dropped connections are worth another attempt; anything else is not."""
    code = status_code(exc)
    if code is not None:
        return code == 429 or code == 408 or code >= 500
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    return any(n in c.__name__ for c in type(exc).__mro__ for n in ("Timeout", "Connection"))


def model_identity(model: Any) -> dict[str, Any]:
    """What names a model's behaviour: its class, name, endpoint, temperature and completion limit."""
    return {
        "class": type(model).__name__,
        "model": getattr(model, "model_name", None)
        or getattr(model, "model", None)
        or getattr(model, "model_id", None),
        "base_url": getattr(model, "openai_api_base", None) or getattr(model, "base_url", None),
        "temperature": getattr(model, "temperature", None),
        "max_tokens": getattr(model, "max_tokens", None),
    }


class LLMClient:
    """Sends requests through any LangChain chat model; cache and ledger are optional (None = not kept)."""

    def __init__(
        self,
        model: Any,
        config: MemCompileConfig | None = None,
        cache: ResponseCache | None = None,
        ledger: UsageLedger | None = None,
        user_id: str = "default",
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config = config or DEFAULT_CONFIG
        self.model = table6_model(model, self.config)
        self.cache = cache
        self.ledger = ledger
        self.user_id = user_id
        self.sleep = sleep
        self.identity = model_identity(self.model)
        self.sent = 0  # requests this client sent (cache hits excluded): stages count events only when > 0
        # JSON mode is an OpenAI request field; other providers get the same instructions without it
        self.json_mode = type(model).__module__.startswith("langchain_openai")

    def for_user(self, user_id: str) -> LLMClient:
        return LLMClient(self.model, self.config, self.cache, self.ledger, user_id, self.sleep)

    def key(self, req: Request) -> str:
        return identity(
            v=PROTOCOL_VERSION,
            call_type=req.call_type,
            system=req.system,
            user=req.user,
            turns=req.turns,
            response_format=req.response_format,
            bound=req.bound,
            model=self.identity,
        )

    def _account(self, user: str, stage: str, **amounts: int) -> None:
        if self.ledger is not None:
            self.ledger.add(user, stage, **amounts)

    def complete(self, req: Request, user_id: str | None = None) -> str:
        """The reply text (may be empty); LLMUnavailable after the bounded attempts."""
        user = user_id or self.user_id
        key = self.key(req)
        if self.cache is not None:
            hit = self.cache.get(user, key)
            if hit is not None:
                self._account(user, req.call_type, cache_hits=1)
                return hit
        self.sent += 1
        message = self._invoke(req, user)
        text = message_text(message)
        usage = getattr(message, "usage_metadata", None) or {}
        prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
        estimated = False
        if prompt is None or completion is None:  # no usage sent: count offline so the ledger is never silently zero
            estimated = True
            prompt = sum(count_tokens(m.content) for m in req.messages() if isinstance(m.content, str))
            completion = count_tokens(text)
        self._account(
            user,
            req.call_type,
            calls=1,
            estimated_calls=int(estimated),
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
        if self.cache is not None and text:
            self.cache.put(user, key, req.call_type, text, prompt, completion)
        return text

    def _invoke(self, req: Request, user: str) -> Any:
        cfg = self.config
        kwargs = (
            {"response_format": {"type": "json_object"}}
            if self.json_mode and req.response_format == "json_object"
            else {}
        )
        attempts = max(1, cfg.llm_call_attempts)
        for attempt in range(attempts):
            try:
                return self.model.invoke(req.messages(), **kwargs)
            except Exception as exc:  # provider errors have no common base class
                if not is_transient(exc) or attempt == attempts - 1:
                    self._account(user, req.call_type, failures=1)
                    raise LLMUnavailable(
                        f"{req.call_type} request failed: {type(exc).__name__}: {exc}".splitlines()[0]
                    ) from exc
                delay = min(cfg.llm_backoff_max_seconds, cfg.llm_backoff_seconds * 2**attempt)
                log.info("%s request: %s, retrying in %.2fs", req.call_type, type(exc).__name__, delay)
                self._account(user, req.call_type, transport_retries=1)
                self.sleep(delay * (1 + 0.1 * random.random()))
        raise AssertionError("unreachable")


@dataclass
class Outcome(Generic[T]):
    value: T | None  # the parsed reply, None when every attempt was invalid
    partial: Any  # what the last invalid reply still offered
    retries: int  # schema-correction retries sent
    error: str = ""


def ask_validated(
    client: LLMClient, req: Request, parse: Callable[[str], T], retries: int, correction: Callable[[str], str]
) -> Outcome[T]:
    """Send, parse, and on an invalid reply resend with the reason and a schema correction, at most `retries` times."""
    partial, error = None, ""
    for attempt in range(retries + 1):
        text = client.complete(req)
        try:
            return Outcome(parse(text), None, attempt)
        except InvalidReply as exc:
            partial, error = exc.partial, str(exc)
            req = req.corrected(text or "(empty reply)", correction(error))
    return Outcome(None, partial, retries, error)
