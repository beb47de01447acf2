"""LLM stages with an in-process scripted chat model: calls, cache, ledger, scheduler rounds, fallbacks."""

import json
import re
import subprocess
import sys

import pytest
from support.scripted_model import HTTPError, ScriptedChatModel

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.evidence.llm_scheduler import LLMScheduler
from memcompile_langgraph.evidence.mmr import DeterministicScheduler
from memcompile_langgraph.evidence.scheduler import ScheduleInput
from memcompile_langgraph.llm.answer import generate_answer, judge_answer
from memcompile_langgraph.llm.calls import LLMClient, LLMUnavailable, Request
from memcompile_langgraph.llm.prompts import ANSWER_TEMPORAL_SYSTEM, FACT_SYSTEM, SYSTEMS
from memcompile_langgraph.store.llm_file import LLMStore

CFG = MemCompileConfig(llm_backoff_seconds=0.0, llm_concurrency=4)
REQ = Request("intent", "system", "user")


def labels_in(messages):
    return re.findall(r"^\[(C\d+)\]", messages[1].content, re.M)


def k_in(messages):
    return int(re.search(r"Return exactly (\d+)", messages[1].content).group(1))


def first_k(messages):
    return json.dumps({"ranked_candidate_ids": labels_in(messages)[: k_in(messages)]})


def reversed_k(messages):
    return json.dumps({"ranked_candidate_ids": labels_in(messages)[::-1][: k_in(messages)]})


def router(**by_type):
    """A reply function choosing by the system prompt; unknown stages get []."""

    def reply(messages):
        kind = next((k for k, v in SYSTEMS.items() if v == messages[0].content), "")
        fn = by_type.get(kind, "[]")
        return fn(messages) if callable(fn) else fn

    return reply


# --- one call ------------------------------------------------------------------------------------------


def test_cache_hit_sends_nothing_and_the_ledger_reads_usage_metadata():
    store = LLMStore(None)
    model = ScriptedChatModel(replies=["A", "B"])
    client = store.client(model, CFG, "u1")
    assert client.complete(REQ) == "A"
    assert client.complete(REQ) == "A" and len(model.calls) == 1
    assert client.for_user("u2").complete(REQ) == "B"  # entries are per user
    usage = store.usage("u1")["stages"]["intent"]
    assert (usage["calls"], usage["cache_hits"], usage["prompt_tokens"], usage["completion_tokens"]) == (1, 1, 100, 7)
    store.delete_user("u1")
    assert store.usage("u1")["stages"] == {} and store.cache.size("u1") == 0 and store.cache.size("u2") == 1


def test_missing_usage_metadata_is_estimated_and_flagged():
    store = LLMStore(None)
    store.client(ScriptedChatModel(replies=["three word reply"], usage=False), CFG).complete(REQ)
    usage = store.usage("default")["stages"]["intent"]
    assert usage["estimated_calls"] == 1 and usage["completion_tokens"] == 3 and usage["prompt_tokens"] > 0


def test_transient_errors_back_off_exponentially_then_succeed():
    sleeps = []
    model = ScriptedChatModel(replies=[HTTPError(429), HTTPError(503), TimeoutError("slow"), "ok"])
    client = LLMClient(model, CFG.with_overrides(llm_backoff_seconds=1.0), sleep=sleeps.append)
    assert client.complete(REQ) == "ok"
    assert len(sleeps) == 3 and 1.0 <= sleeps[0] < 1.2 and 2.0 <= sleeps[1] < 2.4 and 4.0 <= sleeps[2] < 4.8


def test_attempts_are_bounded_and_client_errors_are_not_retried():
    model = ScriptedChatModel(replies=[HTTPError(500)] * 10)
    store = LLMStore(None)
    with pytest.raises(LLMUnavailable):
        store.client(model, CFG.with_overrides(llm_call_attempts=3)).complete(REQ)
    assert len(model.calls) == 3
    assert store.usage("default")["stages"]["intent"]["failures"] == 1
    bad_request = ScriptedChatModel(replies=[HTTPError(400), "never"])
    with pytest.raises(LLMUnavailable):
        LLMClient(bad_request, CFG).complete(REQ)
    assert len(bad_request.calls) == 1


def test_empty_replies_are_not_cached():
    store = LLMStore(None)
    model = ScriptedChatModel(replies=["", "now"])
    client = store.client(model, CFG)
    assert client.complete(REQ) == "" and client.complete(REQ) == "now"


# --- scheduler -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_index():
    mem = MemCompile(None, dense=False)
    mem.add_turns(demo_turns(), user_id="demo")
    state = mem.query_graph.invoke({"query": "What did Tom adopt and when?"}, context=mem.context("demo"))
    return mem.index("demo"), state["intent"], state["pool"]


def scheduler_with(replies, cfg=CFG):
    counts = []
    model = ScriptedChatModel(replies=list(replies), default="{}")
    sched = LLMScheduler(LLMClient(model, cfg), cfg, DeterministicScheduler(cfg), lambda u, c: counts.append(c))
    return sched, model, counts


def test_valid_schedule_is_taken_as_ranked(demo_index):
    index, intent, pool = demo_index
    inp = ScheduleInput("q", intent, index, pool)
    sched, model, counts = scheduler_with([reversed_k])
    got = sched.schedule(inp, 4)
    expected = [p.packet_id for p in pool][::-1][:4]
    assert got == expected and len(model.calls) == 1 and counts == []


def test_invalid_schedule_is_retried_with_a_schema_correction(demo_index):
    index, intent, pool = demo_index
    inp = ScheduleInput("q", intent, index, pool)
    dup = json.dumps({"ranked_candidate_ids": ["C001", "C001", "C002"]})
    sched, model, counts = scheduler_with([dup, first_k])
    got = sched.schedule(inp, 3)
    assert got == [p.packet_id for p in pool[:3]]
    assert len(model.calls) == 2
    retry = model.calls[1]
    assert (
        retry[2].content == dup
        and "C001 appears more than once" in retry[3].content
        and "exactly 3" in retry[3].content
    )
    assert counts == [{"llm_schedule_retries": 1}]


def test_partial_labels_are_kept_and_the_rest_is_filled_in_a_new_round(demo_index):
    index, intent, pool = demo_index
    k = 5
    inp = ScheduleInput("q", intent, index, pool)
    partial = json.dumps({"ranked_candidate_ids": ["C004", "C004", "C999", "C002"]})
    sched, model, counts = scheduler_with([partial] * 4 + [first_k])
    got = sched.schedule(inp, k)
    assert len(model.calls) == 5  # 1 + 3 retries, then one fill round
    ids = [p.packet_id for p in pool]
    remaining = [p for p in ids if p not in (ids[3], ids[1])]
    assert got == [ids[3], ids[1], *remaining[:3]]
    fill = model.calls[4][1].content
    assert len(labels_in(model.calls[4])) == len(pool) - 2 and "Return exactly 3 distinct labels" in fill
    assert counts == [{"llm_schedule_retries": 3, "llm_schedule_rounds": 1}]


def test_a_model_that_never_complies_falls_back_to_the_deterministic_scheduler(demo_index):
    index, intent, pool = demo_index
    inp = ScheduleInput("q", intent, index, pool)
    sched, model, counts = scheduler_with(["not json"] * 10)
    got = sched.schedule(inp, 6)
    assert got == DeterministicScheduler(CFG).schedule(inp, 6)
    assert len(model.calls) == 4 and counts == [{"llm_schedule_retries": 3, "llm_schedule_fallback": 1}]
    down, model, counts = scheduler_with([HTTPError(401)])
    assert down.schedule(inp, 6) == got and counts == [{"llm_schedule_unavailable": 1, "llm_schedule_fallback": 1}]


def test_schedule_cardinality_is_capped_by_the_pool(demo_index):
    index, intent, pool = demo_index
    small = pool[:3]
    sched, model, _ = scheduler_with([first_k])
    got = sched.schedule(ScheduleInput("q", intent, index, small), 10)
    assert got == [p.packet_id for p in small] and k_in(model.calls[0]) == 3


def test_frontier_ranks_the_first_k_r_and_orders_the_whole_window(demo_index):
    index, intent, pool = demo_index
    window = [p.packet_id for p in pool][:8]
    anchors = window[:4]
    sched, model, _ = scheduler_with([reversed_k])
    order = sched.frontier(ScheduleInput("q", intent, index, pool), anchors, window)
    assert order[:5] == window[::-1][:5] and sorted(order) == sorted(window) and len(set(order)) == len(order)
    assert k_in(model.calls[0]) == CFG.frontier_rank_cutoff and model.calls[0][0].content == SYSTEMS["frontier"]


# --- extraction, intent and the facade -----------------------------------------------------------------------


def test_extraction_falls_back_per_item_and_counts_it(tmp_path):
    def reply(messages):
        if messages[0].content == FACT_SYSTEM:
            return (
                "[1, 2]"
                if "Biscuit" in messages[1].content.split("Current turn:")[1]
                else json.dumps(["A fact from the model."])
            )
        return '{"people": "wrong type"}'

    model = ScriptedChatModel(default=reply)
    mem = MemCompile(tmp_path, llm=model, config=CFG, dense=False)
    counts = mem.add_turns(demo_turns()[:3], user_id="demo")
    assert counts["stored"] == 3
    index = mem.index("demo")
    claims = {d.dia_id: [x.claim for x in index.by_packet[index.by_dia[d.dia_id]]] for d in index.descriptors}
    assert claims["D1:1"] == ["A fact from the model."]
    assert any("Biscuit" in c for c in claims["D1:2"])  # the heuristic's facts, never a lost turn
    counters = mem.stats("demo")["counters"]
    assert counters["llm_fact_fallback"] == 1 and counters["llm_metadata_fallback"] == len(index.descriptors)


def test_facade_answers_accounts_and_forgets(tmp_path):
    model = ScriptedChatModel(
        default=router(
            fact=lambda m: json.dumps([re.search(r'text: "(.*)"', m[1].content.split("Current turn:")[1]).group(1)]),
            metadata='{"people": [], "keywords": ["dog"], "time": ["", ""]}',
            intent='{"need_attribute": false, "people": ["Tom"], "keywords": ["dog"], "time": null}',
            schedule=first_k,
            frontier=first_k,
            answer_temporal="4 March 2024",
            answer="a beagle named Biscuit",
        )
    )
    mem = MemCompile(tmp_path, llm=model, config=CFG, dense=False)
    mem.add_turns(demo_turns(), user_id="demo")
    answer, ctx = mem.answer("What kind of dog did Tom adopt?", user_id="demo")
    assert answer == "a beagle named Biscuit" and ctx.packets
    when, _ = mem.answer("When did Tom adopt the dog?", user_id="demo")
    assert when == "4 March 2024"  # temporal intent -> temporal prompt
    stats = mem.stats("demo")
    assert {"fact", "metadata", "intent", "schedule", "answer"} <= set(stats["usage"]["stages"])
    assert stats["usage"]["construction"]["calls"] == 2 * len(demo_turns()) and stats["usage"]["query"]["calls"] >= 6
    mem.forget("demo")
    assert mem.usage("demo")["stages"] == {} and mem.engine.llm_store.cache.size("demo") == 0
    with pytest.raises(ValueError, match="no LLM"):
        MemCompile(None, dense=False).answer("q?")


def test_intent_falls_back_to_the_offline_intent():
    model = ScriptedChatModel(default=router(intent='```json\n{"people": 7}\n```'))
    mem = MemCompile(None, llm=model, config=CFG, dense=False)
    intent = mem.engine.intent("When did Tom adopt Biscuit?", ["Tom"], "u")
    assert intent.people == ("Tom",) and intent.temporal
    assert mem.engine.records.counters("u") == {"llm_intent_fallback": 1}
    assert len(model.calls) == 2  # one correction retry


def test_answer_and_judge_functions():
    model = ScriptedChatModel(replies=["Biscuit", "", '{"label": "CORRECT"}', "no idea", "still no idea"])
    assert generate_answer(model, "Dog's name?", "[D1:2] Tom | ...", temporal=True) == "Biscuit"
    assert model.calls[0][0].content == ANSWER_TEMPORAL_SYSTEM and "Dog's name?" in model.calls[0][1].content
    assert generate_answer(model, "Dog's name?", "ctx", temporal=False) == "Unknown"
    assert judge_answer(model, "q", "Biscuit", "Biscuit") is True
    assert judge_answer(model, "q", "Biscuit", "Rex") is False  # unreadable twice -> WRONG


@pytest.mark.slow  # a subprocess or a whole store build per case
def test_offline_path_never_imports_openai():
    code = (
        "import sys; from memcompile_langgraph import MemCompile; from memcompile_langgraph.cli import build_parser; "
        "build_parser(); m = MemCompile(None, dense=False); m.add_turns([{'speaker': 'A', 'text': 'I like tea.'}]); "
        "m.compile('tea?'); bad = [n for n in sys.modules if n.split('.')[0] in ('openai', 'langchain_openai')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
