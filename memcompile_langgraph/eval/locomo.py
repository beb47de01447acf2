"""LoCoMo questions and gold evidence: the benchmark's `locomo10.json` format turned into eval dialogues."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..ingest.loaders import UnusableInput, load_file
from .dataset import Benchmark, Dialogue, Question, answer_text, select

# LoCoMo's numeric categories under the names the paper's tables use; 5 (adversarial) is excluded everywhere
CATEGORIES = {4: "single-hop", 1: "multi-hop", 2: "temporal", 3: "open-domain"}
ADVERSARIAL = 5
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")  # "D:11:26" appears once in the benchmark for "D11:26"


def parse_evidence(evidence: Any) -> tuple[str, ...]:
    """Gold dia_ids from an evidence list whose strings may hold several ids (`;`, `,` or space separated)."""
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(evidence, list):
        return ()
    ids = [f"D{a}:{b}" for item in evidence if isinstance(item, str) for a, b in _DIA_ID.findall(item)]
    return tuple(dict.fromkeys(ids))


def skip_reason(item: Any) -> str | None:
    if not isinstance(item, dict) or not isinstance(item.get("question"), str) or not item["question"].strip():
        return "bad_question"
    if item.get("category") == ADVERSARIAL:
        return "adversarial"
    if item.get("category") not in CATEGORIES:
        return "unknown_category"
    if answer_text(item.get("answer")) is None:
        return "no_answer"
    return None


def locomo_questions(user_id: str, qa: Iterable[Any], skipped: Counter, dia_ids: set[str]) -> list[Question]:
    out = []
    for i, item in enumerate(qa):
        reason = skip_reason(item)
        if reason:
            skipped[reason] += 1
            continue
        # an id the dialogue does not hold (two in the dev split) can never be retrieved: counted, not scored
        ids = parse_evidence(item.get("evidence"))
        if missing := sum(g not in dia_ids for g in ids):
            skipped["gold_id_not_in_dialogue"] += missing
        gold = tuple(g for g in ids if g in dia_ids)
        category = CATEGORIES[item["category"]]
        out.append(
            Question(
                f"{user_id}#{i}", user_id, item["question"].strip(), answer_text(item["answer"]) or "", category, gold
            )
        )
    return out


def load_locomo(path: str | Path, samples: Iterable[str] | None = None) -> Benchmark:
    """Every sample of a LoCoMo file (or the named ones), with its non-adversarial questions."""
    conversations = [c for c in load_file(path) if c.user_id is not None]
    if not conversations:
        raise UnusableInput(f"{path}: no LoCoMo samples (objects with 'conversation' and 'qa') found")
    conversations = select(conversations, samples, lambda c: str(c.user_id), path)
    bench = Benchmark("locomo", tuple(CATEGORIES.values()), [])
    for conv in conversations:
        d = Dialogue(str(conv.user_id), conv.turns)
        dia_ids = {t["dia_id"] for t in conv.turns if isinstance(t, dict) and isinstance(t.get("dia_id"), str)}
        d.questions = locomo_questions(d.user_id, conv.qa if isinstance(conv.qa, list) else [], bench.skipped, dia_ids)
        bench.dialogues.append(d)
    return bench
