"""The engine end to end: store round-trips, idempotent ingest, isolation, graphs, ablation switches."""

import json

import pytest

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.query_graph import STAGES


@pytest.fixture(scope="module")
def store(tmp_path_factory, embeddings):
    path = tmp_path_factory.mktemp("store")
    mem = MemCompile(path, embeddings=embeddings)
    counts = mem.add_turns(demo_turns(), user_id="demo")
    assert counts["stored"] == len(demo_turns())
    mem.close()
    return path


def test_reopened_store_answers_like_the_original(store, embeddings):
    a = MemCompile(store, embeddings=embeddings)
    ctx = a.compile("Where does Priya work now?", user_id="demo")
    assert ctx.packets and "Northwind" in ctx.text
    assert len({p.packet_id for p in ctx.packets}) == len(ctx.packets) <= 12
    for p in ctx.packets:
        assert f"[{p.dia_id}]" in ctx.text
    stats = a.stats("demo")
    assert stats["packets"] == len(demo_turns()) == stats["vectors"]
    assert stats["descriptors"] >= stats["packets"] and stats["cells"] >= 1


def test_reingest_adds_nothing(store, embeddings):
    mem = MemCompile(store, embeddings=embeddings)
    before = mem.stats("demo")
    counts = mem.add_turns(demo_turns(), user_id="demo")
    assert counts["stored"] == 0 and counts["already_stored"] == len(demo_turns())
    assert mem.stats("demo")["descriptors"] == before["descriptors"]


def test_index_replayed_from_store_equals_the_built_one(store, embeddings):
    fresh = MemCompile(None, embeddings=embeddings)
    fresh.add_turns(demo_turns(), user_id="demo")
    built = fresh.index("demo")
    loaded = MemCompile(store, embeddings=embeddings).index("demo")
    assert [d.claim for d in built.descriptors] == [d.claim for d in loaded.descriptors]
    assert dict(built.layout.of_descriptor) == dict(loaded.layout.of_descriptor)
    assert {c: x.title for c, x in built.layout.cells.items()} == {c: x.title for c, x in loaded.layout.cells.items()}


def test_users_are_isolated(embeddings):
    mem = MemCompile(None, embeddings=embeddings)
    mem.add_turns([{"speaker": "Ann", "text": "My cat Miso loves tuna.", "time": "2024-01-02"}], user_id="ann")
    mem.add_turns([{"speaker": "Bob", "text": "I repaired my bicycle.", "time": "2024-01-03"}], user_id="bob")
    ctx = mem.compile("What does the cat love?", user_id="bob")
    assert all(p.speaker == "Bob" for p in ctx.packets)
    assert "Miso" not in ctx.text
    assert mem.compile("anything at all", user_id="nobody").packets == []


def test_assigned_dia_ids_and_sessions_follow_dates(embeddings):
    mem = MemCompile(None, embeddings=embeddings)
    mem.add_turns(
        [
            {"speaker": "A", "text": "We moved to Oslo.", "time": "2024-02-01T10:00"},
            {"speaker": "B", "text": "Nice, how is the weather?", "time": "2024-02-01T10:01"},
            {"speaker": "A", "text": "Cold but sunny.", "time": "2024-02-09T18:00"},
        ],
        user_id="u",
    )
    index = mem.index("u")
    assert [index.packets[p].dia_id for p in index.packet_order] == ["D1:1", "D1:2", "D2:1"]
    assert index.packets[index.by_dia["D2:1"]].session_time == "2024-02-09T18:00:00"


def test_resent_history_does_not_shift_the_sessions_of_new_turns():
    days = ["2024-02-01", "2024-02-03", "2024-02-07"]
    history = [
        {"speaker": "AB"[i % 2], "text": f"turn {i} on {d}", "time": f"{d}T10:0{i}"} for d in days for i in range(3)
    ]
    later = [
        {"speaker": "A", "text": "a new day", "time": "2024-02-10T09:00"},
        {"speaker": "B", "text": "indeed", "time": "2024-02-10T09:01"},
    ]
    grown = MemCompile(None, dense=False)
    grown.add_turns(history, "u")
    assert grown.add_turns(history + later, "u")["already_stored"] == len(
        history
    )  # the file re-sent with two more turns
    at_once = MemCompile(None, dense=False)
    at_once.add_turns(history + later, "u")
    sessions = lambda mem: sorted((p.dia_id, p.session) for p in mem.index("u").packets.values())  # noqa: E731
    assert sessions(grown) == sessions(at_once) and sessions(grown)[-2:] == [("D4:1", 4), ("D4:2", 4)]


def test_query_graph_has_every_stage_and_trace(store, embeddings):
    mem = MemCompile(store, embeddings=embeddings)
    mermaid = mem.query_graph.get_graph().draw_mermaid()
    for stage in STAGES:
        assert stage in mermaid
    ctx = mem.compile("When did Tom start the pottery class?", user_id="demo")
    assert set(STAGES) <= set(ctx.trace)
    assert all(ctx.trace[s]["ms"] >= 0 for s in STAGES)
    assert ctx.packets[0].dia_id == "D2:1"


def test_no_embedding_model_leaves_dense_empty():
    mem = MemCompile(None, dense=False)
    mem.add_turns(demo_turns(), user_id="demo")
    ctx = mem.compile("What kind of dog did Tom adopt?", user_id="demo")
    assert ctx.trace["dense"]["hits"] == 0 and ctx.packets
    assert "beagle" in ctx.text


@pytest.mark.parametrize(
    "overrides",
    [
        dict(use_frontier=False),
        dict(use_scheduler=False),
        dict(use_cells=False),
        dict(use_bm25_candidates=False),
        dict(use_intent=False),
        dict(dense_only=True),
    ],
)
def test_ablation_switches_keep_the_contract(store, embeddings, overrides):
    mem = MemCompile(store, embeddings=embeddings, config=MemCompileConfig(**overrides))
    ctx = mem.compile("What kind of dog did Tom adopt?", user_id="demo")
    ids = [p.packet_id for p in ctx.packets]
    assert 0 < len(ids) == len(set(ids)) <= 12
    if overrides.get("use_frontier") is False:
        assert all(p.source == "anchor" for p in ctx.packets)


@pytest.mark.slow
def test_locomo_conversation_end_to_end(locomo_samples, embeddings, tmp_path):
    from memcompile_langgraph.ingest.loaders import locomo_turns

    sample = locomo_samples[0]
    turns = locomo_turns(sample["conversation"])
    mem = MemCompile(tmp_path, embeddings=embeddings)
    counts = mem.add_turns(turns, user_id=sample["sample_id"])
    stats = mem.stats(sample["sample_id"])
    assert counts["stored"] == stats["packets"] == len(turns)
    assert stats["descriptors"] >= 0.8 * len(turns) and stats["cells"] > 0
    hits = 0
    for qa in sample["qa"][:40]:
        ctx = mem.compile(qa["question"], user_id=sample["sample_id"])
        dia = [p.dia_id for p in ctx.packets]
        assert len(dia) == len(set(dia)) <= 12
        assert all(f"[{d}]" in ctx.text for d in dia)
        hits += any(e in dia for e in qa.get("evidence", []))
    assert hits >= 20  # far above chance (12 of ~400 turns)
    json.dumps(ctx.trace)
