"""Where the tests find the shared data: ../shared beside the clone (as in CI), or $MEMCOMPILE_SHARED_DIR."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SHARED = Path(os.environ.get("MEMCOMPILE_SHARED_DIR") or ROOT.parent / "shared")
LOCOMO = SHARED / "data" / "locomo" / "locomo10-dev.json"
MODEL_DIR = SHARED / "models" / "all-MiniLM-L6-v2"
