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
