"""Identity-addressed response cache (App. E): a hit costs no tokens and sends no request."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from .db import LLMDatabase


def identity(**parts: Any) -> str:
    """sha256 over the canonical JSON of every field that can change a reply."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """Entries are per user so that forgetting a user removes every request that carried their data."""

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
