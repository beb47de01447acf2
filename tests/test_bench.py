import json
import statistics
import sys
import time

import pytest

from memcompile_langgraph.bench.runner import (
    BACKGROUND_PARTS,
    USER,
    WRITER_PARTS,
    BenchOptions,
    _Memory,
    growth_per_turn_kb,
    peak_rss_mb,
    percentile,
    reset_peak_rss,
    rss_now_mb,
    run_bench,
    writers_clock,
)
from memcompile_langgraph.bench.synthetic import ASK, generate, questions
from memcompile_langgraph.cli import main
from memcompile_langgraph.cli.bench_cmd import table
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.memory import MemCompile
from memcompile_langgraph.runtime.engine import bundles
from memcompile_langgraph.runtime.writer_clock import WriterClock
from memcompile_langgraph.text.terms import count_tokens

TURNS = 800  # the bench smoke's history: above the other user's 200 turns, enough Cells and a cold load to time


def test_synthetic_history_is_deterministic_and_locomo_shaped():
    a, b = generate(3000, seed=5), generate(3000, seed=5)
    assert a.turns == b.turns and generate(3000, seed=6).turns != a.turns
    lengths = [count_tokens(t["text"]) for t in a.turns]
    assert 18 <= statistics.mean(lengths) <= 40  # LoCoMo: ~28 tokens a turn
    assert len({t["speaker"] for t in a.turns}) >= 10
    sessions = [t["session"] for t in a.turns]
    assert sessions == sorted(sessions) and sessions[-1] >= 80
    times = {t["session"]: t["time"] for t in a.turns}
    assert len(set(times.values())) == len(times)  # every session has its own date and time
    assert 0.1 < sum("image_caption" in t for t in a.turns) / len(a.turns) < 0.3
    assert len({t["dia_id"] for t in a.turns}) == len(a.turns)


def test_questions_ask_about_what_was_said_before_the_cut():
    history = generate(2000, seed=3)
    for f in history.facts[:200]:  # each fact's slot values are in the text of the turn that said it
        assert all(v in history.turns[f.turn]["text"] for v in f.slots.values()), f
    early = questions(history, 40, upto=300)
    assert len(early) == 40 and questions(history, 40, upto=300) == early
    said_early = {ASK[f.kind].format(speaker=f.speaker, **f.slots) for f in history.facts if f.turn < 300}
    assert set(early) <= said_early
    assert not set(questions(history, 40, seed=1)) <= said_early  # without the cut, later facts are asked too


def test_percentile_is_nearest_rank():
    assert percentile([], 50) == 0.0
    assert percentile([5.0], 95) == 5.0
    assert percentile([float(x) for x in range(1, 101)], 50) == 50.0
    assert percentile([float(x) for x in range(1, 101)], 95) == 95.0


def test_growth_per_turn_is_kb_above_the_baseline_and_unknown_without_figures():
    assert growth_per_turn_kb(100.0, 120.0, 2048) == pytest.approx(10.0)
    assert growth_per_turn_kb(100.0, 90.0, 1024) == pytest.approx(-10.0)  # memory given back shows as such
    assert growth_per_turn_kb(None, 120.0, 10) is None and growth_per_turn_kb(100.0, None, 10) is None
    assert growth_per_turn_kb(100.0, 120.0, 0) is None


def test_a_phase_reports_its_peak_and_where_it_settled():
    memory = _Memory()
    held = bytearray(64 << 20)  # touched pages: resident while the phase runs
    held[::4096] = b"x" * len(held[::4096])
    before_release = rss_now_mb()
    del held
    phase = memory.close()
    assert set(phase) == {"start_mb", "peak_mb", "steady_mb", "peak_over_steady"}
    if phase["steady_mb"] is None:  # no /proc: only the lifetime peak is known
        assert phase["peak_mb"] == peak_rss_mb() and phase["peak_over_steady"] is None
        return
    # the kernel counts resident pages in per-thread batches: figures agree to within a MB
    assert before_release is not None and phase["peak_mb"] >= before_release - 1 >= phase["start_mb"] + 60
    assert phase["peak_mb"] >= phase["steady_mb"] + 60  # the 64 MB were given back before the phase closed
    assert phase["peak_over_steady"] == pytest.approx(phase["peak_mb"] / phase["steady_mb"], abs=0.01)


def test_resetting_the_phase_peak_keeps_the_process_peak():
    held = bytearray(48 << 20)
    held[::4096] = b"x" * len(held[::4096])
    peak = peak_rss_mb()
    del held
    reset_peak_rss()
    assert peak_rss_mb() >= peak


def test_writer_clock_counts_a_nested_part_once():
    clock = WriterClock()
    start = time.perf_counter()
    with clock.part("outer"):
        time.sleep(0.02)
        with clock.part("inner"):
            time.sleep(0.05)
        time.sleep(0.01)
    wall = time.perf_counter() - start
    totals = clock.totals()
    assert set(totals) == {"outer", "inner"}
    assert totals["inner"] >= 0.05 and totals["outer"] >= 0.03
    assert totals["outer"] + totals["inner"] <= wall  # the inner 50 ms is not also the outer's


def test_the_writers_clock_covers_its_parts_and_fits_in_the_ingest_wall_time(tmp_path, embeddings):
    mem = MemCompile(tmp_path / "s", embeddings=embeddings)
    start = time.perf_counter()
    mem.add_turns(generate(300, seed=4).turns, user_id="u")
    wall = time.perf_counter() - start
    parts = mem.engine.clock.totals()
    mem.close()
    assert set(WRITER_PARTS) | set(BACKGROUND_PARTS) <= set(parts)
    assert all(parts[s] > 0 for s in ("extract", "place", "commit", "index", "embed", "store_vectors"))
    clock = writers_clock(parts, wall)
    assert list(clock["writer"]) == [*WRITER_PARTS, "other"]
    assert sum(parts[s] for s in WRITER_PARTS) <= wall
    assert abs(sum(clock["writer"].values()) - wall) < 0.01  # `other` is the rest of the wall time, never below 0
    assert all(parts[s] <= wall for s in BACKGROUND_PARTS)


@pytest.mark.parametrize(
    "argv", [["bench"], ["bench", "--sizes", "a,b"], ["bench", "--turns", "0"], ["bench", "--sizes", "1000,1010"]]
)
def test_bad_bench_arguments_are_one_line_errors(argv, capsys):
    assert main(argv + ["--no-peer"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("memcompile: error:")


def test_incremental_writes_on_the_synthetic_history_equal_a_reload():
    turns = generate(400, seed=2).turns
    mem = MemCompile(None, dense=False)
    mem.add_turns(turns[:300], user_id="u")
    for t in turns[300:400]:
        mem.add_turns([t], user_id="u")  # each one a fork of the last snapshot, extended and published
    live = mem.index("u")
    assert len(live.packets) == 400
    mem.host.cache.drop("u")
    reloaded = mem.index("u")
    assert reloaded is not live
    assert dict(reloaded.layout.of_descriptor) == dict(live.layout.of_descriptor)
    assert [d.descriptor_id for d in reloaded.descriptors] == [d.descriptor_id for d in live.descriptors]
    question = questions(generate(400, seed=2), 1, upto=400)[0]
    first = [p.dia_id for p in mem.compile(question, user_id="u").packets]
    assert first  # the reloaded index answers
    mem.host.cache.publish(live)  # the same version: both snapshots must answer alike
    live_answer = [p.dia_id for p in mem.compile(question, user_id="u").packets]
    assert live_answer == first


@pytest.mark.slow
def test_bench_smoke_json_shape_and_sane_values(tmp_path, capsys, embeddings):
    plot = tmp_path / "bench.png"
    assert (
        main(
            [
                "bench",
                "--turns",
                str(TURNS),
                "--queries",
                "10",
                "--json",
                "--quiet",
                "--plot",
                str(plot),
                "--store",
                str(tmp_path / "s"),
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["turns"] == TURNS and report["dense"] is True
    assert report["ingest_turns_per_s"] > 0 and report["ingest_s"] > 0
    assert 0 < report["add_turn_ms_p50"] <= report["add_turn_ms_p95"]
    assert 0 < report["query_ms_p50"] <= report["query_ms_p95"]
    assert {
        "intent",
        "bm25",
        "cell_routing",
        "candidates",
        "normalize",
        "schedule",
        "dense",
        "frontier",
        "render",
    } <= set(report["stages_ms_p50"])
    assert sum(report["stages_ms_p50"].values()) > 0
    assert report["rss_mb"] >= report["rss_mb_before_store"] > 0
    assert report["descriptors"] >= TURNS and 0 < report["cells"] < report["descriptors"]
    assert report["vectors"] == TURNS + report["add_samples"]  # every stored turn, the single adds included
    assert report["first_query_s"] > 0 and report["first_query_rebuild_s"] > 0 and report["first_add_after_open_ms"] > 0
    memory = report["memory"]
    assert set(memory) == {"baseline_mb", "rss_mb", "kb_per_turn", "phases"} and set(memory["phases"]) == {
        "ingest",
        "measure",
    }
    assert memory["phases"]["measure"]["steady_mb"] == memory["rss_mb"]
    assert memory["phases"]["ingest"]["steady_mb"] == memory["phases"]["measure"]["start_mb"]
    stored = TURNS + report["add_samples"]
    assert memory["kb_per_turn"] == pytest.approx((memory["rss_mb"] - memory["baseline_mb"]) * 1024 / stored, abs=0.01)
    assert set(report["cold_memory"]) == {"first_query", "first_add_after_open", "first_query_rebuild"}
    for phase in [*memory["phases"].values(), *report["cold_memory"].values()]:
        assert phase["peak_mb"] >= phase["steady_mb"] - 1 > 0  # settled after a collection; VmHWM samples pages
    assert report["other_user_queries_during_cold_load"] >= 1 and report["other_user_query_ms_p50_alone"] > 0
    peer = report["peer"]
    assert peer["name"] == "langgraph.store.memory.InMemoryStore" and peer["turns"] == TURNS
    assert peer["ingest_turns_per_s"] > 0 and peer["query_ms_p50"] > 0
    assert report["machine"]["cores"] >= 1 and report["machine"]["cpu"]
    assert [p["turns"] for p in report["sizes"]] == [TURNS]
    clock = report["writers_clock_s"]
    assert set(clock["writer"]) == {*WRITER_PARTS, "other"} and set(clock["background"]) == set(BACKGROUND_PARTS)
    assert clock["background"]["embed"] > 0 and clock["writer"]["extract"] > 0
    assert abs(sum(clock["writer"].values()) - report["ingest_s"]) <= 0.1  # ingest_s is rounded to 0.1 s
    printed = table(report).splitlines()
    header = printed[printed.index("writers' clock, seconds by part (embedding on a background thread):") + 1].split()
    assert header == ["turns", "ingest", "s", *WRITER_PARTS, "other", "bg", "embed", "bg", "store_vectors"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="already holds a bench history"):
        run_bench(BenchOptions(sizes=(100,), store=tmp_path / "s", peer=False))


def test_peer_takes_repeated_texts_in_one_batch(embeddings):
    from memcompile_langgraph.bench.peer import PeerStore

    peer = PeerStore(embeddings)
    turns = [{"speaker": "Ava", "text": "Haha, totally.", "dia_id": f"D1:{i}"} for i in range(3)]
    turns.append({"speaker": "Ben", "text": "I bought a kayak at the harbor.", "dia_id": "D1:4"})
    peer.add(turns, batch=256)
    assert len(peer.store.search(("bench", "turns"), limit=10)) == 4
    assert peer.search("Who bought a kayak?")[0] == "D1:4"


@pytest.mark.slow
def test_startup_bench_times_each_command_as_a_fresh_process(capsys):
    assert main(["bench", "--startup", "--runs", "1", "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["commands"]) == {"--help", "stats", "query"} and report["runs"] == 1
    for c in report["commands"].values():
        assert 0 < c["wall_s_min"] <= c["wall_s_median"] and c["cpu_s_median"] > 0
        assert c["met"] == (c["wall_s_median"] <= c["target_s"])
    assert report["commands"]["--help"]["target_s"] == 1.0 and report["commands"]["query"]["target_s"] == 2.0
    assert (
        list(report["floor"]) == ["import langgraph.graph"]
        and report["floor"]["import langgraph.graph"]["cpu_s_median"] > 0
    )
    assert main(["bench", "--startup", "--runs", "0"]) == 2  # a usage error, one line


def test_the_bench_measures_the_dense_document_it_is_given(tmp_path, capsys):
    store = tmp_path / "s"
    argv = ["bench", "--turns", "250", "--queries", "3", "--no-peer", "--json", "--quiet", "--store", str(store)]
    assert main([*argv, "--dense-document", "turn"]) == 0
    assert json.loads(capsys.readouterr().out)["dense_document"] == "turn"
    mem = MemCompile(store, config=MemCompileConfig(dense_document="turn"))
    ids, _, stored = mem.engine.vectors.vectors(USER, sources=True)  # as the bench left them, before any load
    index = mem.index(USER)
    assert len(ids) == len(index.packets) and stored == mem.engine.sources(bundles(index, ids))
    papers = MemCompile(None, config=MemCompileConfig(dense_document="packet")).engine
    assert stored != papers.sources(bundles(index, ids))


def test_plot_without_matplotlib_fails_before_the_bench_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as without the `plots` extra: its import fails
    args = ["bench", "--turns", "200", "--queries", "1", "--no-peer", "--store", str(tmp_path / "s")]
    assert main([*args, "--plot", str(tmp_path / "bench.png")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "memcompile: error: --plot needs matplotlib: pip install 'memcompile-langgraph[plots]'"
    assert not (tmp_path / "s").exists()  # no bench ran: nothing measured was thrown away


def test_a_store_that_holds_a_users_memory_is_refused_and_left_as_it_was(tmp_path, capsys):
    store = tmp_path / "mine"
    mem = MemCompile(store, dense=False, records_url="", chroma_url="")
    mem.add_turns([{"speaker": "Ann", "text": "My locker code is 4711."}], user_id="ann")
    mem.close()
    args = ["bench", "--turns", "20", "--queries", "1", "--no-peer", "--quiet", "--records-url", "", "--chroma-url", ""]
    assert main([*args, "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"memcompile: error: {store} already holds the memory of 1 user(s); give an empty or new directory"]
    mem = MemCompile(store, dense=False, records_url="", chroma_url="")
    try:
        assert mem.users() == ["ann"]  # no synthetic users written among the real one
    finally:
        mem.close()
