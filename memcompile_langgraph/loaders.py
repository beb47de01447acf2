"""Input files: LoCoMo JSON (a list of samples or one sample), a JSON list of turns, or JSONL turns."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SESSION = re.compile(r"^session_(\d+)$")


class UnusableInput(ValueError):
    """The whole file cannot be used; the message is one line for the user."""


@dataclass
class Conversation:
    user_id: str | None  # the sample id, or None for plain turn files
    turns: list[Any] = field(default_factory=list)
    qa: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: int = 0


def locomo_turns(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """Sessions in numeric order; each turn gets its session index, label and the session's date-time."""
    sessions = sorted((int(m.group(1)), key) for key in conversation if (m := _SESSION.match(key)))
    turns: list[Any] = []
    for n, key in sessions:
        value = conversation[key]
        if not isinstance(value, list):
            continue
        time = conversation.get(f"{key}_date_time", "")
        for raw in value:
            if isinstance(raw, dict):
                raw = {**raw, "session": n, "session_label": key, "time": time if isinstance(time, str) else ""}
            turns.append(raw)  # non-objects are counted as bad turns by the ingest graph
    return turns


def _from_json(data: Any, path: Path) -> list[Conversation]:
    if isinstance(data, dict) and "conversation" in data:
        data = [data]
    if isinstance(data, dict) and "speaker" in data:
        return [Conversation(None, [data])]
    if isinstance(data, dict) and isinstance(data.get("turns"), list):
        return [Conversation(None, data["turns"])]
    if not isinstance(data, list) or not data:
        raise UnusableInput(f"{path}: expected LoCoMo samples, a list of turns or JSONL turns")
    if all(isinstance(s, dict) and isinstance(s.get("conversation"), dict) for s in data):
        out = []
        for i, s in enumerate(data):
            sid = s.get("sample_id")
            out.append(
                Conversation(
                    str(sid) if sid not in (None, "") else f"sample-{i}",
                    locomo_turns(s["conversation"]),
                    s.get("qa") or [],
                )
            )
        return out
    if any(isinstance(t, dict) and "speaker" in t for t in data):
        return [Conversation(None, data)]
    raise UnusableInput(f"{path}: no LoCoMo samples or turns with a 'speaker' found")


def _from_jsonl(text: str, path: Path) -> list[Conversation]:
    conv = Conversation(None)
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            conv.turns.append(json.loads(line))
        except json.JSONDecodeError:
            conv.bad_lines += 1
    if not conv.turns:
        raise UnusableInput(f"{path}: not valid JSON or JSONL")
    return [conv]


def load_file(path: str | Path) -> list[Conversation]:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UnusableInput(f"{path}: cannot read ({exc.strerror or exc})") from None
    text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")  # bad bytes become U+FFFD, counted per turn
    if not text.strip():
        raise UnusableInput(f"{path}: file is empty")
    try:
        conversations = _from_json(json.loads(text), path)
    except json.JSONDecodeError:
        conversations = _from_jsonl(text, path)
    except RecursionError:
        raise UnusableInput(f"{path}: JSON nested too deeply") from None
    _require_usable_turn(conversations, path)
    return conversations


def _require_usable_turn(conversations: list[Conversation], path: Path) -> None:
    """A file none of whose turns could be stored is unusable as a whole (and nothing is written)."""
    from .turn_input import BadTurn, coerce_turn

    reasons: Counter = Counter()
    for conv in conversations:
        for turn in conv.turns:
            try:
                coerce_turn(turn)
                return
            except BadTurn as exc:
                reasons[str(exc)] += 1
    if not reasons:
        raise UnusableInput(f"{path}: no turns found")
    detail = ", ".join(f"{k}={v}" for k, v in reasons.most_common())
    raise UnusableInput(f"{path}: no usable turns ({detail})")
