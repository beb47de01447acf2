"""Model faults, through ChatOpenAI against a real OpenAI-compatible server on 127.0.0.1: every kind of bad reply
or transport failure is retried a bounded number of times, then that item uses the offline component; the run
finishes, `stats` counts the fallbacks, no turn is lost, and a stage that failed throughout gives exactly the
offline result."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
from support.openai_server import Slow, Status

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.llm.models import chat_model

from .harness import memcompile, write_json

MODEL = "fake-model"
TURNS = demo_turns()[:5]
QUERIES = ["What kind of dog did Tom adopt?", "Where is Priya running a half marathon?"]
# K0=3 anchors of 5 turns leave dense packets outside the anchors, so the frontier stage asks the model too
CFG = MemCompileConfig(
    k0=3, llm_backoff_seconds=0.01, llm_backoff_max_seconds=0.05, llm_call_attempts=3, llm_concurrency=4
)
TIMEOUT = 0.5  # seconds per request; Slow replies take longer
ALL = ("fact", "metadata", "intent", "schedule", "frontier")
EXTRACTION, QUERY = ("fact", "metadata"), ("intent", "schedule", "frontier")


def _k(body: dict) -> int:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return int(re.search(r"Return exactly (\d+) distinct labels", user).group(1))


def _labels(make):
    return lambda body: json.dumps({"ranked_candidate_ids": make(_k(body))})


# kind -> {call type: persistent reply}; call types not named get well-formed replies
FAULTS: dict[str, dict[str, object]] = {
    "invalid_json": dict.fromkeys(ALL, '{"facts": ["unterminated'),
    "wrong_types": {
        "fact": json.dumps({"facts": [1, 2]}),
        "metadata": json.dumps({"people": 3, "keywords": [], "time": ["", ""]}),
        "intent": json.dumps({"need_attribute": "yes", "people": [], "keywords": [], "time": None}),
        "schedule": json.dumps({"ranked_candidate_ids": [1, 2]}),
        "frontier": json.dumps({"ranked_candidate_ids": {"C001": 1}}),
    },
    "wrong_cardinality": {
        "metadata": json.dumps({"people": [], "keywords": [], "time": ["", "", ""]}),
        "schedule": _labels(lambda k: [f"C{i:03d}" for i in range(1, k + 2)]),
        "frontier": _labels(lambda k: []),
    },
    "unknown_labels": {
        "schedule": _labels(lambda k: [f"C{900 + i}" for i in range(k)]),
        "frontier": _labels(lambda k: ["D1:1"] * k),
    },
    "duplicate_labels": {
        "schedule": _labels(lambda k: ["C001"] * max(k, 2)),
        "frontier": _labels(lambda k: ["C002"] * max(k, 2)),
    },
    "empty_reply": dict.fromkeys(ALL, ""),
    "refusal": dict.fromkeys(ALL, "I'm sorry, but I can't help with that request."),
    "http_429": dict.fromkeys(ALL, Status(429)),
    "http_500": dict.fromkeys(ALL, Status(500)),
    "timeout": dict.fromkeys(ALL, Slow(TIMEOUT * 3)),
    "connection_refused": dict.fromkeys(ALL),  # no server at all
}
TRANSPORT = {"http_429", "http_500", "timeout", "connection_refused"}


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # closed again: connections are refused


def _view(mem: MemCompile, user: str):
    index = mem.index(user)
    descriptors = [(d.dia_id, d.claim, d.people, d.keywords, d.event_time) for d in index.descriptors]
    packets = [mem.compile(q, user_id=user).packets for q in QUERIES]
    return descriptors, [[p.packet_id for p in ps] for ps in packets]


@pytest.fixture(scope="module")
def offline(tmp_path_factory, embeddings):
    mem = MemCompile(tmp_path_factory.mktemp("offline"), embeddings=embeddings, config=CFG)
    mem.add_turns(TURNS, user_id="u")
    return _view(mem, "u")


def _bound(call_type: str, items: int) -> int:
    """Most requests a stage may send for `items` items: attempts x correction retries (x rounds for labels)."""
    per_request = CFG.llm_call_attempts
    if call_type in ("schedule", "frontier"):
        return items * CFG.llm_schedule_rounds * (CFG.llm_schedule_retries + 1) * per_request
    return items * (CFG.llm_json_retries + 1) * per_request


@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=pytest.mark.slow) if k == "timeout" else k for k in sorted(FAULTS)]
)  # timeouts wait out every attempt: ~8 s
def test_every_fault_falls_back_per_item_and_the_run_finishes(kind, openai_server, tmp_path, embeddings, offline):
    faults = FAULTS[kind]
    if kind == "connection_refused":
        url = _dead_url()
    else:
        url = openai_server.base_url
        for call_type, reply in faults.items():
            openai_server.script(call_type, *[reply] * 500)
    before = {ct: openai_server.count(ct) for ct in ALL}
    mem = MemCompile(tmp_path, embeddings=embeddings, llm=chat_model(MODEL, url, timeout=TIMEOUT), config=CFG)

    started = time.monotonic()
    counts = mem.add_turns(TURNS, user_id="u")
    got = _view(mem, "u")
    took = time.monotonic() - started

    # no turn lost: every turn stored, with descriptors and a vector
    stats = mem.stats("u")
    assert counts["stored"] == stats["packets"] == stats["vectors"] == len(TURNS)
    index = mem.index("u")
    assert all(index.by_packet[p] for p in index.packet_order)
    assert all(len(ps) == len(set(ps)) > 0 for ps in got[1])

    # each faulted stage fell back, and says so in the counters
    counters = stats["counters"]
    if "fact" in faults:
        assert counters.get("llm_fact_fallback") == len(TURNS), counters
    if "metadata" in faults:
        assert counters.get("llm_metadata_fallback") == len(index.descriptors), counters
    if "intent" in faults:
        assert counters.get("llm_intent_fallback") == len(QUERIES), counters
    for stage in (
        "schedule",
        "frontier",
    ):  # valid labels of a bad reply are kept (App. A.2): retried, filled or fallen back
        if stage in faults:
            assert sum(counters.get(f"llm_{stage}_{n}", 0) for n in ("fallback", "filled", "retries")) >= 1, counters
    for stage in set(ALL) - set(faults):
        assert not any(k.startswith(f"llm_{stage}_") and k.endswith(("fallback", "filled")) for k in counters), counters

    # a stage that failed throughout is exactly the offline component
    if set(EXTRACTION) <= set(faults):
        assert got[0] == offline[0]
    if set(QUERY) <= set(faults) and got[0] == offline[0]:
        assert got[1] == offline[1]

    # retries were bounded
    if kind != "connection_refused":
        sent = {ct: openai_server.count(ct) - before[ct] for ct in ALL}
        items = {
            "fact": len(TURNS),
            "metadata": len(index.descriptors),
            "intent": len(QUERIES),
            "schedule": len(QUERIES),
            "frontier": len(QUERIES),
        }
        for ct in faults:
            assert 0 < sent[ct] <= _bound(ct, items[ct]), (ct, sent)
    if kind in TRANSPORT:
        usage = stats["usage"]["stages"]
        assert usage["fact"]["failures"] == len(TURNS) and usage["fact"]["transport_retries"] == len(TURNS) * (
            CFG.llm_call_attempts - 1
        )
    assert took < 120


def test_a_transient_fault_is_retried_then_succeeds(openai_server, tmp_path):
    openai_server.script("fact", Status(429), Status(500), Slow(TIMEOUT * 3))
    mem = MemCompile(
        tmp_path,
        llm=chat_model(MODEL, openai_server.base_url, timeout=TIMEOUT),
        config=CFG.with_overrides(llm_concurrency=1, llm_call_attempts=4),
        dense=False,
    )
    mem.add_turns(TURNS[:1], user_id="u")
    stats = mem.stats("u")
    assert "llm_fact_fallback" not in stats["counters"]
    assert stats["usage"]["stages"]["fact"]["transport_retries"] == 3
    assert mem.index("u").descriptors[0].claim.startswith("Priya said:")  # the model's fact, not the heuristic's


@pytest.mark.slow  # a subprocess or a whole store build per case
def test_cli_run_with_a_broken_model_finishes_and_stats_counts(openai_server, tmp_path):
    openai_server.script("fact", *["not json at all"] * 100)
    path = write_json(tmp_path / "t.json", TURNS)
    store = tmp_path / "store"
    run = memcompile(
        "ingest",
        path,
        "--store",
        store,
        "--user",
        "u",
        "--quiet",
        "--llm-model",
        MODEL,
        "--llm-base-url",
        openai_server.base_url,
    )
    assert run.code == 0 and f"stored {len(TURNS)} turns" in run.out, run.err
    stats = memcompile("stats", "--store", store, "--user", "u")
    assert f"llm_fact_fallback: {len(TURNS)}" in stats.out
    assert re.search(r"LLM fact \(construction\): \d+ calls", stats.out)
