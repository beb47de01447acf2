"""OpenTelemetry spans of the memory's operations and of their pipeline stages, named and attributed by the GenAI
semantic conventions for memory operations and retrievals (docs/observability.md names the version followed).

Spans are made only when the application has set a tracer provider: this module never imports opentelemetry, it
uses `opentelemetry.trace` only when the application already imported it and set a provider. Otherwise every call
returns a shared no-op handle. Text of turns and queries goes onto spans only with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (or 1); counts, timings and ids always do.

Operation spans are INTERNAL: the memory runs inside the caller's process. The memory store (`gen_ai.memory.store.id`,
`gen_ai.data_source.id`) is the user's memory, named by its user id; a memory record is a stored turn, named by its
dia_id.
"""

from __future__ import annotations

import contextvars
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..ingest.turn_input import Occurrence, given_text

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from ..index.user import UserIndex
    from ..model import SelectedPacket

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SCOPE = "memcompile_langgraph"
PREFIX = "memcompile"  # the attributes the conventions do not define: memcompile.<stage or part>.<count>


def _api() -> Any:
    """opentelemetry.trace when the application imported it and set a tracer provider, else None."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    return None if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)) else trace


@functools.lru_cache(maxsize=4)
def _tracer(provider: TracerProvider) -> Tracer:
    from importlib.metadata import version

    return provider.get_tracer(SCOPE, version("memcompile-langgraph"))


@functools.lru_cache(maxsize=1)
def _operation_key() -> str:
    """The OTel context key that marks a memory operation span of ours as current (its graph runs add no second)."""
    return str(sys.modules["opentelemetry.context"].create_key("memcompile-operation"))


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() in ("true", "1")


class Recorder:
    """What a call records on its span; OFF, the handle without a span, records nothing."""

    def __init__(self, span: Span | None = None) -> None:
        self.span = span
        self.capture = span is not None and capture_content()

    def set(self, attributes: Mapping[str, Any]) -> None:
        if self.span is not None:
            self.span.set_attributes({k: _value(v) for k, v in attributes.items() if v is not None})

    def counts(self, scope: str, counts: Mapping[str, Any]) -> None:
        self.set({f"{PREFIX}.{scope}.{k}": v for k, v in counts.items()})

    def content(self, key: str, build: Callable[[], Any]) -> None:
        """A content-bearing attribute (built only when captured), as JSON when structured."""
        if self.capture:
            value = build()
            self.set({key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)})

    def found(self, packets: Sequence[SelectedPacket], index: Callable[[], UserIndex]) -> None:
        """search_memory's result: the selected turns (with their text only when captured)."""
        self.set({"gen_ai.memory.record.count": len(packets)})

        def records() -> list[dict[str, Any]]:
            stored = index().packets
            return [
                {"id": p.dia_id, "score": p.score, "content": stored[p.packet_id].text}
                for p in packets
                if p.packet_id in stored
            ]

        self.content("gen_ai.memory.records", records)


OFF = Recorder()
_OFF = nullcontext(OFF)


def _value(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else str(value)


@contextmanager
def _span(trace: Any, name: str, kind: str, attributes: dict[str, Any]) -> Iterator[Recorder]:
    otel_context = sys.modules["opentelemetry.context"]
    span = _tracer(trace.get_tracer_provider()).start_span(
        name, kind=getattr(trace.SpanKind, kind), attributes=attributes
    )
    token = otel_context.attach(otel_context.set_value(_operation_key(), True, trace.set_span_in_context(span)))
    try:
        yield Recorder(span)
    except BaseException as exc:
        _failed(trace, span, exc)
        raise
    finally:
        otel_context.detach(token)
        span.end()


def _failed(trace: Any, span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__qualname__))


def _memory(operation: str, user_id: str, **attributes: Any) -> AbstractContextManager[Recorder]:
    trace = _api()
    if trace is None:
        return _OFF
    base = {"gen_ai.operation.name": operation, "gen_ai.memory.store.id": user_id}
    return _span(trace, operation, "INTERNAL", {**base, **{k: v for k, v in attributes.items() if v is not None}})


def search_memory(user_id: str, query: str, view: str, max_tokens: int | None) -> AbstractContextManager[Recorder]:
    cm = _memory("search_memory", user_id, **{f"{PREFIX}.view": view, f"{PREFIX}.max_tokens": max_tokens})
    return _with_query(cm, "gen_ai.memory.query.text", query)


def create_memory(user_id: str, turns: Sequence[Occurrence]) -> AbstractContextManager[Recorder]:
    """add_turns: each turn a new record (stored turns are never changed; one stored already is counted, not
    stored again). gen_ai.memory.record.count: the turns it attempted to create."""
    cm = _memory("create_memory", user_id, **{"gen_ai.memory.record.count": len(turns)})
    if cm is _OFF:
        return cm
    return _with_content(cm, "gen_ai.memory.records", lambda: [{"content": given_text(t)} for t in turns])


def delete_memory(user_id: str, dia_ids: Sequence[str]) -> AbstractContextManager[Recorder]:
    one = dia_ids[0] if len(dia_ids) == 1 else None
    return _memory(
        "delete_memory", user_id, **{"gen_ai.memory.record.id": one, "gen_ai.memory.record.count": len(dia_ids)}
    )


def delete_memory_store(user_id: str) -> AbstractContextManager[Recorder]:
    """forget: the user's whole memory (records, vectors, snapshot files, cached replies) is deprovisioned."""
    return _memory("delete_memory_store", user_id)


def retrieval(user_id: str, query: str, k: int | None) -> AbstractContextManager[Recorder]:
    """The LangChain retriever: at most k documents (id: the Document's id, the packet id; score)."""
    trace = _api()
    if trace is None:
        return _OFF
    attributes = {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": user_id,
        "gen_ai.request.top_k": None if k is None else float(k),
    }
    cm = _span(trace, f"retrieval {user_id}", "CLIENT", {k: v for k, v in attributes.items() if v is not None})
    return _with_query(cm, "gen_ai.retrieval.query.text", query)


def documents(recorder: Recorder, docs: Sequence[Any]) -> None:
    recorder.content(
        "gen_ai.retrieval.documents", lambda: [{"id": d.id, "score": float(d.metadata["score"])} for d in docs]
    )


@contextmanager
def _with_content(cm: AbstractContextManager[Recorder], key: str, build: Callable[[], Any]) -> Iterator[Recorder]:
    with cm as recorder:
        recorder.content(key, build)
        yield recorder


def _with_query(cm: AbstractContextManager[Recorder], key: str, query: str) -> AbstractContextManager[Recorder]:
    return cm if cm is _OFF else _with_content(cm, key, lambda: query)


# --- stages ----------------------------------------------------------------------------------------------------


class RunContext(Protocol):
    """What a stage span needs of its graph run's context (runtime/context.py's MemoryContext, which sits above
    this module: the graph node resolves it)."""

    _operation: Any  # the served run's operation span, from its first stage to its last

    @property
    def user(self) -> str: ...


@dataclass(frozen=True)
class GraphOperation:
    """The memory operation a graph run is when a served run (no MemCompile call around it) starts it: its span
    opens at the graph's first stage and closes after its last (unless that stage asks to run again)."""

    name: str
    first: str
    last: str


class _Stage:
    """A stage span's handle (or a writer part's): `record` puts its counts and ms on it; `done` takes a graph
    node's update."""

    def __init__(self, name: str, span: Span | None = None, served: tuple[GraphOperation, RunContext] | None = None):
        self.name, self.recorder, self.served = name, Recorder(span), served
        self.recorded = False

    def record(self, entry: Mapping[str, Any]) -> None:
        if self.recorder.span is not None:
            self.recorder.counts(self.name, entry)
            self.recorded = self.recorded or "ms" in entry

    def done(self, update: Mapping[str, Any]) -> None:
        """After a node: its trace entry on its span; the last stage of a served run closes the run's span."""
        if self.recorder.span is None:
            return
        self.record(update["trace"][self.name])
        if self.served is None:
            return
        graph, ctx = self.served
        span = ctx._operation
        if self.name == graph.last and not update.get("retry") and span is not None:
            if "packets" in update and graph.name == "search_memory":
                span.set_attribute("gen_ai.memory.record.count", len(update["packets"]))
            span.end()
            ctx._operation = None


UNTRACED = nullcontext(_Stage(""))  # the handle of a stage or part without a span


def stage(
    name: str,
    runtime: Any = None,
    graph: GraphOperation | None = None,
    state: Mapping[str, Any] | None = None,
    context_of: Callable[[Any], RunContext] | None = None,
) -> AbstractContextManager[_Stage]:
    """A child span of the current memory operation for one pipeline stage (a graph node passes its runtime, its
    graph's operation, its input state and how its run's context is read from the runtime: a served run's first
    node opens the run's operation span)."""
    trace = _api()
    if trace is None:
        return UNTRACED
    return _stage_span(trace, "stage", name, runtime, graph, state or {}, context_of)


def part(name: str) -> AbstractContextManager[_Stage]:
    """A child span of the current memory operation for one part of a writer's work (runtime/writer_clock.py): not a
    stage, so its span says `memcompile.part` where a stage's says `memcompile.stage`."""
    trace = _api()
    if trace is None:
        return UNTRACED
    return _stage_span(trace, "part", name, None, None, {}, None)


@contextmanager
def _stage_span(
    trace: Any,
    kind: str,
    name: str,
    runtime: Any,
    graph: GraphOperation | None,
    state: Mapping[str, Any],
    context_of: Callable[[Any], RunContext] | None,
) -> Iterator[_Stage]:
    served = None
    if (
        graph is not None
        and context_of is not None
        and sys.modules["opentelemetry.context"].get_value(_operation_key()) is None
    ):
        ctx = context_of(runtime)
        if _served_operation(trace, graph, ctx, name, state) is not None:
            served = (graph, ctx)
    parent = trace.set_span_in_context(served[1]._operation) if served is not None else None
    tracer = _tracer(trace.get_tracer_provider())
    span = tracer.start_span(f"{PREFIX}.{name}", context=parent, attributes={f"{PREFIX}.{kind}": name})
    handle = _Stage(name, span, served)
    start = time.perf_counter()
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield handle
    except BaseException as exc:
        _failed(trace, span, exc)
        if served is not None and served[1]._operation is not None:
            _failed(trace, served[1]._operation, exc)
            served[1]._operation.end()
            served[1]._operation = None
        raise
    finally:
        if not handle.recorded:
            handle.record({"ms": round((time.perf_counter() - start) * 1000, 3)})
        span.end()


def _served_operation(
    trace: Any, graph: GraphOperation, ctx: RunContext, stage: str, state: Mapping[str, Any]
) -> Span | None:
    """The operation span of a served graph run, kept on its context from its first stage to its last."""
    span: Span | None = ctx._operation
    if span is None and stage == graph.first:
        attributes: dict[str, Any] = {"gen_ai.operation.name": graph.name, "gen_ai.memory.store.id": ctx.user}
        if "turns" in state:
            attributes["gen_ai.memory.record.count"] = len(state["turns"])
        span = _tracer(trace.get_tracer_provider()).start_span(
            graph.name, kind=trace.SpanKind.INTERNAL, attributes=attributes
        )
        if capture_content() and "query" in state:
            span.set_attribute("gen_ai.memory.query.text", str(state["query"]))
        ctx._operation = span
    return span


def carry(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn to run on another thread inside the current span (the background embedding); fn itself when not tracing."""
    return fn if _api() is None else functools.partial(contextvars.copy_context().run, fn)
