"""The stores every contract test runs against: each implementation as users run it (real files, real servers)."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

from memcompile_langgraph.store import records as sqlite_records
from memcompile_langgraph.store.open import open_records


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: Path):
        self.path, self.url = path, None

    def open(self, create: bool = True):
        return sqlite_records.RecordStore(self.path, create=create)

    def sql(self, *statements: str) -> None:
        """Raw SQL on the store's database (literal values only: both dialects read it)."""
        self.path.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path / sqlite_records.FILE)
        with conn:
            for s in statements:
                conn.execute(s)
        conn.close()


class PostgresBackend:
    name = "postgres"

    def __init__(self, server_url: str):
        self.schema = f"t_{uuid.uuid4().hex[:12]}"  # one store per test in a shared database
        self.server_url, self.path = server_url, None
        self.url = f"{server_url}?schema={self.schema}"

    def open(self, create: bool = True):
        return open_records(None, self.url, create=create)

    def sql(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            conn.execute(f"SET search_path TO {self.schema}")
            for s in statements:
                conn.execute(s)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return SqliteBackend(tmp_path / "store")
    return PostgresBackend(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(backend):
    s = backend.open()
    yield s
    s.close()
