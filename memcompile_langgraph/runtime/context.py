"""The runtime context of a graph run (LangGraph's `context_schema`): whose memory, and what to read it from.

`MemCompile` passes a context with its host (and, for a writer, the unit of work). A run served by `langgraph
dev` or LangGraph Server sends only `{"user_id": ...}`: the served graphs' context (../served.py) then opens the
served memory as its host, and when the server has custom auth the user is the authenticated one (run_context). Keys it does not know are ignored (the server mirrors its configurable into
the context). The user id is kept NFC-normalized, exactly as the API keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic.json_schema import SkipJsonSchema

from ..index.user import UserIndex
from ..users import MissingUserId, auth_identity, resolve_user, validate_user_id

if TYPE_CHECKING:
    from .cache import IndexCache
    from .engine import Engine
    from .host import Host
    from .unit_of_work import UnitOfWork
else:  # pydantic reads the field types at run time: the host and the writer are held as given, not validated
    Host = UnitOfWork = Any


class MemoryContext(BaseModel):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    user_id: str | None = None  # a served run may leave it to the server's authenticated user
    host: SkipJsonSchema[Host] = cast("Host", None)  # default_host() when not given (model_post_init)
    writer: SkipJsonSchema[UnitOfWork | None] = None  # when add_turns holds the user
    _snapshot: UserIndex | None = PrivateAttr(default=None)
    _unsettled: bool = PrivateAttr(default=False)  # a served run whose user run_context has not settled yet
    _operation: Any = PrivateAttr(default=None)  # a served run's operation span, from its first stage to its last

    def model_post_init(self, _: Any) -> None:
        if self.user_id is not None:
            self.user_id = validate_user_id(self.user_id)  # the NFC form: the user the API, MCP and CLI reach
        elif self.host is not None:
            raise MissingUserId("a MemoryContext with a host needs a user_id")
        if self.host is None:
            self._unsettled = True
            self.host = self.default_host()

    def default_host(self) -> Host:
        """The host of a run that names none: a served graph's context opens the served memory (../served.py)."""
        raise ValueError("this graph run has no memory: invoke it with context=mem.context(user_id)")

    @property
    def engine(self) -> Engine:
        return self.host.engine

    @property
    def cache(self) -> IndexCache:
        return self.host.cache

    @property
    def user(self) -> str:
        """The run's user: run_context settles a served run's user before a node reads it."""
        if self.user_id is None:
            raise MissingUserId("this graph run has no user_id")
        return self.user_id

    def snapshot(self) -> UserIndex:
        """The index this run reads throughout: taken once, at its first use (a query sees one version)."""
        if self._snapshot is None:
            self._snapshot = self.host.cache.snapshot(self.user)
        return self._snapshot


def run_context(runtime: Any) -> MemoryContext:
    """The run's context (LangGraph builds the context object once per run). A served run's user is settled here,
    inside a node, where the run's config (and the server's authenticated user in it) can be read."""
    context = getattr(runtime, "context", None)
    if context is None:
        raise ValueError("this graph needs a context: invoke it with context={'user_id': ...} (MemCompile does this)")
    if isinstance(context, dict):
        context = MemoryContext(**context)
    if context._unsettled:  # MemCompile's own contexts carry the user its caller chose
        context.user_id = resolve_user(context.user_id, auth_identity(_configurable()), "this graph run")
        context._unsettled = False
    return context


def _configurable() -> Any:
    from langgraph.config import get_config

    try:
        return get_config().get("configurable")
    except RuntimeError:  # outside a runnable: no server, no authenticated user
        return None
