"""The hot paths at scale: a query meets the packet matrix once per query vector, and packetize works from counts
kept incrementally in the index (they must agree with a reload after deletes and further adds)."""

from collections import Counter

import numpy as np
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.address import dense
from memcompile_langgraph.address.dense import query_similarities, top, top_from
from memcompile_langgraph.cli.demo_data import QUESTIONS, demo_turns
from memcompile_langgraph.evidence.fusion import fused_scores
from memcompile_langgraph.evidence.normalize import normalize
from memcompile_langgraph.evidence.pool import closed_pool
from memcompile_langgraph.index.persistent import plain
from memcompile_langgraph.index.vectors import PacketVectors
from memcompile_langgraph.ingest.build import packetize

LATER = [
    {"speaker": "Ann", "text": "late line about kayaks", "time": "9 March 2024"},  # continues session 3
    {"speaker": "Bob", "text": "b line 2 about kayaks", "time": "5 March 2024"},  # already stored (no dia id)
    {"speaker": "Ann", "text": "a line 2 about kayaks", "time": "4 March 2024", "dia_id": "D1:3"},  # its id was freed
    {"speaker": "Ann", "text": "something else", "time": "4 March 2024", "dia_id": "D1:1"},  # id taken by another turn
    {"speaker": "Bob", "text": "a new day", "time": "20 March 2024"},  # opens a session
    {"speaker": "Bob", "text": "a new day", "time": "20 March 2024"},  # repeated: already stored
    {"speaker": "Ann", "text": "given session", "session": 2},  # numbered after session 2's surviving turns
    {"speaker": "Ann", "text": ""},  # counted skip
    {"speaker": "Bob", "text": "another new day", "time": "21 March 2024"},
]
NEXT = [
    {"speaker": "Bob", "text": "same day again", "time": "21 March 2024"},
    {"speaker": "Ann", "text": "into session 3", "session": 3},
    {"speaker": "Ann", "text": "into session 3", "session": 3},  # said twice: two turns (issue 13, family 5)
    {"speaker": "Ann", "text": "late line about kayaks", "time": "9 March 2024"},  # stored in an earlier call
    {"speaker": "Bob", "text": "one more", "time": "22 March 2024", "dia_id": "D6:1"},  # taken
]


def built(path) -> MemCompile:
    mem = MemCompile(path, dense=False)
    for tag, day in zip("abc", ("4 March 2024", "5 March 2024", "9 March 2024")):
        mem.add_turns(
            [
                {"speaker": "Ann" if i % 2 else "Bob", "text": f"{tag} line {i} about kayaks", "time": day}
                for i in range(5)
            ],
            user_id="u",
        )
    assert mem.delete_turns("u", ["D1:3", "D2:5", "D3:1"]) == 3
    return mem


def index_fields(index) -> dict:
    return {
        "packets": plain(index.packets),
        "order": plain(index.packet_order),
        "by_dia": plain(index.by_dia),
        "hashes": plain(index.hashes),
        "sessions": index.sessions,
        "session_packets": index.session_packets,
        "last_session": index.last_session,
    }


def test_incremental_counts_agree_with_a_reload_after_deletes_and_adds(tmp_path):
    mem = built(tmp_path)
    totals = Counter()
    for turn in LATER:  # the cached index is extended in place, call after call
        totals.update(mem.add_turns([turn], user_id="u"))
    live = mem.index("u")
    reloaded = MemCompile(tmp_path, dense=False).index("u")
    assert live is not reloaded and index_fields(live) == index_fields(reloaded)
    assert live.session_packets == Counter(p.session for p in live.packets.values())
    assert {k: totals[k] for k in ("stored", "already_stored", "skipped_duplicate_dia_id", "skipped_empty_text")} == {
        "stored": 5,
        "already_stored": 2,
        "skipped_duplicate_dia_id": 1,
        "skipped_empty_text": 1,
    }
    # numbered past the surviving turns of a session; a freed id is taken again
    assert [live.packets[pid].dia_id for pid in live.packet_order[-5:]] == ["D3:6", "D1:3", "D5:1", "D2:5", "D6:1"]
    assert live.last_session == 6
    again, fresh = packetize(NEXT, live, "u"), packetize(NEXT, reloaded, "u")
    assert again.packets == fresh.packets and again.counts == fresh.counts
    assert [p.dia_id for p in again.packets] == ["D6:2", "D3:7", "D3:8"] and again.counts["already_stored"] == 1
    assert (
        again.counts["skipped_duplicate_dia_id"] == 1 and live.session_packets[3] == 5
    )  # packetize only reads the index


@pytest.fixture(scope="module")
def demo(embeddings):
    mem = MemCompile(None, embeddings=embeddings)
    mem.add_turns(demo_turns(), user_id="u")
    return mem


def run_stages(mem: MemCompile, query: str) -> dict:
    """Each stage's own update, including what passes between stages only."""
    updates = {}
    for chunk in mem.query_graph.stream({"query": query}, stream_mode="updates", context=mem.context("u")):
        updates.update(chunk)
    return updates


def count_similarities(monkeypatch) -> list:
    calls = []
    original = dense.similarities

    def counted(vectors, query):
        calls.append(1)
        return original(vectors, query)

    monkeypatch.setattr(dense, "similarities", counted)
    return calls


@pytest.mark.parametrize("query", QUESTIONS)
def test_each_query_vector_meets_the_matrix_once_and_scores_stay_identical(demo, monkeypatch, query):
    calls = count_similarities(monkeypatch)
    stages = run_stages(demo, query)
    vectors = stages["dense"]["query_vectors"]
    assert len(vectors) == 2 and len(calls) == 2  # e(q+) and e(q), each once for D_q and fusion together
    monkeypatch.undo()
    index, cfg = demo.index("u"), demo.config
    sims = stages["dense"]["similarities"]
    assert stages["dense"]["dense"] == top(index.vectors, np.asarray(vectors[0], dtype=np.float32), cfg.dense_top)
    pool = normalize(stages["candidates"]["candidates"], index.layout.of_descriptor)
    intent = stages["intent"]["intent"]
    reused = fused_scores(index, intent, pool, vectors, cfg, sims)
    recomputed = fused_scores(index, intent, pool, vectors, cfg)
    assert np.array_equal(reused, recomputed)
    fused = stages["normalize"]["fused"]
    assert (
        fused
        and fused
        == closed_pool(
            index,
            intent,
            stages["candidates"]["candidates"],
            stages["dense"]["dense"],
            vectors,
            cfg,
            reader=demo.engine.reader,
        )[1]
    )  # what the pool reader makes of the same fused scores
    off = closed_pool(index, intent, stages["candidates"]["candidates"], stages["dense"]["dense"], vectors, cfg)[1]
    assert all(off[pid] == float(recomputed[index.packet_position[pid]]) for pid in off)


def test_callers_and_checkpoints_never_see_the_similarity_arrays(demo):
    out = demo.query_graph.invoke({"query": QUESTIONS[0]}, context=demo.context("u"))
    # nor the query vectors: 384 floats each that a served query's output carried to every caller
    assert out["packets"] and "query_vectors" not in out and "similarities" not in out
    for schema in (demo.query_graph.get_input_jsonschema(), demo.query_graph.get_output_jsonschema()):
        assert "similarities" not in schema["properties"] and "query_vectors" not in schema["properties"]
    # a served graph (langgraph dev) checkpoints every step: the arrays stay out, the run still fuses with them
    served = demo.query_graph.copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "t"}}
    steps = list(served.stream({"query": QUESTIONS[0]}, config, stream_mode="values", context=demo.context("u")))
    assert any("similarities" in s for s in steps) and steps[-1]["packets"] == out["packets"]
    history = list(served.get_state_history(config))
    assert len(history) > 5 and not any("similarities" in h.values for h in history)
    sims = next(s["similarities"] for s in steps if "similarities" in s)
    assert sims._asdict() == {"packets": len(demo.index("u").packets), "query_vectors": 2}  # its JSON view


def test_similarities_of_a_changed_matrix_are_computed_again():
    pv = PacketVectors(dim=2)
    pv.set(["a", "b"], [[1, 0], [0, 1]])
    queries = [[0.6, 0.8], [1.0, 0.0]]
    sims = query_similarities(pv, queries)
    assert query_similarities(pv, queries, sims) is sims
    assert query_similarities(pv, queries[:1], sims) is not sims  # other query vectors
    pv.set(["c"], [[0.8, 0.6]])  # an index extended between the dense and evidence stages
    again = query_similarities(pv, queries, sims)
    assert again is not sims and again.arrays[0].tolist() == pytest.approx([0.6, 0.8, 0.96])
    pv.set(["a"], [[0, 1]])  # a row overwritten in place: same length, other content
    assert query_similarities(pv, queries, again).arrays[0].tolist() == pytest.approx([0.8, 0.8, 0.96])
    assert [h.packet_id for h in top_from(pv, again.arrays[0], 2)] == ["c", "b"]


def test_one_vector_without_fusion_and_chroma_when_the_matrix_lags(embeddings, monkeypatch):
    mem = MemCompile(None, embeddings=embeddings, config=MemCompileConfig(fusion=False))
    mem.add_turns(demo_turns(), user_id="u")
    calls = count_similarities(monkeypatch)
    stages = run_stages(mem, QUESTIONS[3])
    assert len(stages["dense"]["query_vectors"]) == 1 and len(calls) == 1 and not stages["normalize"]["fused"]
    fusing = MemCompile(None, embeddings=embeddings)
    fusing.add_turns(demo_turns(), user_id="u")
    fusing.index("u").vectors = PacketVectors()  # vectors not reconciled yet: D_q comes from Chroma
    calls.clear()
    stages = run_stages(fusing, QUESTIONS[3])
    assert stages["dense"]["dense"] and "similarities" not in stages["dense"] and not calls
    assert stages["render"]["packets"] and "Northwind" in stages["render"]["context"]
