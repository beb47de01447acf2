"""Identity-addressed response cache (App. E): a hit costs no tokens and sends no request."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol


def identity(**parts: Any) -> str:
    """sha256 over the canonical JSON of every field that can change a reply."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache(Protocol):
    """Replies by (user, identity): entries are per user so that forgetting a user removes every request that carried
    their data (store/llm_file.py keeps them in the store directory)."""

    def get(self, user_id: str, key: str) -> str | None: ...

    def put(
        self, user_id: str, key: str, call_type: str, text: str, prompt_tokens: int, completion_tokens: int
    ) -> None: ...
