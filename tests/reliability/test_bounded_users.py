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
    finally:
        mem.close()
