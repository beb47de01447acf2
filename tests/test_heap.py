import ctypes

import pytest

from memcompile_langgraph import add_turns, process
from memcompile_langgraph.add_turns import INGEST_BATCH
from memcompile_langgraph.bench.runner import rss_now_mb
from memcompile_langgraph.bench.synthetic import generate
from memcompile_langgraph.process import release_free_memory
from memcompile_langgraph.runtime import cache


@pytest.mark.skipif(process._TRIM is None, reason="malloc_trim is glibc's")
def test_freed_blocks_below_a_live_one_go_back_to_the_system():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    block, count = 64 * 1024, 2048  # 128 MB in blocks below the mmap threshold: they come from the heap
    release_free_memory()
    before = rss_now_mb()
    blocks = [libc.malloc(block) for _ in range(count)]
    for b in blocks:
        libc.memset(b, 1, block)  # resident
    for b in blocks[:-1]:  # the last one stays: the freed ones lie below it, free() alone keeps their pages
        libc.free(b)
    held = rss_now_mb()
    assert before is not None and held is not None and held - before > 100
    release_free_memory()
    after = rss_now_mb()
    libc.free(blocks[-1])
    assert after is not None and held - after > 100


def test_a_bulk_ingest_releases_memory_by_batch_and_a_single_turn_does_not(make_mem, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(add_turns, "release_free_memory", lambda: calls.append(1))
    turns = generate(INGEST_BATCH + 11).turns
    mem = make_mem(dense=False)
    mem.add_turns(turns[:-1], user_id="u")
    assert len(calls) == 3  # after each of the two batches, and after the unit
    mem.add_turns(turns[-1:], user_id="u")
    assert len(calls) == 3  # a single turn's latency pays no trim
    assert mem.stats("u")["packets"] == INGEST_BATCH + 11


def test_a_cold_load_returns_what_it_freed_and_a_newer_version_of_the_cached_one_does_not(make_mem, monkeypatch):
    turns = generate(40).turns
    make_mem("store", turns=turns[:30], dense=False).close()
    calls: list[int] = []
    monkeypatch.setattr(cache, "release_free_memory", lambda: calls.append(1))
    mem = make_mem("store", dense=False)
    mem.index("u")
    assert len(calls) == 1  # read from the snapshot file (or replayed): the load's garbage is returned at once
    mem.add_turns(turns[30:], user_id="u")
    assert mem.index("u").packets and len(calls) == 1  # a writer's newer version extends the cached one: no trim
