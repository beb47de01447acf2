"""The SQLite file that holds the LLM response cache and usage ledger, beside the record store (App. E)."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

FILENAME = "llm.sqlite3"

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    user_id TEXT NOT NULL, key TEXT NOT NULL, call_type TEXT NOT NULL, text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (user_id, key));
CREATE TABLE IF NOT EXISTS usage (
    user_id TEXT NOT NULL, stage TEXT NOT NULL, phase TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0, cache_hits INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0,
    transport_retries INTEGER NOT NULL DEFAULT 0, estimated_calls INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, stage));
"""


class LLMDatabase:
    """One connection shared by worker threads; every statement runs under one lock."""

    def __init__(self, path: str | Path | None):
        target = str(Path(path) / FILENAME) if path is not None else ":memory:"
        if path is not None and not os.path.exists(target):  # cached replies quote turns: 0600 whatever the umask,
            os.close(os.open(target, os.O_RDWR | os.O_CREAT, 0o600))  # and SQLite gives its WAL the same mode
        self.conn = sqlite3.connect(target, timeout=60, check_same_thread=False, isolation_level=None)
        self.lock = threading.RLock()
        with self.lock:
            if path is not None:
                self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA busy_timeout=60000")
            self.conn.executescript(SCHEMA)

    @staticmethod
    def exists(path: str | Path | None) -> bool:
        return path is not None and (Path(path) / FILENAME).is_file()

    def execute(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.conn.execute(sql, args).fetchall()

    def close(self) -> None:
        with self.lock:
            self.conn.close()
