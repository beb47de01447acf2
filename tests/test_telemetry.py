"""OpenTelemetry spans (runtime/telemetry.py) through the SDK's in-memory exporter: the GenAI memory-operation span
of each call, one child span per pipeline stage, LLM calls inside their stage's span, no stored or query text
without the content-capture opt-in, and no opentelemetry import without a tracer provider."""

import json
import subprocess
import sys
import textwrap

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.query_graph import STAGES, query_graph

TURNS = [
    {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "2024-03-04"},
    {"speaker": "Priya", "text": "Congrats! I start at Northwind next month.", "time": "2024-03-04"},
    {"speaker": "Tom", "text": "Biscuit chewed my left slipper to pieces.", "time": "2024-03-05"},
]
QUESTION = "What is the name of Tom's beagle?"
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"  # the conventions' opt-in
BUILD_STAGES = ("packetize", "extract_facts", "extract_metadata", "place_cells", "index")


@pytest.fixture
def spans(monkeypatch):
    """A global SDK tracer provider for the test, with an in-memory exporter; the global is reset after it, as
    OpenTelemetry's own test helpers do (the API lets a process set it once)."""
    monkeypatch.delenv(CAPTURE_CONTENT, raising=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()


def _tree(exporter):
    finished = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    parent = {s: by_id.get(s.parent.span_id) if s.parent else None for s in finished}
    return finished, parent


def _named(finished, name):
    found = [s for s in finished if s.name == name]
    assert len(found) == 1, [s.name for s in finished]
    return found[0]


def _everything(span) -> str:
    """Every attribute value and event of a span, as one text to search."""
    parts = [span.name, json.dumps(dict(span.attributes or {}), default=str)]
    for event in span.events:
        parts += [event.name, json.dumps(dict(event.attributes or {}), default=str)]
    return "\n".join(parts)


def test_each_call_makes_one_memory_operation_span_with_a_child_per_stage(spans, backend, tmp_path):
    mem = backend.where(tmp_path / "store").memory()
    try:
        counts = mem.add_turns(TURNS, user_id="tom")
        ctx = mem.compile(QUESTION, user_id="tom")
        assert mem.delete_turns("tom", ["D1:2"]) == 1
        mem.forget("tom")
    finally:
        mem.close()
    finished, parent = _tree(spans)
    roots = [s.name for s in finished if parent[s] is None]
    assert roots == ["create_memory", "search_memory", "delete_memory", "delete_memory_store"]

    create = _named(finished, "create_memory")
    assert create.kind == trace.SpanKind.INTERNAL
    assert dict(create.attributes) == {
        "gen_ai.operation.name": "create_memory",
        "gen_ai.memory.store.id": "tom",
        "gen_ai.memory.record.count": 3,
        **{f"memcompile.add_turns.{k}": v for k, v in counts.items()},
    }
    build = {s.name.removeprefix("memcompile."): s for s in finished if parent[s] is not None and parent[s] is create}
    assert set(BUILD_STAGES) <= set(build)
    assert build["packetize"].attributes["memcompile.packetize.packets"] == 3
    assert build["index"].attributes["memcompile.index.committed"] == 3
    commit = _named(finished, "memcompile.commit")
    assert parent[commit] is build["index"] and commit.attributes["memcompile.commit.packets"] == 3
    embed = _named(finished, "memcompile.embed")  # the background job, inside the add_turns trace
    assert embed.context.trace_id == create.context.trace_id and embed.attributes["memcompile.embed.packets"] == 3
    # a writer's part is not a stage: its span names itself a part (a stage's, a stage)
    assert commit.attributes["memcompile.part"] == "commit" and "memcompile.stage" not in commit.attributes
    assert embed.attributes["memcompile.part"] == "embed"
    assert (
        build["packetize"].attributes["memcompile.stage"] == "packetize"
        and "memcompile.part" not in build["packetize"].attributes
    )
    for name, span in build.items():
        assert span.attributes[f"memcompile.{name}.ms"] >= 0

    search = _named(finished, "search_memory")
    assert search.attributes["gen_ai.operation.name"] == "search_memory"
    assert search.attributes["gen_ai.memory.store.id"] == "tom"
    assert search.attributes["gen_ai.memory.record.count"] == len(ctx.packets) > 0
    stages = {s.name.removeprefix("memcompile."): s for s in finished if parent[s] is search}
    assert set(stages) == set(STAGES)
    for name, span in stages.items():  # the stage's entry of CompiledContext.trace, on its span
        assert span.attributes[f"memcompile.{name}.ms"] == pytest.approx(ctx.trace[name]["ms"])
        for key, value in ctx.trace[name].items():
            assert span.attributes[f"memcompile.{name}.{key}"] == value
        assert span.start_time >= search.start_time and span.end_time <= search.end_time

    delete = _named(finished, "delete_memory")
    assert delete.attributes["gen_ai.memory.record.id"] == "D1:2"
    assert delete.attributes["gen_ai.memory.record.count"] == 1
    assert delete.attributes["memcompile.delete_turns.removed"] == 1
    assert _named(finished, "delete_memory_store").attributes["gen_ai.memory.store.id"] == "tom"


def test_no_text_of_a_turn_or_query_leaves_without_the_opt_in(spans, backend, tmp_path):
    mem = backend.where(tmp_path / "store").memory()
    try:
        mem.add_turns(TURNS, user_id="tom")
        mem.compile(QUESTION, user_id="tom")
        mem.as_retriever(user_id="tom", k=2).invoke(QUESTION)
    finally:
        mem.close()
    finished = spans.get_finished_spans()
    assert len(finished) > 20
    secrets = [t["text"] for t in TURNS] + [QUESTION, "Biscuit", "beagle", "Northwind", "slipper"]
    for span in finished:
        text = _everything(span)
        assert not [s for s in secrets if s in text], span.name
        assert not {"gen_ai.memory.query.text", "gen_ai.memory.records", "gen_ai.retrieval.documents"} & set(
            span.attributes
        )


@pytest.mark.parametrize("value", ["true", "1", "True"])
def test_with_the_opt_in_the_query_and_the_records_are_there(spans, backend, monkeypatch, value, tmp_path):
    monkeypatch.setenv(CAPTURE_CONTENT, value)
    mem = backend.where(tmp_path / "store").memory()
    try:
        mem.add_turns(TURNS, user_id="tom")
        ctx = mem.compile(QUESTION, user_id="tom")
    finally:
        mem.close()
    finished = spans.get_finished_spans()
    created = json.loads(_named(finished, "create_memory").attributes["gen_ai.memory.records"])
    assert created == [{"content": t["text"]} for t in TURNS]
    search = _named(finished, "search_memory")
    assert search.attributes["gen_ai.memory.query.text"] == QUESTION
    found = json.loads(search.attributes["gen_ai.memory.records"])
    assert [r["id"] for r in found] == ctx.dia_ids
    assert found[0]["content"] in [t["text"] for t in TURNS] and isinstance(found[0]["score"], float)


def test_the_retriever_is_a_retrieval_span_around_its_search(spans, monkeypatch):
    mem = MemCompile(None, dense=False)
    mem.add_turns(demo_turns(), user_id="demo")
    retriever = mem.as_retriever(user_id="demo", k=3)
    docs = retriever.invoke("Which startup did Priya get a new job at?")
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
    retriever.invoke("Which startup did Priya get a new job at?")
    finished, parent = _tree(spans)
    plain, captured = [s for s in finished if s.name == "retrieval demo"]
    assert plain.kind == trace.SpanKind.CLIENT
    assert dict(plain.attributes) == {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": "demo",
        "gen_ai.request.top_k": 3.0,
    }
    assert [parent[s] for s in finished if s.name == "search_memory"] == [plain, captured]
    assert json.loads(captured.attributes["gen_ai.retrieval.documents"]) == [
        {"id": d.id, "score": d.metadata["score"]} for d in docs
    ]
    assert captured.attributes["gen_ai.retrieval.query.text"] == "Which startup did Priya get a new job at?"


def test_a_graph_run_without_memcompile_around_it_opens_its_own_operation_span(spans, tmp_path):
    """What a LangGraph server's run of the served query / ingest graph is: the graph's first node opens the
    operation span, every node is its child, the last closes it."""
    from memcompile_langgraph.ingest.turn_input import occurrences
    from memcompile_langgraph.ingest_graph import ingest_graph

    mem = MemCompile(tmp_path / "store", dense=False)
    try:
        ingest_graph.invoke({"turns": occurrences(TURNS)}, context=mem.context("tom"))
        out = query_graph.invoke({"query": QUESTION}, context=mem.context("tom"))
    finally:
        mem.close()
    finished, parent = _tree(spans)
    assert [s.name for s in finished if parent[s] is None] == ["create_memory", "search_memory"]
    create, search = _named(finished, "create_memory"), _named(finished, "search_memory")
    assert create.attributes["gen_ai.memory.record.count"] == 3
    assert {s.name for s in finished if parent[s] is create} >= {f"memcompile.{n}" for n in BUILD_STAGES}
    assert {s.name for s in finished if parent[s] is search} == {f"memcompile.{n}" for n in STAGES}
    assert search.attributes["gen_ai.memory.record.count"] == len(out["packets"]) > 0
    assert "gen_ai.memory.query.text" not in search.attributes


async def test_mcp_tools_make_their_memory_operation_spans(spans, tmp_path):
    from mcp.shared.memory import create_connected_server_and_client_session

    from memcompile_langgraph.integrations.mcp_server import build_server

    mem = MemCompile(tmp_path / "store", dense=False)
    server = build_server(mem)
    try:
        async with create_connected_server_and_client_session(server._mcp_server) as session:
            for tool, args in [
                ("remember", {"turns": TURNS, "user_id": "tom"}),
                ("recall", {"query": QUESTION, "user_id": "tom", "k": 2}),
                ("forget", {"user_id": "tom", "dia_ids": ["D1:1"]}),
                ("forget", {"user_id": "tom"}),
            ]:
                assert not (await session.call_tool(tool, args)).isError
    finally:
        mem.close()
    finished, parent = _tree(spans)
    roots = [s.name for s in finished if parent[s] is None]
    assert roots == ["create_memory", "search_memory", "delete_memory", "delete_memory_store"]


def test_a_failed_call_marks_its_span_with_the_error(spans, tmp_path):
    mem = MemCompile(tmp_path / "store", dense=False)
    mem.add_turns(TURNS, user_id="tom")
    mem.close()
    with pytest.raises(Exception) as raised:
        mem.delete_turns("tom", ["D1:1"])  # its records are closed
    delete = _named(spans.get_finished_spans(), "delete_memory")
    assert delete.status.status_code == trace.StatusCode.ERROR
    assert delete.attributes["error.type"] == type(raised.value).__qualname__
    assert [e.name for e in delete.events] == ["exception"]


class _CurrentSpan(BaseCallbackHandler):
    """What an OpenTelemetry LangChain instrumentation parents its LLM span to: the span current at the call."""

    def __init__(self):
        self.seen = []

    def on_chat_model_start(self, serialized, messages, **kwargs):
        span = trace.get_current_span()
        self.seen.append((getattr(span, "name", None), span.get_span_context().trace_id))


def test_llm_calls_run_inside_their_stage_span(spans, openai_server, tmp_path):
    from langchain_openai import ChatOpenAI

    handler = _CurrentSpan()
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.base_url, api_key="test", callbacks=[handler])
    mem = MemCompile(tmp_path / "store", llm=llm, dense=False)
    try:
        mem.add_turns(TURNS, user_id="tom")
        mem.compile(QUESTION, user_id="tom")
    finally:
        mem.close()
    assert handler.seen and openai_server.count() == len(handler.seen)
    finished = spans.get_finished_spans()
    traces = {s.name: s.context.trace_id for s in finished if s.name in ("create_memory", "search_memory")}
    stages = {name for name, _ in handler.seen}
    assert "memcompile.extract_facts" in stages and "memcompile.intent" in stages
    assert stages <= {s.name for s in finished if s.name.startswith("memcompile.")}
    assert {trace_id for _, trace_id in handler.seen} == set(traces.values())


def test_without_a_tracer_provider_nothing_from_opentelemetry_is_imported(tmp_path):
    """As without the extra (and without langsmith's optional use of it): adding, compiling and retrieving work and
    load no opentelemetry module. (Deleting opens the vector store, and chromadb itself needs opentelemetry.)"""
    code = textwrap.dedent(
        f"""
        import sys

        class NoOpenTelemetry:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "opentelemetry":
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

        sys.meta_path.insert(0, NoOpenTelemetry())
        from memcompile_langgraph import MemCompile

        mem = MemCompile({str(tmp_path / "store")!r}, dense=False)
        mem.add_turns({TURNS!r}, user_id="tom")
        assert mem.compile({QUESTION!r}, user_id="tom").packets
        assert mem.as_retriever(user_id="tom", k=2).invoke({QUESTION!r})
        mem.close()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
        assert not loaded, loaded
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"
