"""Fixtures of the reliability suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import write_json


@pytest.fixture(scope="session")
def conversation_file(locomo_samples, tmp_path_factory) -> tuple[Path, dict]:
    """One LoCoMo sample (conv-30, the shortest: 369 turns, two ingest batches) as its own file."""
    sample = min(locomo_samples, key=lambda s: sum(len(v) for k, v in s["conversation"].items() if isinstance(v, list)))
    path = tmp_path_factory.mktemp("conv") / f"{sample['sample_id']}.json"
    return write_json(path, sample), sample
