import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMCOMPILE_SHARED_DIR") or ROOT.parent / "shared")  # beside the clone, as in CI
LOCOMO = SHARED / "data" / "locomo" / "locomo10-dev.json"
MODEL_DIR = SHARED / "models" / "all-MiniLM-L6-v2"

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
