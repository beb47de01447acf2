"""Usage ledger per user and stage (App. E, Eq. 24): tokens from the model's usage metadata, split by phase."""

from __future__ import annotations

from typing import Any

from .db import LLMDatabase

# Construction is paid once per conversation; query time per question; the judge is reported apart (Table 8).
PHASES = {
    "fact": "construction",
    "metadata": "construction",
    "intent": "query",
    "schedule": "query",
    "frontier": "query",
    "answer": "query",
    "judge": "evaluation",
}
_FIELDS = (
    "calls",
    "cache_hits",
    "failures",
    "transport_retries",
    "estimated_calls",
    "prompt_tokens",
    "completion_tokens",
)


class UsageLedger:
    def __init__(self, db: LLMDatabase):
        self.db = db

    def add(self, user_id: str, stage: str, **amounts: int) -> None:
        unknown = set(amounts) - set(_FIELDS)
        if unknown:
            raise ValueError(f"unknown ledger fields: {sorted(unknown)}")
        cols = list(amounts)
        self.db.execute(
            f"INSERT INTO usage (user_id, stage, phase, {', '.join(cols)}) VALUES (?, ?, ?{', ?' * len(cols)}) "
            f"ON CONFLICT(user_id, stage) DO UPDATE SET {', '.join(f'{c} = {c} + excluded.{c}' for c in cols)}",
            (user_id, stage, PHASES.get(stage, "query"), *(int(amounts[c]) for c in cols)),
        )

    def summary(self, user_id: str) -> dict[str, Any]:
        """{"stages": {stage: counts}, "construction"/"query"/"evaluation": totals, "total": construction + query}."""
        rows = self.db.execute(
            f"SELECT stage, phase, {', '.join(_FIELDS)} FROM usage WHERE user_id=? ORDER BY stage", (user_id,)
        )
        out: dict[str, Any] = {"stages": {}}
        for stage, phase, *values in rows:
            counts = dict(zip(_FIELDS, values))
            out["stages"][stage] = {"phase": phase, **counts}
            totals = out.setdefault(phase, dict.fromkeys(_FIELDS, 0))
            for k, v in counts.items():
                totals[k] += v
        out["total_tokens"] = sum(
            out.get(phase, {}).get(k, 0)
            for phase in ("construction", "query")
            for k in ("prompt_tokens", "completion_tokens")
        )
        return out

    def delete_user(self, user_id: str) -> None:
        self.db.execute("DELETE FROM usage WHERE user_id=?", (user_id,))
