import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.openai_server import FakeOpenAI
from support.paths import LOCOMO, MODEL_DIR, ROOT, SHARED  # noqa: F401  (ROOT, SHARED: for the fixtures below)

if "MEMCOMPILE_MODEL_DIR" not in os.environ and MODEL_DIR.is_dir():
    os.environ["MEMCOMPILE_MODEL_DIR"] = str(MODEL_DIR)
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


@pytest.fixture(scope="session")
def locomo_samples():
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo dev split not found at {LOCOMO}")
    return json.loads(LOCOMO.read_text())


@pytest.fixture(scope="session")
def model_dir():
    from memcompile_langgraph.embeddings.minilm import find_model_dir

    found = find_model_dir()
    if found is None:
        pytest.skip("no local embedding model (set MEMCOMPILE_MODEL_DIR)")
    return found


@pytest.fixture(scope="session")
def embeddings(model_dir):
    from memcompile_langgraph.embeddings.minilm import default_embeddings

    return default_embeddings()  # the local model found above, as users get it


@pytest.fixture
def make_mem(request, tmp_path):
    """Makes the test's memories and closes them after it. make_mem() keeps its records in memory,
    make_mem("store") in tmp_path/store; dense by default (the local model), dense=False for BM25 only; turns= are
    added for user_id first; other keywords go to MemCompile."""
    from memcompile_langgraph import MemCompile

    made = []

    def make(path: str | None = None, *, turns=None, user_id: str = "u", dense: bool = True, **kwargs):
        if dense:
            kwargs.setdefault("embeddings", request.getfixturevalue("embeddings"))
        mem = MemCompile(tmp_path / path if path is not None else None, dense=dense, **kwargs)
        made.append(mem)
        if turns:
            mem.add_turns(turns, user_id=user_id)
        return mem

    yield make
    for mem in made:
        mem.close()


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """A folder of this test run shared by its xdist workers (each has a base temp of its own inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def postgres_url(run_dir):
    """A real PostgreSQL 15, started once per test run at its first use and shared by the xdist workers; each test
    keeps to a schema (or database) of its own."""
    from support.pg_server import missing, shared_postgres

    why = missing()
    if why:
        pytest.skip(why)
    with shared_postgres(run_dir) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path):
    """Where the test's records live (support/record_backends.py): SQLite in tmp_path, then PostgreSQL (skipped with the
    reason where its binaries are missing)."""
    from support.record_backends import PostgresBackend, SqliteBackend

    if request.param == "sqlite":
        return SqliteBackend(tmp_path / "store")
    return PostgresBackend(request.getfixturevalue("postgres_url"))


@pytest.fixture(scope="session")
def chroma_url(run_dir):
    """A real `chroma run` server on a free loopback port, started once per test run and shared by the xdist
    workers (stores on it keep to collections of their own)."""
    from support.servers import free_port, shared, start_detached, stop_group

    beside = Path(sys.executable).parent / "chroma"  # the venv's own, also when the venv is not activated
    chroma = str(beside) if beside.is_file() else shutil.which("chroma")
    if chroma is None:
        pytest.skip("the `chroma` command (chromadb's server) is not installed")

    def start() -> dict:
        port, folder = free_port(), run_dir / "chroma-server"
        folder.mkdir(exist_ok=True)
        cmd = [chroma, "run", "--path", str(folder / "db"), "--host", "127.0.0.1", "--port", str(port)]
        pid = start_detached(cmd, f"http://127.0.0.1:{port}/api/v2/heartbeat", folder / "chroma.log")
        return {"url": f"http://127.0.0.1:{port}", "pid": pid}

    with shared(run_dir, "chroma", start, lambda server: stop_group(server["pid"])) as server:
        yield server["url"]


@pytest.fixture
def openai_server(monkeypatch):
    """A fresh loopback OpenAI-compatible server per test (scripted faults last for the test only). No API key in
    the environment: a base_url works with the placeholder key, and a real key must never reach a test."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI() as srv:
        yield srv
