"""LongMemEval-S instances in the same session/turn schema as LoCoMo (App. D): one store per instance."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..ingest.loaders import UnusableInput
from .dataset import Benchmark, Dialogue, Question, answer_text, select

QUESTION_TYPES = (
    "single-session-user",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
    "single-session-assistant",
    "single-session-preference",
)


def _turns(sessions: list[Any], dates: list[Any], ids: list[Any]) -> tuple[list[Any], list[str]]:
    """Each haystack session keeps its id (as session label) and date; a turn's dia_id is `<session id>:<position>`."""
    turns, gold = [], []
    for n, (session, date, sid) in enumerate(zip(sessions, dates, ids), 1):
        if not isinstance(session, list):
            continue  # a malformed session: its turns are simply absent
        for pos, turn in enumerate(session, 1):
            if not isinstance(turn, dict):
                turns.append(turn)  # counted as a bad turn by the ingest graph
                continue
            dia_id = f"{sid}:{pos}"
            time = date if isinstance(date, str) else ""
            turns.append(
                {
                    "speaker": turn.get("role"),
                    "text": turn.get("content"),
                    "time": time,
                    "session": n,
                    "session_label": str(sid),
                    "dia_id": dia_id,
                }
            )
            if turn.get("has_answer") is True:
                gold.append(dia_id)  # turn-level labels score retrieval only; they never reach the store
    return turns, gold


def instance_dialogue(item: Any) -> Dialogue:
    """One instance -> one dialogue with one question; ValueError names why an instance is unusable."""
    if not isinstance(item, dict):
        raise ValueError("not_an_object")
    qid, question, answer = item.get("question_id"), item.get("question"), answer_text(item.get("answer"))
    sessions, dates, ids = item.get("haystack_sessions"), item.get("haystack_dates"), item.get("haystack_session_ids")
    if not isinstance(qid, str) or not qid.strip():
        raise ValueError("missing_question_id")
    if not (isinstance(sessions, list) and isinstance(dates, list) and isinstance(ids, list)):
        raise ValueError("bad_haystack")
    if not len(sessions) == len(dates) == len(ids):
        raise ValueError("bad_haystack")
    if answer is None or not isinstance(question, str) or not question.strip():
        raise ValueError("bad_question")
    turns, gold = _turns(sessions, dates, ids)
    qtype = item.get("question_type")
    if not isinstance(qtype, str):
        qtype = "unknown"
    return Dialogue(
        qid, turns, [Question(f"{qid}#0", qid, question.strip(), answer, qtype, tuple(dict.fromkeys(gold)))]
    )


def load_longmemeval(path: str | Path, samples: Iterable[str] | None = None) -> Benchmark:
    """Every usable instance of a LongMemEval(-S) JSON file; malformed or repeated instances are skipped and counted."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        raise UnusableInput(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, RecursionError):
        raise UnusableInput(f"{path}: not valid JSON") from None
    if not isinstance(data, list) or not data:
        raise UnusableInput(f"{path}: expected a JSON list of LongMemEval instances")
    bench = Benchmark("longmemeval", QUESTION_TYPES, [])
    seen: set[str] = set()
    for item in data:
        try:
            d = instance_dialogue(item)
        except ValueError as exc:
            bench.skipped[str(exc)] += 1
            continue
        if d.user_id in seen:
            bench.skipped["duplicate_question_id"] += 1
            continue
        seen.add(d.user_id)
        bench.dialogues.append(d)
    if not bench.dialogues:
        raise UnusableInput(f"{path}: no usable LongMemEval instance ({dict(bench.skipped)})")
    bench.dialogues = select(bench.dialogues, samples, lambda d: d.user_id, path)
    return bench
