"""Usage ledger per user and stage (App. E, Eq. 24): tokens from the model's usage metadata, split by phase."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

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
FIELDS = (
    "calls",
    "cache_hits",
    "failures",
    "transport_retries",
    "estimated_calls",
    "prompt_tokens",
    "completion_tokens",
)


class UsageLedger(Protocol):
    """Counts added per (user, stage), FIELDS only (store/llm_file.py keeps them in the store directory)."""

    def add(self, user_id: str, stage: str, **amounts: int) -> None: ...


def check_fields(amounts: dict[str, int]) -> None:
    unknown = set(amounts) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown ledger fields: {sorted(unknown)}")


def summary(rows: Iterable[tuple[Any, ...]]) -> dict[str, Any]:
    """Rows (stage, phase, *FIELDS) -> {"stages": {stage: counts}, "construction"/"query"/"evaluation": totals,
    "total_tokens": construction + query}."""
    out: dict[str, Any] = {"stages": {}}
    for stage, phase, *values in rows:
        counts = dict(zip(FIELDS, values))
        out["stages"][stage] = {"phase": phase, **counts}
        totals = out.setdefault(phase, dict.fromkeys(FIELDS, 0))
        for k, v in counts.items():
            totals[k] += v
    out["total_tokens"] = sum(
        out.get(phase, {}).get(k, 0)
        for phase in ("construction", "query")
        for k in ("prompt_tokens", "completion_tokens")
    )
    return out
