"""Where the records of a test store live: SQLite in the store directory, or a schema of their own on the session's
real PostgreSQL. The `backend` fixture (tests/conftest.py) runs a test once with each: the records-store contract
suite (tests/contracts) and the reliability tests that concern records (tests/reliability)."""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

from memcompile_langgraph.store import sqlite as sqlite_records
from memcompile_langgraph.store.open import open_records


@dataclass(frozen=True)
class Where:
    """A store as users name it: its directory (Chroma's files, and the SQLite records unless `url` is set) and
    the PostgreSQL records URL."""

    path: Path
    url: str | None = None

    @property
    def cli(self) -> list[str]:
        return ["--store", str(self.path), *(["--records-url", self.url] if self.url else [])]

    def memory(self, **kwargs):
        from memcompile_langgraph import MemCompile

        # records_url="": SQLite in the directory whatever $MEMCOMPILE_RECORDS_URL says
        return MemCompile(self.path, records_url=self.url or "", **kwargs)

    def rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        """A read of the records that bypasses MemCompile (written with `?` placeholders, for both dialects)."""
        if self.url is None:
            conn = sqlite3.connect(f"file:{self.path / sqlite_records.FILE}?mode=ro", uri=True)
            try:
                return conn.execute(sql, args).fetchall()
            finally:
                conn.close()
        import psycopg

        from memcompile_langgraph.store.postgres import split_url
        from memcompile_langgraph.store.sql import pyformat

        conninfo, schema = split_url(self.url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            return conn.execute(pyformat(sql), args).fetchall()

    def tables(self) -> dict[str, list[tuple]]:
        """Every row of every table of the records."""
        if self.url is None:
            names = [r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type='table'")]
        else:
            from memcompile_langgraph.store.postgres import split_url

            schema = split_url(self.url)[1]
            names = [
                r[0]
                for r in self.rows("SELECT table_name FROM information_schema.tables WHERE table_schema=?", (schema,))
            ]
        return {t: self.rows(f'SELECT * FROM "{t}"') for t in names}


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: Path):
        self.path, self.url = path, None

    def open(self, create: bool = True):
        return sqlite_records.SqliteRecords(self.path, create=create)

    def where(self, path: Path) -> Where:
        return Where(path)

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
        self.server_url, self.path = server_url, None
        self.schema = self._new_schema()  # one store per test in a shared database
        self.url = f"{server_url}?schema={self.schema}"

    @staticmethod
    def _new_schema() -> str:
        return f"t_{uuid.uuid4().hex[:12]}"

    def open(self, create: bool = True):
        return open_records(None, self.url, create=create)

    def where(self, path: Path) -> Where:
        """A further store (a schema of its own) whose vectors stay in the directory."""
        return Where(path, f"{self.server_url}?schema={self._new_schema()}")

    def sql(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            conn.execute(f"SET search_path TO {self.schema}")
            for s in statements:
                conn.execute(s)
