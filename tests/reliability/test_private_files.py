"""The store's files are its owner's alone whatever the umask: the records (every turn in clear), SQLite's WAL and
shared-memory files, the LLM file, Chroma's database and index folders, the locks and the snapshot files are 0600 in
0700 folders, also those made after the store was opened (a new user's index folder, the WAL of a later write)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from .harness import cli_env, memcompile, synthetic_turns, write_json

WRITE = """
import json, os, stat, sys
os.umask(int(sys.argv[3], 8))
from memcompile_langgraph import MemCompile
from memcompile_langgraph.embeddings.minilm import default_embeddings
from memcompile_langgraph.store.llm_file import LLMStore

mem = MemCompile(sys.argv[1], records_url=sys.argv[2], embeddings=default_embeddings())
turns = json.loads(sys.argv[4])
mem.add_turns(turns[:4], user_id="ann")
mem.compile("trip", user_id="ann")
mem.add_turns(turns[4:], user_id="bob")  # a new index folder, made by Chroma after the store was open
mem.delete_turns("bob", ["D1:1"])
LLMStore(sys.argv[1]).close()
print(json.dumps({n: stat.S_IMODE(os.lstat(os.path.join(sys.argv[1], n)).st_mode) for n in os.listdir(sys.argv[1])}))  # while the records are open: with their WAL and shared-memory files
mem.close()
"""


def _modes(root) -> dict[str, int]:
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = stat.S_IMODE(os.lstat(path).st_mode)
    return out


@pytest.mark.parametrize("umask", ["022", "000"])
def test_every_file_of_the_store_is_private_whatever_the_umask(tmp_path, backend, umask):
    import json

    store = backend.where(tmp_path / "store")
    done = subprocess.run(
        [sys.executable, "-c", WRITE, str(store.path), store.url or "", umask, json.dumps(synthetic_turns("p", 8))],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modes = {**json.loads(done.stdout.splitlines()[-1]), **_modes(store.path)}
    names = set(modes)
    assert {"chroma/chroma.sqlite3", "locks", "llm.sqlite3"} <= names
    assert sum(1 for n in names if n.endswith("data_level0.bin")) == 2  # both users' index files were looked at
    if backend.name == "sqlite":
        assert {"memcompile.sqlite3", "memcompile.sqlite3-wal", "memcompile.sqlite3-shm"} <= names
    assert any(n.startswith("snapshots") for n in names)
    loose = {n: oct(m) for n, m in modes.items() if m != (0o700 if (store.path / n).is_dir() else 0o600)}
    assert loose == {}
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o700  # the store folder it made


def test_a_store_made_with_open_modes_is_tightened_when_opened(tmp_path, embeddings):
    """Files an earlier release left 0644 (and folders 0755) are made private by the next open that writes."""
    from memcompile_langgraph import MemCompile

    root = tmp_path / "store"
    mem = MemCompile(root, records_url="", embeddings=embeddings)
    mem.add_turns(synthetic_turns("o", 4), user_id="ann")
    mem.close()
    for name in _modes(root):
        os.chmod(root / name, 0o755 if (root / name).is_dir() else 0o644)
    path = write_json(tmp_path / "more.json", synthetic_turns("o", 2, seed=1))
    assert memcompile("ingest", path, "--store", root, "--records-url", "", "--user", "ann", "--quiet").code == 0
    tightened = {"memcompile.sqlite3", "memcompile.sqlite3-wal", "locks", "chroma", "chroma/chroma.sqlite3"}
    modes = _modes(root)
    assert {n: oct(modes[n]) for n in tightened if modes.get(n, 0) & 0o077} == {}


EACH_STEP = """
import json, os, stat, sys
import numpy as np
os.umask(0o022)
from memcompile_langgraph import MemCompile
from memcompile_langgraph.embeddings.minilm import default_embeddings

root = sys.argv[1]
mem = MemCompile(root, records_url=sys.argv[2], embeddings=default_embeddings())
turns = json.loads(sys.argv[3])


def loose(step):
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            if mode & 0o077:
                out[os.path.relpath(path, root)] = oct(mode)
    print(json.dumps([step, out]), flush=True)


loose("open")
mem.add_turns(turns, user_id="ann")
loose("add")
mem.compile("trip", user_id="ann")
loose("compile")
rng = np.random.default_rng(0)
vectors, ids = rng.standard_normal((1200, 384)).astype(np.float32), [f"bulk-{i}" for i in range(1200)]
mem.engine.vectors.upsert("bulk", ids[:10], vectors[:10], ids[:10])  # the index folder made
loose("first vectors")
# past Chroma's 1,000 unsaved vectors, in a folder made before: it saves the index, and its id map first
mem.engine.vectors.upsert("bulk", ids[10:], vectors[10:], ids[10:])
loose("save")
mem.engine.vectors.query("bulk", [0.1] * 384, 3)
loose("query")
mem.delete_turns("ann", ["D1:1"])
loose("delete")
mem.forget("ann")
loose("forget")
mem.close()
"""


def test_each_file_is_private_as_soon_as_it_is_written(tmp_path, backend):
    """After each operation, with the store still open (no later open tightens anything): no file or folder open to
    others, Chroma's index files saved at its thousandth vector included."""
    import json

    store = backend.where(tmp_path / "store")
    done = subprocess.run(
        [sys.executable, "-c", EACH_STEP, str(store.path), store.url or "", json.dumps(synthetic_turns("q", 6))],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert [s for s, _ in steps] == ["open", "add", "compile", "first vectors", "save", "query", "delete", "forget"]
    assert {s: loose for s, loose in steps if loose} == {}
    assert any(p.name == "index_metadata.pickle" for p in store.path.rglob("*"))  # the id map was saved
