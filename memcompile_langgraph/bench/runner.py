"""`memcompile bench`: grow a real store (SQLite + Chroma on disk) with a synthetic history and time it.

At each size N the store holds exactly N turns when queries are timed; then single turns are added one by
one (`add_turn_ms`), and the next size's bulk ingest continues from there. Ingest rate is end to end:
packetize, extraction, Cell placement, SQLite commit, BM25 and the packet-document embeddings. The peer
(InMemoryStore with the same embedding model) goes through the same sizes afterwards, so `rss_mb` is the
MemCompile phase alone.
"""

from __future__ import annotations

import gc
import math
import os
import platform
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from ..add_turns import INGEST_BATCH
from ..config import MemCompileConfig
from ..memory import MemCompile
from ..process import release_free_memory
from .peer import NAME as PEER_NAME
from .peer import PeerStore
from .synthetic import generate, questions

USER = "bench"
WARMUP_QUERIES = 2
WARMUP_TEXTS = 32
WARMUP_JOIN = 16  # turns per warm-up text: past the model's 256 tokens, as the longest packet documents


class StoreUrls(TypedDict, total=False):
    """MemCompile's *_url arguments."""

    records_url: str | None
    chroma_url: str | None


@dataclass(frozen=True)
class BenchOptions:
    sizes: tuple[int, ...]
    queries: int = 50
    add_samples: int = 20  # single-turn adds timed at each size
    store: Path | None = None  # default: a temporary directory, removed afterwards
    peer: bool = True
    seed: int = 7
    records_url: str | None = None  # also measure a served store (PostgreSQL records and/or a Chroma server)
    chroma_url: str | None = None
    config: MemCompileConfig | None = None  # MemCompile's (default: the default profile)

    def served(self) -> StoreUrls:
        return {"records_url": self.records_url, "chroma_url": self.chroma_url}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q / 100 * len(ordered)))) - 1]


_STATUS = Path("/proc/self/status")
_peaks_before_reset: list[float] = []  # ru_maxrss follows VmHWM on Linux: a reset would lower it


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB."""
    rusage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return round(max([rusage, *_peaks_before_reset]), 1)


def _status_mb(field: str) -> float | None:
    """A VmRSS / VmHWM figure of this process in MB (Linux); None where /proc has none."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_now_mb() -> float | None:
    """Resident memory now; None where the system does not say (only the lifetime peak is known there)."""
    return _status_mb("VmRSS")


def reset_peak_rss() -> bool:
    """Restarts the peak (VmHWM) from the resident memory now (Linux: "5" to clear_refs); False where it cannot."""
    peak = _status_mb("VmHWM")
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    if peak is not None:
        _peaks_before_reset.append(peak)
    return True


class _Memory:
    """Resident memory of a phase: where it started, its peak and where it settled (after a collection), so a phase
    whose peak stands far above what it leaves behind shows. Without a resettable peak the peak is the process's
    lifetime one (ru_maxrss) and no current figure is given."""

    def __init__(self) -> None:
        gc.collect()
        self.resets = reset_peak_rss()
        self.start = rss_now_mb()

    def close(self) -> dict[str, float | None]:
        peak = (_status_mb("VmHWM") if self.resets else None) or peak_rss_mb()
        gc.collect()
        steady = rss_now_mb()
        return {
            "start_mb": self.start,
            "peak_mb": peak,
            "steady_mb": steady,
            "peak_over_steady": round(peak / steady, 2) if steady else None,
        }


def growth_per_turn_kb(baseline_mb: float | None, now_mb: float | None, turns: int) -> float | None:
    """Resident memory added per stored turn since the baseline, in KB (None without a current figure)."""
    if baseline_mb is None or now_mb is None or turns <= 0:
        return None
    return round((now_mb - baseline_mb) * 1024 / turns, 2)


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import onnxruntime

    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "platform": platform.platform(terse=True),
    }


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


class _Phase:
    """Wall time of a phase with the load average around it, so a noisy measurement shows as one."""

    def __init__(self) -> None:
        self.load_before = os.getloadavg()[0]
        self.cpu = time.process_time()

    def close(self) -> dict[str, float]:
        return {
            "load_before": round(self.load_before, 2),
            "load_after": round(os.getloadavg()[0], 2),
            "cpu_s": round(time.process_time() - self.cpu, 2),
        }


def _query_stats(mem: MemCompile, qs: list[str]) -> dict[str, Any]:
    for q in qs[:WARMUP_QUERIES]:
        mem.compile(q, user_id=USER)
    totals: list[float] = []
    stages: dict[str, list[float]] = {}
    for q in qs[WARMUP_QUERIES:]:
        seconds, ctx = _timed(partial(mem.compile, q, user_id=USER))
        totals.append(seconds * 1000)
        for stage, info in ctx.trace.items():
            if isinstance(info, dict) and "ms" in info:
                stages.setdefault(stage, []).append(info["ms"])
    return {
        "query_ms_p50": round(percentile(totals, 50), 2),
        "query_ms_p95": round(percentile(totals, 95), 2),
        "stages_ms_p50": {k: round(percentile(v, 50), 2) for k, v in stages.items()},
    }


def _check_store(path: Path | None, records_url: str | None = None) -> None:
    """A store that holds anything is refused: the bench would write its synthetic users among real ones."""
    if records_url:
        from ..store.open import open_records

        records = open_records(None, records_url)
        try:
            users = records.users()
        finally:
            records.close()
        if users:
            raise ValueError(f"the records URL already holds {_held(users)}; give an empty schema (?schema=NAME)")
        return
    db = path / "memcompile.sqlite3" if path is not None else None
    if db is not None and db.exists():
        import sqlite3

        with sqlite3.connect(db) as conn:
            if conn.execute("SELECT name FROM sqlite_master WHERE name='users'").fetchone():
                users = [u for (u,) in conn.execute("SELECT user_id FROM users")]
                if users:
                    raise ValueError(f"{path} already holds {_held(users)}; give an empty or new directory")


def _held(users: list[str]) -> str:
    return "a bench history" if USER in users else f"the memory of {len(users)} user(s)"


def run_memcompile(
    opts: BenchOptions,
    turns: list[dict],
    history,
    store: Path | None,
    log: Callable[[str], None],
    urls: StoreUrls | None = None,
) -> list[dict[str, Any]]:
    """The bench over one store: the embedded one in `store`, or a served one by `urls` (MemCompile's *_url)."""
    urls = urls or {}
    mem = MemCompile(store, config=opts.config, **urls)
    mem.warm_up()  # as a writing process starts: the vector store opened, its fixed memory in the baseline
    if mem.embeddings is not None:  # the model's memory is in the baseline, grown by inputs of its longest length
        texts = [t["text"] for t in turns[: WARMUP_TEXTS * WARMUP_JOIN]]
        mem.embeddings.embed_documents(
            [" ".join(texts[i : i + WARMUP_JOIN]) for i in range(0, len(texts), WARMUP_JOIN)]
        )
    gc.collect()
    # what the warm-up freed is not held: a bulk ingest returns it to the system, and a baseline counting it would
    # hide as much of the store's own growth
    release_free_memory()
    baseline = rss_now_mb()
    points: list[dict[str, Any]] = []
    stored, ingest_s, bulk_turns = 0, 0.0, 0
    parts: dict[str, float] = {}  # seconds by part of the bulk ingests so far (the single adds left out)
    for size in opts.sizes:  # turns[:size] are stored when queries run; the single adds follow them
        phase, memory = _Phase(), _Memory()
        before = mem.engine.clock.totals()
        seconds, _ = _timed(lambda: mem.add_turns(turns[stored:size], user_id=USER))
        for part, total in mem.engine.clock.totals().items():
            parts[part] = parts.get(part, 0.0) + total - before.get(part, 0.0)
        ingest_s, bulk_turns, stored = ingest_s + seconds, bulk_turns + (size - stored), size
        ingest, ingest_memory = phase.close(), memory.close()
        log(f"memcompile {size} turns: ingested at {bulk_turns / ingest_s:.1f} turns/s")
        phase, memory = _Phase(), _Memory()
        queries = _query_stats(mem, questions(history, opts.queries + WARMUP_QUERIES, seed=opts.seed + size, upto=size))
        adds = []
        for turn in turns[stored : stored + opts.add_samples]:
            seconds, _ = _timed(partial(mem.add_turns, [turn], user_id=USER))
            adds.append(seconds * 1000)
        stored += len(adds)
        measure_memory = memory.close()
        stats = mem.stats(USER)
        points.append(
            {
                "turns": size,
                "ingest_turns_per_s": round(bulk_turns / ingest_s, 1),
                "ingest_s": round(ingest_s, 1),
                "writers_clock_s": writers_clock(parts, ingest_s),
                "add_turn_ms_p50": round(percentile(adds, 50), 2),
                "add_turn_ms_p95": round(percentile(adds, 95), 2),
                **queries,
                "rss_mb": peak_rss_mb(),
                "descriptors": stats["descriptors"],
                "cells": stats["cells"],
                "vectors": stats["vectors"],
                "load": {"ingest": ingest, "measure": phase.close()},
                "memory": {
                    "baseline_mb": baseline,
                    "rss_mb": measure_memory["steady_mb"],
                    "kb_per_turn": growth_per_turn_kb(baseline, measure_memory["steady_mb"], stored),
                    "phases": {"ingest": ingest_memory, "measure": measure_memory},
                },
            }
        )
        log(
            f"memcompile {size} turns: query p50 {queries['query_ms_p50']} ms, add turn p50 {points[-1]['add_turn_ms_p50']} ms, "
            f"{points[-1]['memory']['kb_per_turn']} KB resident per stored turn"
        )
    mem.close()
    gc.collect()
    qs = questions(history, 40, seed=opts.seed, upto=opts.sizes[-1])
    if any(urls.values()):  # a served store: the first query of a new worker (records and vectors from the servers)
        mem = _open_warm(store, opts.config, urls)
        points[-1]["first_query_s"] = round(_timed(lambda: mem.compile(qs[0], user_id=USER))[0], 2)
        mem.close()
        return points
    assert store is not None  # an embedded store has its directory
    after_open = {**turns[-1], "dia_id": "after-open", "text": turns[-1]["text"] + " (said again after a restart)"}
    points[-1].update(cold_start(store, opts.config, qs[0], after_open))
    points[-1].update(other_user_during_cold_load(store, opts.config, turns[:OTHER_USER_TURNS], qs))
    log(
        f"memcompile {opts.sizes[-1]} turns: first query {points[-1]['first_query_s']} s from the snapshot file, "
        f"{points[-1]['first_query_rebuild_s']} s rebuilt from the records; the first add after opening "
        f"{points[-1]['first_add_after_open_ms']} ms"
    )
    return points


# the parts of the writer's work (exclusive: they add up to no more than the ingest's wall time), in the order it
# runs them; BACKGROUND_PARTS run beside them on the embedding thread (the writer's `wait` is its share of them)
WRITER_PARTS = ("open", "packetize", "extract", "place", "commit", "index", "wait", "publish")
BACKGROUND_PARTS = ("embed", "store_vectors")


def writers_clock(parts: dict[str, float], wall_s: float) -> dict[str, dict[str, float]]:
    """Seconds by part of the bulk ingest's writers' clock: the writer's, with `other` the rest of its wall time (the
    graph running between its nodes), and the background embedding's."""
    writer = {name: round(parts.get(name, 0.0), 3) for name in WRITER_PARTS}
    writer["other"] = round(max(0.0, wall_s - sum(parts.get(name, 0.0) for name in WRITER_PARTS)), 3)
    return {"writer": writer, "background": {name: round(parts.get(name, 0.0), 3) for name in BACKGROUND_PARTS}}


OTHER_USER = "bench-other"
OTHER_USER_TURNS = 200


# the embedded baseline: SQLite and the store's own Chroma folder, whatever the environment names
EMBEDDED: StoreUrls = {"records_url": "", "chroma_url": ""}


def _open_warm(store: Path | None, config: MemCompileConfig | None, urls: StoreUrls | None = None) -> MemCompile:
    """The store opened as a worker that writes opens it (MemCompile.warm_up). Without urls: the embedded store,
    whatever $MEMCOMPILE_RECORDS_URL and $MEMCOMPILE_CHROMA_URL say."""
    mem = MemCompile(store, config=config, **(urls or EMBEDDED))
    mem.warm_up()
    if mem.embeddings is not None:
        mem.embeddings.embed_query("warm up the model")  # loading the model is not what is timed
    return mem


def cold_start(store: Path, config: MemCompileConfig | None, query: str, turn: dict) -> dict[str, Any]:
    """The first query after opening the store: read from the persisted index snapshot, and rebuilt from the records
    (snapshot files removed, as on a store written before they existed). After the first, one turn is added: the
    first write after opening converts the snapshot to its writable (persistent) form. `cold_memory` holds each of
    the three's resident memory (the model's loaded before)."""
    out: dict[str, Any] = {}
    memory = {}
    for name, files in (("first_query_s", True), ("first_query_rebuild_s", False)):
        if not files:
            shutil.rmtree(store / "snapshots", ignore_errors=True)
        gc.collect()
        mem = _open_warm(store, config)
        phase = _Memory()
        seconds, _ = _timed(lambda: mem.compile(query, user_id=USER))
        out[name], memory[name.removesuffix("_s")] = round(seconds, 2), phase.close()
        if files:
            phase = _Memory()
            out["first_add_after_open_ms"] = round(_timed(lambda: mem.add_turns([turn], user_id=USER))[0] * 1000, 1)
            memory["first_add_after_open"] = phase.close()
        mem.close()
    out["cold_memory"] = memory
    return out


def other_user_during_cold_load(
    store: Path, config: MemCompileConfig | None, turns: list[dict], qs: list[str]
) -> dict[str, Any]:
    """Query times of a small user alone, and while the big user loads cold (rebuilt from its records) beside it."""
    import threading

    mem = _open_warm(store, config)
    mem.add_turns([{**t, "dia_id": f"O:{i}"} for i, t in enumerate(turns)], user_id=OTHER_USER)
    alone = [_timed(partial(mem.compile, q, user_id=OTHER_USER))[0] * 1000 for q in qs]
    mem.close()
    shutil.rmtree(store / "snapshots", ignore_errors=True)
    mem = _open_warm(store, config)
    mem.compile(qs[0], user_id=OTHER_USER)
    loading = threading.Thread(target=mem.index, args=(USER,))
    loading.start()
    during: list[float] = []
    while loading.is_alive():
        during.append(_timed(lambda: mem.compile(qs[len(during) % len(qs)], user_id=OTHER_USER))[0] * 1000)
    loading.join()
    mem.close()
    return {
        "other_user_query_ms_p50_alone": round(percentile(alone, 50), 2),
        "other_user_query_ms_p50_during_cold_load": round(percentile(during, 50), 2),
        "other_user_queries_during_cold_load": len(during),
    }


def run_peer(
    opts: BenchOptions, turns: list[dict], history, embeddings, log: Callable[[str], None]
) -> list[dict[str, Any]]:
    peer = PeerStore(embeddings)
    out, stored, ingest_s = [], 0, 0.0
    for size in opts.sizes:
        seconds, _ = _timed(lambda: peer.add(turns[stored:size], INGEST_BATCH))
        ingest_s, stored = ingest_s + seconds, size
        qs = questions(history, opts.queries + WARMUP_QUERIES, seed=opts.seed + size, upto=size)
        for q in qs[:WARMUP_QUERIES]:
            peer.search(q)
        times = [_timed(partial(peer.search, q))[0] * 1000 for q in qs[WARMUP_QUERIES:]]
        out.append(
            {
                "name": PEER_NAME,
                "turns": size,
                "ingest_turns_per_s": round(size / ingest_s, 1),
                "query_ms_p50": round(percentile(times, 50), 2),
            }
        )
        log(
            f"peer {size} turns: ingested at {out[-1]['ingest_turns_per_s']} turns/s, search p50 {out[-1]['query_ms_p50']} ms"
        )
    return out


def run_bench(opts: BenchOptions, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The bench report: the largest size's figures at the top level, every size under "sizes"."""
    sizes = tuple(sorted(set(opts.sizes)))
    if not sizes or sizes[0] < 1:
        raise ValueError("sizes must be positive turn counts")
    if any(b - a <= opts.add_samples for a, b in zip(sizes, sizes[1:])):
        raise ValueError(
            f"sizes must be more than {opts.add_samples} turns apart (the single-turn adds sit between them)"
        )
    opts = BenchOptions(**{**opts.__dict__, "sizes": sizes})
    history = generate(sizes[-1] + opts.add_samples, seed=opts.seed)
    turns = history.turns
    baseline = peak_rss_mb()  # the interpreter, libraries and the synthetic history itself
    served = opts.records_url or opts.chroma_url
    if served:  # before a temporary directory exists that a refusal would leave behind
        _check_store(None, opts.records_url)
    store = opts.store or Path(tempfile.mkdtemp(prefix="memcompile-bench-"))
    store.mkdir(parents=True, exist_ok=True)
    embedded = store / "embedded" if served else store
    _check_store(embedded)
    started = time.perf_counter()
    try:
        points = run_memcompile(opts, turns, history, embedded, log, EMBEDDED)
        if served:  # same sizes, same turns, same queries, in the same run: only the stores differ
            local = None if opts.records_url and opts.chroma_url else store / "served"
            served_points = run_memcompile(opts, turns, history, local, lambda m: log(f"served: {m}"), opts.served())
        from ..embeddings.minilm import default_embeddings

        embeddings = default_embeddings() if opts.peer else None
        peers = run_peer(opts, turns, history, embeddings, log) if embeddings is not None else []
    finally:
        if opts.store is None:
            shutil.rmtree(store, ignore_errors=True)
    for point, peer in zip(points, peers):
        point["peer"] = peer
    top = dict(points[-1])
    top.pop("load", None)
    report: dict[str, Any] = {
        **top,
        "queries": opts.queries,
        "add_samples": opts.add_samples,
        "seed": opts.seed,
        "rss_mb_before_store": baseline,
        "dense": points[-1]["vectors"] > 0,
        "dense_document": (opts.config or MemCompileConfig()).dense_document,
        "machine": machine(),
        "bench_s": round(time.perf_counter() - started, 1),
        "sizes": points,
    }
    if served:
        report["served"] = {
            "records": "postgresql" if opts.records_url else "sqlite",
            "vectors": "chroma server" if opts.chroma_url else "chroma directory",
            "sizes": served_points,
        }
    if not peers:
        report["peer"] = {"name": PEER_NAME, "skipped": "no embedding model" if opts.peer else "--no-peer"}
    return report


__all__ = ["BenchOptions", "run_bench", "percentile"]
