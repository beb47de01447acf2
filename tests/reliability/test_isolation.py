"""User isolation: hostile user ids never reach outside the store or into another user's rows, collections or
lock files; a randomized run of 1,000 cross-user queries finds no packet of another user. Records in SQLite, then
in PostgreSQL (`backend`)."""

from __future__ import annotations

import json
import random
import re

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.store.chroma import ChromaVectors
from memcompile_langgraph.store.layout import user_key
from memcompile_langgraph.users import InvalidUserId

from .harness import memcompile, rows, synthetic_turns, write_json

HOSTILE_IDS = [
    "../../../../tmp/escaped",
    "..",
    ".",
    "/etc/passwd",
    "a/b/c",
    "..\\..\\windows\\system32",
    "%2e%2e%2fencoded",
    "..\u2215unicode-slash",
    "nul",
    "CON",
    "'; DROP TABLE packets; --",
    "quote\"and'apostrophe",
    "space at end ",
    "名前-ユーザー",
    "emoji-\U0001f600",
    "*",
    "?",
    "mc_" + "0" * 40,  # looks like a collection name
    "x" * 256,
]


def _tree(root) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_hostile_user_ids_stay_inside_the_store(tmp_path, embeddings, backend):
    outside_before = _tree(tmp_path)
    where = backend.where(tmp_path / "store")
    store = where.path
    mem = where.memory(embeddings=embeddings)
    for i, uid in enumerate(HOSTILE_IDS):
        counts = mem.add_turns([{"speaker": "Eve", "text": f"hostile number {i} owns a red kayak"}], user_id=uid)
        assert counts["stored"] == 1
    # every id round-trips exactly, each sees only its own turn
    assert sorted(mem.users()) == sorted(HOSTILE_IDS)
    for i, uid in enumerate(HOSTILE_IDS):
        ctx = mem.compile("who owns a red kayak?", user_id=uid)
        assert [p.dia_id for p in ctx.packets] == ["D1:1"]
        assert f"hostile number {i} " in ctx.text.lower()
        assert mem.stats(uid)["vectors"] == 1
    mem.close()

    assert _tree(tmp_path) - {p for p in _tree(tmp_path) if p.startswith("store")} == outside_before
    names = {p.name for p in (store / "locks").iterdir()} if (store / "locks").is_dir() else set()
    stripes = {n for n in names if n.startswith("writers-")}  # shared by users through a keyed hash
    if backend.name == "sqlite":
        assert 0 < len(stripes) <= len(HOSTILE_IDS)
    else:  # the writer lock is PostgreSQL's advisory lock: no file per user
        assert not stripes
    assert not [n for n in names for u in HOSTILE_IDS if user_key(u) in n]  # no lock file names a user
    assert names - stripes <= {"chroma.lock", "chroma.generation", "setup.lock"}
    assert {p.name for p in store.iterdir()} <= {
        "memcompile.sqlite3",
        "memcompile.sqlite3-wal",
        "memcompile.sqlite3-shm",
        "chroma",
        "locks",
        "snapshots",
    }
    for path in _tree(store):  # no user id, whole or in part, became a path component
        assert not any(uid in path.split("/") for uid in HOSTILE_IDS if len(uid) > 2), path
    # Chroma collection names are the fixed prefix and a hash
    collections = {c.name for c in ChromaVectors(store).client.list_collections()}
    assert collections == {f"mc_{user_key(u)}" for u in HOSTILE_IDS}
    assert all(re.fullmatch(r"mc_[0-9a-f]{40}", c) for c in collections)
    assert rows(where, "SELECT COUNT(*) FROM packets")[0][0] == len(HOSTILE_IDS)  # the DROP TABLE id did nothing
    assert sorted(r[0] for r in rows(where, "SELECT DISTINCT user_id FROM packets")) == sorted(HOSTILE_IDS)


@pytest.mark.slow  # a subprocess or a whole store build per case
def test_hostile_user_ids_through_the_cli(tmp_path, backend):
    path = write_json(tmp_path / "t.json", [{"speaker": "Eve", "text": "I keep bees on the roof."}])
    store = backend.where(tmp_path / "store")
    hostile = ("../../escape", "/abs/../../b")
    for uid in hostile:
        run = memcompile("ingest", path, *store.cli, "--user", uid, "--quiet")
        assert run.code == 0, run.err
    stats = json.loads(memcompile("stats", *store.cli, "--json").out)
    assert {u: (s["packets"], s["vectors"]) for u, s in stats.items()} == {u: (1, 1) for u in hostile}
    assert {p.name for p in tmp_path.iterdir()} == {"t.json", "store"}


@pytest.mark.parametrize("bad", ["", "  ", "a\x00b", "line\nbreak", "rtl\u202e", "z" * 257, None, 7, b"bytes"])
def test_invalid_user_ids_are_refused_everywhere(bad, tmp_path):
    mem = MemCompile(None, dense=False)
    for call in (
        lambda: mem.add_turns([{"speaker": "A", "text": "hi there"}], user_id=bad),
        lambda: mem.compile("anything", user_id=bad),
        lambda: mem.stats(bad),
        lambda: mem.forget(bad),
        lambda: mem.delete_turns(bad, ["D1:1"]),
    ):
        with pytest.raises(InvalidUserId):
            call()
    assert mem.users() == []


@pytest.mark.slow
def test_randomized_cross_user_queries_never_leak(embeddings, backend, tmp_path):
    """10 users on overlapping vocabulary; 1,000 queries, many built from another user's own words."""
    mem = backend.where(tmp_path / "store").memory(embeddings=embeddings)
    users = [f"user{i}" for i in range(10)]
    own: dict[str, set[str]] = {}
    texts: dict[str, list[str]] = {}
    for i, u in enumerate(users):
        turns = synthetic_turns(f"tag{i}x", 20, seed=i)
        mem.add_turns(turns, user_id=u)
        index = mem.index(u)
        own[u] = set(index.packets)
        texts[u] = [t["text"] for t in turns]
    rng = random.Random(7)
    leaks = queries = 0
    for _ in range(1000):
        u, other = rng.sample(users, 2)
        words = rng.choice(texts[other]).split()
        query = " ".join(rng.sample(words, k=min(len(words), rng.randint(3, 8))))
        ctx = mem.compile(query, user_id=u)
        queries += 1
        ids = {p.packet_id for p in ctx.packets}
        leaks += len(ids - own[u])
        foreign = [t for t in (f"tag{j}x" for j in range(10)) if t != f"tag{users.index(u)}x"]
        leaks += sum(t in ctx.text.lower() for t in foreign)
        assert ctx.packets, query
    assert queries == 1000 and leaks == 0
