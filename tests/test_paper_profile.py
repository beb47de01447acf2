"""The `paper` profile (MemCompileConfig.paper()): every choice as the paper makes it, checked against the default.

Model paths run through ChatOpenAI against the loopback OpenAI-compatible openai_server (tests/support/openai_server.py)."""

import json
import logging
import math
import re
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.address.candidates import bm25_top, candidate_union
from memcompile_langgraph.address.routing import route
from memcompile_langgraph.cli import main
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.config import PAPER_CHOICES
from memcompile_langgraph.evidence.mmr import DeterministicScheduler, mmr_select, offline_anchors
from memcompile_langgraph.evidence.normalize import normalize
from memcompile_langgraph.evidence.render import fit_context
from memcompile_langgraph.evidence.scheduler import ScheduleInput
from memcompile_langgraph.index.user import UserIndex
from memcompile_langgraph.llm.models import chat_model
from memcompile_langgraph.llm.table6 import SamplingParametersError
from memcompile_langgraph.model import Descriptor, Intent, PacketScore, SourcePacket

MODEL = "fake-model"
QUESTION = "What kind of dog did Tom adopt and what is its name?"
FAST = {"llm_backoff_seconds": 0.01, "llm_call_attempts": 2}
LOCOMO_MINI = str(Path(__file__).parent / "data" / "locomo_mini.json")


def test_paper_sets_exactly_the_documented_deviations():
    paper, default = MemCompileConfig.paper(), MemCompileConfig()
    differ = {k for k, v in paper.to_dict().items() if v != getattr(default, k)}
    assert differ == set(PAPER_CHOICES) and paper.profile == "paper" and default.profile == "default"
    assert MemCompileConfig.profile_named("paper") == paper and MemCompileConfig.paper(k0=5).k0 == 5
    with pytest.raises(ValueError, match="unknown profile 'papers'"):
        MemCompileConfig.profile_named("papers")


# --- the scheduler's closed pool --------------------------------------------------------------------------


def expected_u_q(mem: MemCompile, user: str, question: str) -> list[PacketScore]:
    """U_q recomputed from the address plane's pure functions (Eq. 6-10)."""
    index = mem.index(user)
    intent = mem.engine.intent(question, list(index.people), user)  # the model's intent, from the reply cache
    hits = bm25_top(index, intent, mem.config)
    seeds = [index.layout.of_descriptor[index.descriptors[pos].descriptor_id] for pos, _ in hits[:8]]
    cands = candidate_union(index, intent, hits, route(index.layout, intent, seeds, mem.config), mem.config)
    return normalize(cands, index.layout.of_descriptor)


def request_dia_ids(body: dict) -> list[str]:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return re.findall(r"^\[C\d+\] dia_id=(\S+) ", user, re.M)


def test_paper_scheduler_request_lists_u_q_complete_in_eq10_order(openai_server, tmp_path, embeddings):
    cfg = MemCompileConfig.paper(pool_budget=3, **FAST)  # a budget the paper path must not apply
    mem = MemCompile(
        tmp_path / "paper", embeddings=embeddings, llm=chat_model(MODEL, openai_server.base_url), config=cfg
    )
    mem.add_turns(demo_turns(), user_id="demo")
    before = openai_server.count("schedule")
    mem.compile(QUESTION, user_id="demo")
    sent = request_dia_ids(openai_server.of("schedule")[before])
    u_q = expected_u_q(mem, "demo", QUESTION)
    index = mem.index("demo")
    assert sent == [index.packets[p.packet_id].dia_id for p in u_q] and len(sent) > cfg.pool_budget
    keys = [(-p.score, p.first_position, p.packet_id) for p in u_q]
    assert keys == sorted(keys)  # Eq. 10 order: score, then first candidate position, then packet id
    mem.close()

    default = MemCompile(
        tmp_path / "default",
        embeddings=embeddings,
        llm=chat_model(MODEL, openai_server.base_url),
        config=MemCompileConfig(pool_budget=3, **FAST),
    )
    default.add_turns(demo_turns(), user_id="demo")
    before = openai_server.count("schedule")
    default.compile(QUESTION, user_id="demo")
    assert (
        len(request_dia_ids(openai_server.of("schedule")[before])) == 3
    )  # the default's fused pool, cut to its budget
    default.close()


# --- factless turns -----------------------------------------------------------------------------------------

WHEN = "1:00 pm on 8 May, 2023"
TURNS = [
    {"speaker": "Tom", "text": "Hi Priya!", "time": WHEN, "session": 1},
    {"speaker": "Priya", "text": "I started a pottery class last week.", "time": WHEN, "session": 1},
    {"speaker": "Tom", "text": "Thanks!", "time": WHEN, "session": 1},
]
FACT = "Priya started a pottery class in the week before 8 May 2023."


def claims_of(mem: MemCompile, user: str) -> dict[str, list[str]]:
    index = mem.index(user)
    return {index.packets[p].dia_id: [d.claim for d in index.by_packet[p]] for p in index.packet_order}


@pytest.mark.parametrize("config, factless", [(MemCompileConfig.paper(), False), (MemCompileConfig(), True)])
def test_factless_turn_keeps_no_descriptor_under_paper_offline(config, factless):
    mem = MemCompile(None, config=config, dense=False)
    counts = mem.add_turns(TURNS, user_id="u")
    claims = claims_of(mem, "u")
    assert bool(claims["D1:1"]) is factless and bool(claims["D1:3"]) is factless and claims["D1:2"]
    assert counts.get("factless_turns", 0) == (0 if factless else 2)
    assert counts.get("fallback_claims", 0) == (2 if factless else 0)
    index = mem.index("u")
    block = fit_context(index, [index.by_dia["D1:1"]]).text()  # Eq. 15: retained claims only, so the header alone
    assert block.count("\n") == (1 if factless else 0) and block.startswith("[D1:1] Tom |")
    mem.close()


def test_factless_turn_from_the_model_keeps_no_descriptor_under_paper(openai_server):
    openai_server.script("fact", "[]", json.dumps([FACT]), "[]")
    cfg = MemCompileConfig.paper(llm_concurrency=1, **FAST)
    mem = MemCompile(None, llm=chat_model(MODEL, openai_server.base_url), config=cfg, dense=False)
    mem.add_turns(TURNS, user_id="u")
    assert claims_of(mem, "u") == {"D1:1": [], "D1:2": [FACT], "D1:3": []}
    assert openai_server.count("metadata") == 1  # no metadata request for a turn without facts
    assert mem.compile("When did Priya start the pottery class?", user_id="u").packets  # the store still answers
    mem.close()


# --- A2/A3 anchors: the App. B.3 MMR ---------------------------------------------------------------------------


def hand_index(same_cell: bool) -> tuple[UserIndex, list[PacketScore]]:
    """Three packets: A and B say nearly the same thing (claim-term Jaccard 4/5), C something else."""
    index = UserIndex("u", MemCompileConfig.paper())
    claims = {
        "A": "Tom adopted a beagle puppy.",
        "B": "Tom adopted a beagle puppy from the shelter.",
        "C": "Caroline takes a pottery class.",
    }
    cells = {"A": "c1", "B": "c2", "C": "c1" if same_cell else "c3"}
    for seq, (pid, claim) in enumerate(claims.items()):
        dia = f"D1:{seq + 1}"
        index.add_packet(
            SourcePacket(
                packet_id=pid,
                user_id="u",
                dia_id=dia,
                speaker="Tom",
                session=1,
                session_label="s1",
                session_time=None,
                session_time_raw="",
                text=claim,
                seq=seq,
                content_hash=pid,
            )
        )
        descriptor = Descriptor(f"{pid}:000", pid, claim, dia, "Tom", 1, None, (), (), "", "", 6, seq)
        index.layout.place(descriptor, cells[pid])
        index.register([descriptor])
    # U_q in Eq. 10 order (score, support): A (1.0, 1.0), B (0.95, 1.9), C (0.6, 0.6)
    pool = [
        PacketScore("A", 1.0, "A:000", 0, 1.0, ("c1",)),
        PacketScore("B", 0.95, "B:000", 1, 1.9, ("c2",)),
        PacketScore("C", 0.6, "C:000", 2, 0.6, (cells["C"],)),
    ]
    return index, pool


@pytest.mark.parametrize("same_cell, expected", [(False, ["A", "C"]), (True, ["A", "B"])])
def test_a2_a3_anchors_are_the_app_b3_mmr_by_hand(same_cell, expected):
    # rel = s + 0.10 log(1 + support): A 1.0693, B 1.0565, C 0.6470. After A: B pays 0.58 * 4/5 = 0.464 of overlap
    # (0.5925); C pays nothing (0.6470), or 0.08 for sharing A's Cell (0.5670)
    rel_b = 0.95 + 0.10 * math.log(2.9) - 0.58 * 0.8
    rel_c = 0.6 + 0.10 * math.log(1.6) - (0.08 if same_cell else 0.0)
    assert (rel_c > rel_b) is (expected == ["A", "C"])
    index, pool = hand_index(same_cell)
    inp = ScheduleInput("q", Intent(query="q", terms=("tom",)), index, pool)
    for switches in ({"use_scheduler": False, "use_frontier": False}, {"use_scheduler": False}):  # A2, A3
        cfg = MemCompileConfig.paper(**switches)
        assert offline_anchors(inp, 2, cfg) == expected == mmr_select(inp, 2, cfg)
        assert DeterministicScheduler(cfg).schedule(inp, 2) == expected  # the LLM scheduler's fill too
    assert offline_anchors(inp, 2, MemCompileConfig()) == ["A", "B"]  # the default: the (fused) pool's top-K0


def test_paper_a3_query_anchors_are_mmr_over_u_q(embeddings):
    cfg = MemCompileConfig.paper(use_scheduler=False)
    mem = MemCompile(None, embeddings=embeddings, config=cfg)
    mem.add_turns(demo_turns(), user_id="demo")
    ctx = mem.compile(QUESTION, user_id="demo")
    anchors = [p.packet_id for p in ctx.packets if p.source == "anchor"]
    index = mem.index("demo")
    inp = ScheduleInput(
        QUESTION, mem.engine.intent(QUESTION, list(index.people), "demo"), index, expected_u_q(mem, "demo", QUESTION)
    )
    assert anchors == mmr_select(inp, cfg.k0, cfg) and anchors
    assert [p.packet_id for p in ctx.packets] == anchors  # offline, the paper has no frontier (A2's path)
    mem.close()


# --- Table 6 sampling parameters ---------------------------------------------------------------------------------


def sent_parameters(body: dict) -> tuple:
    return body.get("temperature"), body.get("max_completion_tokens", body.get("max_tokens"))


def test_paper_applies_table6_sampling_parameters_to_a_users_model(openai_server, caplog):
    own = chat_model(MODEL, openai_server.base_url, temperature=0.7, max_tokens=None)
    mem = MemCompile(None, llm=own, config=MemCompileConfig.paper(**FAST), dense=False)
    mem.add_turns(TURNS[1:2], user_id="u")
    mem.compile("What class did Priya start?", user_id="u")
    for call_type in ("fact", "metadata", "intent", "schedule"):
        assert {sent_parameters(b) for b in openai_server.of(call_type)} == {(0.0, 2048)}, call_type
    assert own.temperature == 0.7  # the caller's model object is left as it was
    mem.close()

    with caplog.at_level(logging.WARNING):
        mem = MemCompile(None, llm=own, config=MemCompileConfig(**FAST), dense=False)
    assert "temperature 0.7 (Table 6: 0.0), max_tokens None (Table 6: 2048)" in caplog.text  # the default says so
    before = len(openai_server.requests)
    mem.add_turns(TURNS[:1], user_id="u")
    assert {sent_parameters(r["body"]) for r in openai_server.requests[before:]} == {
        (0.7, None)
    }  # and keeps its parameters
    mem.close()


def test_paper_refuses_a_model_whose_sampling_parameters_it_cannot_set():
    model = FakeListChatModel(responses=["[]"])
    refusal = r"no temperature or max_tokens parameter to set.*temperature None \(Table 6: 0.0\)"
    with pytest.raises(SamplingParametersError, match=refusal):
        MemCompile(None, llm=model, config=MemCompileConfig.paper(), dense=False)
    MemCompile(None, llm=model, dense=False).close()  # the default runs it with its own sampling parameters


@pytest.mark.parametrize(
    "build",
    [
        lambda: MemCompileConfig(llm_table6_settings=True),
        lambda: MemCompileConfig.paper(llm_table6_settings=False),
        lambda: MemCompileConfig().with_overrides(llm_table6_settings=True),
    ],
)
def test_the_old_keyword_of_table6_sampling_names_its_new_name(build):
    with pytest.raises(TypeError) as raised:
        build()
    assert str(raised.value) == "MemCompileConfig has no 'llm_table6_settings': it is called 'llm_table6_sampling' now"
    assert MemCompileConfig.paper().llm_table6_sampling and not MemCompileConfig().llm_table6_sampling


# --- the CLI --------------------------------------------------------------------------------------------------


def test_eval_profile_paper_offline_runs_a2_and_names_the_profile(tmp_path, embeddings, capsys):
    out = tmp_path / "paper"
    assert main(["eval", "locomo", LOCOMO_MINI, "--out", str(out), "--profile", "paper", "--quiet"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["profile"] == "paper" and report["config"]["variant"] == "A2"
    assert report["config"]["config"]["fusion"] is False and report["overall"]["questions"] > 0
    assert report["config"]["config"]["spread_depth"] == 0  # settled: the spread is a step of the fused order
    assert (out / "stores" / "offline-no-factless-claims").is_dir()  # never shares a store with the default build
    assert "- profile: paper; setting: A2" in (out / "report.md").read_text()
    assert capsys.readouterr().out.startswith("profile paper, A2:")


@pytest.mark.slow
def test_eval_profile_paper_through_the_model_server(openai_server, tmp_path, embeddings):
    out = tmp_path / "llm"
    args = [
        "eval",
        "locomo",
        LOCOMO_MINI,
        "--out",
        str(out),
        "--profile",
        "paper",
        "--samples",
        "mini-1",
        "--llm-model",
        MODEL,
        "--llm-base-url",
        openai_server.base_url,
        "--quiet",
    ]
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["profile"] == "paper" and report["config"]["variant"] == "A0"
    assert openai_server.count("schedule") >= report["overall"]["questions"] > 0 and openai_server.count("frontier") > 0
    assert {sent_parameters(r["body"]) for r in openai_server.requests} == {(0.0, 2048)}


def test_ingest_and_query_take_the_profile(tmp_path, capsys):
    turns = tmp_path / "turns.jsonl"
    turns.write_text("\n".join(json.dumps(t) for t in TURNS))
    store = str(tmp_path / "store")
    assert main(["ingest", str(turns), "--store", store, "--user", "u", "--profile", "paper", "--quiet"]) == 0
    assert "stored 3 turns, 1 descriptors" in capsys.readouterr().out
    assert main(["query", "pottery class", "--store", store, "--user", "u", "--profile", "paper"]) == 0
    assert "[D1:2] Priya" in capsys.readouterr().out


# --- fixes shared by both profiles -----------------------------------------------------------------------------


@pytest.mark.parametrize("polarity", ["negative", "positive", "unknown"])
def test_inconsistency_reads_the_claims_negation_marker_not_the_models_polarity(polarity):
    from memcompile_langgraph.extract.base import TurnWindow
    from memcompile_langgraph.ingest.build import make_descriptors
    from memcompile_langgraph.llm.validation import parse_metadata

    p = SourcePacket(
        packet_id="p",
        user_id="u",
        dia_id="D1:1",
        speaker="Tom",
        session=1,
        session_label="s1",
        session_time=None,
        session_time_raw="",
        text="x",
        seq=0,
        content_hash="p",
    )
    window = TurnWindow(packet=p, previous=None, known_people=["Tom"])
    reply = json.dumps({"people": ["Tom"], "keywords": ["Cat"], "time": ["", ""], "event": {"polarity": polarity}})
    facts = ["Tom did not adopt the cat.", "Tom adopted the cat."]
    meta = parse_metadata(reply, window, MemCompileConfig())
    assert meta.keywords == ("cat",)  # lowercased as the heuristic's are
    descriptors = make_descriptors(window, facts, [meta, meta], 0)
    assert [d.negated for d in descriptors] == [True, False]  # App. B.2: the marker in the text


def test_dense_cutoff_ties_keep_storage_order():
    from memcompile_langgraph.address.dense import top
    from memcompile_langgraph.index.vectors import PacketVectors

    pv = PacketVectors(dim=2)
    ids = [f"p{i:03d}" for i in range(300)]  # every 7th packet has cosine 0.5, all others tie at 1.0
    pv.set(ids, [[0.5, 0.75**0.5] if i % 7 == 0 else [1.0, 0.0] for i in range(300)])
    tied = [pid for i, pid in enumerate(ids) if i % 7]
    assert [h.packet_id for h in top(pv, [1.0, 0.0], 10)] == tied[:10]  # argpartition alone picked from p191 on
    assert [h.packet_id for h in top(pv, [1.0, 0.0], 300)] == tied + ids[::7]
