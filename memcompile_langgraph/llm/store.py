"""The LLM side of a store directory: response cache and usage ledger in one SQLite file (App. E)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import MemCompileConfig
from .calls import LLMClient
from .db import LLMDatabase
from .replies import ResponseCache
from .usage import UsageLedger


class LLMStore:
    def __init__(self, path: str | Path | None):
        self.db = LLMDatabase(path)
        self.cache = ResponseCache(self.db)
        self.ledger = UsageLedger(self.db)

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
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.db.close()
