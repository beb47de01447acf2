"""A worker that serves many users holds a bounded number of them: its cache of indexes (cache_size) and, with a
local Chroma, Chroma's own loaded indexes, each with four open files, whatever the number of users it touched."""

from __future__ import annotations

import os

import pytest

from memcompile_langgraph import MemCompile

pytestmark = pytest.mark.slow  # 150 users written and read

USERS = 150
CHROMA_FLOOR = 64  # indexes Chroma keeps loaded at least, one per shard of its cache, whatever the bound


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_touching_many_more_users_than_cache_size_keeps_open_files_bounded(tmp_path, embeddings):
    mem = MemCompile(tmp_path / "store", embeddings=embeddings, cache_size=4)
    try:
        mem.add_turns([{"speaker": "Ann", "text": "A first note.", "dia_id": "D1:1"}], "first")  # Chroma opened
        before = _open_files()
        for i in range(USERS):  # each write loads the user's index into Chroma (and a query reads it)
            mem.add_turns(
                [{"speaker": "Ann", "text": f"User {i} keeps a kayak in shed {i}.", "dia_id": "D1:1"}], f"u{i}"
            )
            assert mem.compile("Where is the kayak?", user_id=f"u{i}").trace["dense"]["hits"] == 1
        grown = _open_files() - before
        # at most Chroma's floor of loaded indexes, four files each; on an unbounded cache every user kept its four
        assert grown <= 4 * CHROMA_FLOOR + 8, grown
        assert len(mem.host.cache) <= 4
        # nor does the process keep a handle, or a note, per user it ever touched
        vectors = mem.engine.vectors
        assert len(vectors._collections) <= 4 and len(vectors._loaded) <= 4
    finally:
        mem.close()


def test_warnings_said_once_per_user_keep_a_bounded_number_of_keys(caplog):
    from memcompile_langgraph.runtime.engine import WARNED_KEYS

    mem = MemCompile(dense=False)
    try:
        for i in range(3 * WARNED_KEYS):  # e.g. the dense channel off for every user a worker serves
            mem.engine.warn_once(f"vectors:u{i}", f"dense channel off for user u{i}")
        mem.engine.warn_once(f"vectors:u{3 * WARNED_KEYS - 1}", "said again")
        assert len(mem.engine._warned) == WARNED_KEYS
        assert "said again" not in caplog.text and caplog.text.count("dense channel off") == 3 * WARNED_KEYS
    finally:
        mem.close()
