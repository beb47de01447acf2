"""The stores every contract test runs against: each implementation as users run it (real files, real servers);
`backend` (tests/conftest.py) is SQLite, then PostgreSQL."""

from __future__ import annotations

import pytest


@pytest.fixture
def store(backend):
    s = backend.open()
    yield s
    s.close()
