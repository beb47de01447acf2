"""The LLM side of a store directory: the response cache and usage ledger of the LLM stages in one SQLite file,
llm.sqlite3, beside the records (App. E)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ..config import MemCompileConfig
from ..llm.calls import LLMClient
from ..llm.usage import FIELDS, PHASES, check_fields, summary
from .layout import private_folder
from .locks import FileLock
from .wal import BUSY_MS, LogScrub

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
        self.log = LogScrub(self.conn, target)
        # processes opening a new file at once: switching to WAL can fail with "locked" without waiting (the
        # records' setup lock, store/sqlite.py)
        setup = (
            FileLock(private_folder(Path(path) / "locks") / "setup.lock").hold() if path is not None else nullcontext()
        )
        with self.lock, setup:
            if path is not None:
                self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
            self.conn.executescript(SCHEMA)

    @staticmethod
    def exists(path: str | Path | None) -> bool:
        return path is not None and (Path(path) / FILENAME).is_file()

    def execute(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.lock:
            rows = self.conn.execute(sql, args).fetchall()
            self.log.after_write()
            return rows

    def scrub(self) -> None:
        """Empties the WAL after deletes (store/wal.py)."""
        with self.lock:
            self.log.after_delete()

    def close(self) -> None:
        with self.lock:
            self.conn.close()


class SQLiteResponseCache:
    """llm/replies.py's ResponseCache in the `responses` table."""

    def __init__(self, db: LLMDatabase):
        self.db = db

    def get(self, user_id: str, key: str) -> str | None:
        rows = self.db.execute("SELECT text FROM responses WHERE user_id=? AND key=?", (user_id, key))
        return rows[0][0] if rows else None

    def put(
        self, user_id: str, key: str, call_type: str, text: str, prompt_tokens: int, completion_tokens: int
    ) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO responses (user_id, key, call_type, text, prompt_tokens, completion_tokens, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (user_id, key, call_type, text, prompt_tokens, completion_tokens, time.time()),
        )

    def size(self, user_id: str) -> int:
        return self.db.execute("SELECT COUNT(*) FROM responses WHERE user_id=?", (user_id,))[0][0]

    def delete_user(self, user_id: str) -> None:
        self.db.execute("DELETE FROM responses WHERE user_id=?", (user_id,))


class SQLiteUsageLedger:
    """llm/usage.py's UsageLedger in the `usage` table, one row per (user, stage) counted up in place."""

    def __init__(self, db: LLMDatabase):
        self.db = db

    def add(self, user_id: str, stage: str, **amounts: int) -> None:
        check_fields(amounts)
        cols = list(amounts)
        self.db.execute(
            f"INSERT INTO usage (user_id, stage, phase, {', '.join(cols)}) VALUES (?, ?, ?{', ?' * len(cols)}) "
            f"ON CONFLICT(user_id, stage) DO UPDATE SET {', '.join(f'{c} = {c} + excluded.{c}' for c in cols)}",
            (user_id, stage, PHASES.get(stage, "query"), *(int(amounts[c]) for c in cols)),
        )

    def summary(self, user_id: str) -> dict[str, Any]:
        return summary(
            self.db.execute(
                f"SELECT stage, phase, {', '.join(FIELDS)} FROM usage WHERE user_id=? ORDER BY stage", (user_id,)
            )
        )

    def delete_user(self, user_id: str) -> None:
        self.db.execute("DELETE FROM usage WHERE user_id=?", (user_id,))


class LLMStore:
    def __init__(self, path: str | Path | None):
        self.db = LLMDatabase(path)
        self.cache = SQLiteResponseCache(self.db)
        self.ledger = SQLiteUsageLedger(self.db)

    @classmethod
    def open(cls, path: str | Path | None, create: bool) -> LLMStore | None:
        """The store's LLM file; None when it does not exist and no model asks for it (offline stores stay as they are)."""
        return cls(path) if create or LLMDatabase.exists(path) else None

    def client(self, model: Any, config: MemCompileConfig, user_id: str = "default") -> LLMClient:
        return LLMClient(model, config, self.cache, self.ledger, user_id)

    def usage(self, user_id: str) -> dict[str, Any]:
        return self.ledger.summary(user_id)

    def delete_user(self, user_id: str, whole_user: bool = True) -> None:
        """The user's cached replies (and with whole_user, ledger rows), overwritten on disk rather than left in
        free pages or the WAL."""
        self.db.execute("PRAGMA secure_delete=ON")
        self.cache.delete_user(user_id)
        if whole_user:
            self.ledger.delete_user(user_id)
        self.db.scrub()

    def close(self) -> None:
        self.db.close()
