"""BEAM chats in the benchmark's native layout (a folder per chat: `chat.json` + probing questions) as eval dialogues.

One user per chat; each batch is one session dated by its time anchor; message id N of batch B is dia_id `DB:N`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..ingest.loaders import UnusableInput, chat_turns
from .dataset import Benchmark, Dialogue, Question, answer_text, select

# the retrieval-scored categories, in report order; the others (abstention, summarization, instruction and
# preference following) have no evidence to retrieve and are left out, counted
CATEGORIES = (
    "information_extraction",
    "multi_session_reasoning",
    "temporal_reasoning",
    "knowledge_update",
    "event_ordering",
    "contradiction_resolution",
)
QUESTION_FILES = ("probing_questions.json", "probing_questions/probing_questions.json")
UPDATED = "updated_info"  # knowledge_update gold: the statement that is current, not the one it replaced
ORIGINAL = "original_info"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace").removeprefix("\ufeff"))
    except OSError as exc:
        raise UnusableInput(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, RecursionError):
        raise UnusableInput(f"{path}: not valid JSON") from None


def _flat(value: Any) -> list[Any]:
    """The leaves of nested lists: some event_ordering questions give one list of ids per event."""
    return [x for v in value for x in _flat(v)] if isinstance(value, list) else [value]


def gold_ids(category: str, source: Any, key: str = UPDATED) -> list[int]:
    """Message ids of a question's evidence: a list (of ids or of lists of ids), or a dict of lists (knowledge
    updates: the `key` one only)."""
    if isinstance(source, dict):
        source = source.get(key) if category == "knowledge_update" else list(source.values())
    out = [
        int(x)
        for x in _flat(source)
        if (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, str) and x.strip().isdecimal())
    ]
    return list(dict.fromkeys(out))


def chat_questions(user_id: str, probing: Any, dia: dict[int, str], skipped: Counter) -> list[Question]:
    if not isinstance(probing, dict):
        raise ValueError("probing questions are not an object of categories")
    out: list[Question] = []
    for category, items in probing.items():
        if category not in CATEGORIES:
            skipped[f"not_retrieval:{category}"] += len(items) if isinstance(items, list) else 1
            continue
        for item in items if isinstance(items, list) else []:
            question = item.get("question") if isinstance(item, dict) else None
            answer = next(
                (
                    answer_text(item.get(k))
                    for k in ("answer", "ideal_answer", "ideal_response")
                    if isinstance(item, dict) and answer_text(item.get(k))
                ),
                None,
            )
            if not isinstance(question, str) or not question.strip() or answer is None:
                skipped["bad_question"] += 1
                continue
            ids = gold_ids(category, item.get("source_chat_ids"))
            skipped["gold_id_not_in_chat"] += sum(i not in dia for i in ids)
            gold = tuple(dia[i] for i in ids if i in dia)
            old = gold_ids(category, item.get("source_chat_ids"), ORIGINAL) if category == "knowledge_update" else []
            replaced = tuple(dia[i] for i in old if i in dia and dia[i] not in gold)
            out.append(Question(f"{user_id}#{len(out)}", user_id, question.strip(), answer, category, gold, replaced))
    return out


def chat_folders(root: Path) -> list[Path]:
    """The chat folders under root (root itself when it is one), in numeric then name order."""
    if (root / "chat.json").is_file():
        return [root]
    if not root.is_dir():
        raise UnusableInput(f"{root}: not a folder of BEAM chats")
    found = [p for p in root.iterdir() if (p / "chat.json").is_file()]
    if not found:
        raise UnusableInput(f"{root}: no BEAM chat (a folder with chat.json) found")
    return sorted(found, key=lambda p: (not p.name.isdecimal(), int(p.name) if p.name.isdecimal() else 0, p.name))


def load_chat(folder: Path, user_id: str, skipped: Counter) -> Dialogue:
    questions_file = next((folder / q for q in QUESTION_FILES if (folder / q).is_file()), None)
    if questions_file is None:
        raise UnusableInput(f"{folder}: no probing_questions.json (or probing_questions/probing_questions.json)")
    try:
        turns, dia = chat_turns(_read_json(folder / "chat.json"))
        questions = chat_questions(user_id, _read_json(questions_file), dia, skipped)
    except ValueError as exc:
        if isinstance(exc, UnusableInput):
            raise
        raise UnusableInput(f"{folder}: {exc}") from None
    return Dialogue(user_id, turns, questions)


def load_beam(path: str | Path, samples: Iterable[str] | None = None) -> Benchmark:
    """Every chat under a BEAM folder (or the named ones), with its retrieval-scored probing questions."""
    root = Path(path)
    folders = select(chat_folders(root), samples, lambda p: p.name, root)
    bench = Benchmark("beam", CATEGORIES, [])
    for folder in folders:
        bench.dialogues.append(load_chat(folder, folder.name, bench.skipped))
    bench.skipped = Counter({k: v for k, v in bench.skipped.items() if v})
    return bench
