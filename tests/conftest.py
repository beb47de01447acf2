import json
import os
import shutil
import sys
from pathlib import Path

import pytest
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
    from memcompile_langgraph.store.embeddings import find_model_dir

    found = find_model_dir()
    if found is None:
        pytest.skip("no local embedding model (set MEMCOMPILE_MODEL_DIR)")
    return found


@pytest.fixture(scope="session")
def embeddings(model_dir):
    from memcompile_langgraph.store.embeddings import default_embeddings

    return default_embeddings()  # the local model found above, as users get it


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL 15 for the session (started on first use); tests share it, each in a schema of its own."""
    from support.pg_server import missing, running_postgres

    why = missing()
    if why:
        pytest.skip(why)
    with running_postgres() as url:
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
def chroma_url(tmp_path_factory):
    """A real `chroma run` server on a free loopback port for the session."""
    from support.servers import free_port, running

    beside = Path(sys.executable).parent / "chroma"  # the venv's own, also when the venv is not activated
    chroma = str(beside) if beside.is_file() else shutil.which("chroma")
    if chroma is None:
        pytest.skip("the `chroma` command (chromadb's server) is not installed")
    tmp = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    cmd = [chroma, "run", "--path", str(tmp / "db"), "--host", "127.0.0.1", "--port", str(port)]
    with running(cmd, f"http://127.0.0.1:{port}/api/v2/heartbeat", tmp / "chroma.log"):
        yield f"http://127.0.0.1:{port}"
