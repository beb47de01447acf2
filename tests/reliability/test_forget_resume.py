"""A forget is a recorded operation: killed (SIGKILL) after its records went, before or during the removal of the
user's vectors, it is finished by the next open of the store, and re-running `memcompile forget` (the documented
remedy) leaves nothing either. SQLite, then PostgreSQL records; Chroma in the store directory."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from .harness import cli_env, memcompile, synthetic_turns

MARK = "qzvresumemark"

# where the forgetting process is killed: once its records are gone, and once its collection is dropped but the
# vector files are not yet scrubbed
KILL_AT = {
    "after_records": "memcompile_langgraph.store.chroma.ChromaVectors.drop",
    "before_scrub": "memcompile_langgraph.store.chroma_dir.LocalChroma.scrub",
}

_FORGET = """
import os, signal, importlib, sys
from memcompile_langgraph import MemCompile
module, _, attr = {target!r}.rpartition(".")
owner_module, _, owner = module.rpartition(".")
cls = getattr(importlib.import_module(owner_module), owner)
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
setattr(cls, attr, die)
mem = MemCompile({path!r}, records_url={url!r}, dense=False)
mem.forget("gone")
"""


def _vector_starts(mem, user: str) -> list[bytes]:
    """The first 64 bytes of each stored float32 vector of the user, as Chroma writes them to its files."""
    _, vectors = mem.engine.vectors.vectors(user)
    return [np.asarray(v, dtype=np.float32).tobytes()[:64] for v in vectors]


def _files_holding(root, needles: list[bytes]) -> list[str]:
    return sorted(
        {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() for n in needles if n in p.read_bytes()}
    )


@pytest.mark.slow
@pytest.mark.parametrize("moment", sorted(KILL_AT))
def test_a_killed_forget_is_finished_by_the_next_open(moment, tmp_path, embeddings, backend):
    store = backend.where(tmp_path / "store")
    mem = store.memory(embeddings=embeddings)
    mem.add_turns(
        [{**t, "text": f"{t['text']} {MARK}{i:03d}x"} for i, t in enumerate(synthetic_turns("gone", 12))], "gone"
    )
    mem.add_turns(synthetic_turns("kept", 12), "kept")
    needles = [*_vector_starts(mem, "gone"), MARK.encode()]
    assert len(needles) == 13 and _files_holding(store.path, needles)
    mem.close()

    script = _FORGET.format(target=KILL_AT[moment], path=str(store.path), url=store.url or "")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=cli_env(), capture_output=True, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert store.rows("SELECT COUNT(*) FROM packets WHERE user_id = 'gone'") == [(0,)]  # the records went first

    again = store.memory(embeddings=embeddings)  # opening finishes it
    assert _files_holding(store.path, needles) == []
    assert store.rows("SELECT key FROM meta WHERE key LIKE 'forgetting:%'") == []
    assert again.stats("gone")["vectors"] == 0 and len(again.turns("kept")) == 12
    assert again.stats("kept")["vectors"] == 12
    again.close()


@pytest.mark.slow
def test_re_running_forget_after_a_kill_leaves_nothing(tmp_path, embeddings):
    """The remedy docs/reliability.md names: `memcompile forget` again, on a store whose last open was the killed one."""
    from support.record_backends import Where

    store = Where(tmp_path / "store")
    mem = store.memory(embeddings=embeddings)
    mem.add_turns(synthetic_turns("gone", 12), "gone")
    needles = _vector_starts(mem, "gone")
    mem.close()
    script = _FORGET.format(target=KILL_AT["before_scrub"], path=str(store.path), url="")
    subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=cli_env(), capture_output=True, timeout=300)
    run = memcompile("forget", "--store", store.path, "--user", "gone")
    assert run.code == 0, run.err
    assert _files_holding(store.path, needles) == []
    assert store.rows("SELECT key FROM meta WHERE key LIKE 'forgetting:%'") == []


# a delete, and a store put that changes a value (its old packet replaced in the records transaction of the new one),
# each killed once its records transaction committed, before the removed packets' vectors went
_REMOVE = """
import os, signal
from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.base_store import MemCompileStore
from memcompile_langgraph.store.chroma import ChromaVectors
ChromaVectors.delete = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
mem = MemCompile({path!r}, records_url={url!r}, dense=False)
if {how!r} == "delete":
    mem.delete_turns("gone", ["D1:2"])
else:
    MemCompileStore(mem).put(("gone",), "D1:2", {{"speaker": "Tom", "text": "A changed value."}})
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["delete", "replace"])
def test_a_killed_delete_or_replace_is_finished_by_the_next_open(how, tmp_path, embeddings, backend):
    from memcompile_langgraph.integrations.base_store import MemCompileStore
    from memcompile_langgraph.store.llm_file import LLMStore

    store = backend.where(tmp_path / "store")
    mem = store.memory(embeddings=embeddings)
    items = MemCompileStore(mem)
    for i in range(4):
        items.put(("gone",), f"D1:{i}", {"speaker": "Tom", "text": f"My kayak trip {MARK}{i:03d}x went fine."})
    victim = mem.index("gone").by_dia["D1:2"]
    ids, vectors = mem.engine.vectors.vectors("gone")
    needles = [np.asarray(v, dtype=np.float32).tobytes()[:64] for i, v in zip(ids, vectors) if i == victim]
    needles.append(f"{MARK}002x".encode())
    mem.close()
    llm = LLMStore(store.path)  # an LLM reply cached for the user, quoting the turn that goes
    llm.cache.put("gone", "key", "fact", f'["Tom took a kayak trip {MARK}002x"]', 10, 5)
    llm.close()
    assert len(needles) == 2 and _files_holding(store.path, needles)

    script = _REMOVE.format(path=str(store.path), url=store.url or "", how=how)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=cli_env(), capture_output=True, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert store.rows("SELECT COUNT(*) FROM packets WHERE packet_id = ?", (victim,)) == [(0,)]  # the records went

    again = store.memory(embeddings=embeddings)  # opening finishes it, before any read of the user
    assert _files_holding(store.path, needles) == []
    assert store.rows("SELECT key FROM meta WHERE key LIKE 'removing:%'") == []
    assert again.stats("gone")["vectors"] == 4 - (how == "delete") == len(again.turns("gone"))
    again.close()


_SAVE_KILLED = """
import os, signal
from memcompile_langgraph import MemCompile
mem = MemCompile({path!r}, records_url={url!r}, dense=False)
mem.compile("kayak", user_id="gone")  # loaded: saved to its snapshot file at close
os.replace = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)  # once the file is written, before its rename
mem.close()
"""


@pytest.mark.slow
def test_a_forget_removes_the_temporary_file_of_a_snapshot_save_that_was_killed(tmp_path, backend):
    store = backend.where(tmp_path / "store")
    mem = store.memory(dense=False)
    mem.add_turns([{"speaker": "Tom", "text": f"My kayak trip {MARK}{i:03d}x went fine."} for i in range(3)], "gone")
    script = _SAVE_KILLED.format(path=str(store.path), url=store.url or "")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=cli_env(), capture_output=True, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert [p.suffix for p in mem.host.cache.files.folder.iterdir()] == [".tmp"]  # the save's temporary file

    mem.forget("gone")  # by a process that swept the files when it opened, before the kill

    assert [p for p in mem.host.cache.files.folder.iterdir() if MARK.encode() in p.read_bytes()] == []
    mem.close()
