"""Input files: LoCoMo JSON (a list of samples or one sample), a BEAM chat.json, a JSON list of turns, or JSONL turns.
A turn is {speaker, text, ...} or a chat message {role, content, ...} (the role, capitalised, is its speaker)."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SESSION = re.compile(r"^session_(\d+)$")
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")  # BEAM's generator's "->-> batch,turn" tag ending user messages
FORMATS = (
    "LoCoMo samples, a BEAM chat.json, a JSON list of turns or JSONL turns (a turn: {speaker, text} or a chat "
    "message {role, content})"
)
# the first and last lines of a `memcompile export` file: a file without its last line was cut short (a full disk,
# a copy interrupted) and is refused whole
EXPORT_HEAD = "memcompile_export"
EXPORT_END = "memcompile_export_end"


class UnusableInput(ValueError):
    """The whole file cannot be used; the message is one line for the user."""


@dataclass
class Conversation:
    user_id: str | None  # the sample id, or None for plain turn files
    turns: list[Any] = field(default_factory=list)
    qa: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: int = 0
    bad_places: list[str] = field(default_factory=list)  # where the unreadable lines were ("line 7")
    places: list[str] | None = None  # where each turn is in the file ("line 3"); None: its index in `turns`

    def place(self, i: int) -> str:
        """Where turns[i] is in the file, for a line saying why it was skipped."""
        if self.places is not None:
            return self.places[i]
        turn = self.turns[i]
        dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
        where = f"turn {i + 1}" + (f" ({dia_id})" if isinstance(dia_id, str) and dia_id else "")
        return f"{self.user_id} {where}" if self.user_id is not None else where


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


def _batch_time(batch: dict[str, Any]) -> str:
    """The batch's time anchor, or the first one its messages carry (the published chats put it there)."""
    anchor = batch.get("time_anchor")
    if not isinstance(anchor, str) or not anchor.strip():
        messages = (
            m for turn in batch.get("turns") or [] if isinstance(turn, list) for m in turn if isinstance(m, dict)
        )
        anchor = next((m["time_anchor"] for m in messages if isinstance(m.get("time_anchor"), str)), "")
    return anchor.strip()


def chat_turns(chat: Any) -> tuple[list[Any], dict[int, str]]:
    """Turns in the loaders' schema and message id -> dia_id; a malformed message becomes a turn the ingest counts."""
    if not isinstance(chat, list):
        raise ValueError("chat.json is not a list of batches")
    turns: list[Any] = []
    dia: dict[int, str] = {}
    for n, batch in enumerate(chat, 1):
        if not isinstance(batch, dict) or not isinstance(batch.get("turns"), list):
            continue
        number = batch.get("batch_number")
        b = number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else n
        time = _batch_time(batch)
        for message in (m for turn in batch["turns"] for m in (turn if isinstance(turn, list) else [turn])):
            if not isinstance(message, dict) or not isinstance(message.get("id"), int) or message["id"] in dia:
                turns.append(message)  # no usable id: stored nowhere, counted as a bad turn
                continue
            role, content = message.get("role"), message.get("content")
            dia_id = dia[message["id"]] = f"D{b}:{message['id']}"
            text = _MARKER.sub("", content) if isinstance(content, str) else content
            speaker = role.strip().capitalize() if isinstance(role, str) else role
            turns.append(
                {
                    "speaker": speaker,
                    "text": text,
                    "time": time,
                    "session": b,
                    "session_label": f"batch {b}",
                    "dia_id": dia_id,
                }
            )
    return turns, dia


def _from_json(data: Any, path: Path) -> list[Conversation]:
    if isinstance(data, dict) and "conversation" in data:
        data = [data]
    if isinstance(data, dict) and "speaker" in data:
        return [Conversation(None, [data])]
    if isinstance(data, dict) and isinstance(data.get("turns"), list):
        return [Conversation(None, data["turns"])]
    if not isinstance(data, list) or not data:
        raise UnusableInput(f"{path}: expected {FORMATS}")
    if all(isinstance(b, dict) and isinstance(b.get("turns"), list) for b in data):  # BEAM: a list of batches
        return [Conversation(None, chat_turns(data)[0])]
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
    if any(isinstance(t, dict) and ("speaker" in t or "role" in t) for t in data):
        return [Conversation(None, [message_turn(t) for t in data])]
    raise UnusableInput(f"{path}: no turns found; expected {FORMATS}")


def message_turn(record: Any) -> Any:
    """A chat message {role, content, ...} as a turn (its role, capitalised, is the speaker); anything else as is."""
    if not isinstance(record, dict) or "speaker" in record or not isinstance(record.get("role"), str):
        return record
    turn = {k: v for k, v in record.items() if k not in ("role", "content")}
    turn["speaker"] = record["role"].strip().capitalize()
    turn.setdefault("text", record.get("content"))
    return turn


def _from_jsonl(text: str, path: Path) -> list[Conversation]:
    places: list[str] = []
    conv = Conversation(None, places=places)
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            conv.turns.append(message_turn(json.loads(line)))
            places.append(f"line {n}")
        except (json.JSONDecodeError, RecursionError):  # a line nested past the parser's depth costs that line
            conv.bad_lines += 1
            conv.bad_places.append(f"line {n}")
    if not conv.turns:
        raise UnusableInput(f"{path}: not valid JSON or JSONL")
    return [_exported(conv, path)]


def _marks(turn: Any, key: str) -> bool:
    return isinstance(turn, dict) and key in turn


def _exported(conv: Conversation, path: Path) -> Conversation:
    """A `memcompile export` file without its marks; refused whole unless it ends with its end mark, counting
    every turn, and every line between the marks reads."""
    if not conv.turns or not _marks(conv.turns[0], EXPORT_HEAD):
        return conv
    end = conv.turns[-1]
    turns = conv.turns[1:-1]
    if len(conv.turns) < 2 or not _marks(end, EXPORT_END) or end[EXPORT_END] != len(turns) or conv.bad_lines:
        raise UnusableInput(f"{path}: an export cut short (no end mark after its last turn): nothing stored")
    user = conv.turns[0].get("user")
    # the user the export names is whose turns these are (ingest stores them there unless --user says otherwise)
    return Conversation(user if isinstance(user, str) and user else None, turns, places=(conv.places or [])[1:-1])


def _skip_value(text: str, start: int) -> int:
    """The end of the array or object starting at text[start], found by bracket depth outside strings (no recursion,
    so a value nested too deeply for the parser can still be stepped over)."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
    raise json.JSONDecodeError("unterminated value", text, start)


def _array_items(text: str) -> tuple[list[Any], int]:
    """A top-level JSON array read item by item: (the items that parse, how many were nested too deeply)."""
    decoder, items, bad = json.JSONDecoder(), list[Any](), 0
    pos = text.index("[") + 1
    while True:
        pos = len(text) - len(text[pos:].lstrip())
        if text.startswith("]", pos) and not items and not bad:
            return items, bad
        try:
            item, pos = decoder.raw_decode(text, pos)
            items.append(item)
        except RecursionError:
            pos, bad = _skip_value(text, pos), bad + 1
        pos = len(text) - len(text[pos:].lstrip())
        if text.startswith("]", pos) and not text[pos + 1 :].strip():
            return items, bad
        if not text.startswith(",", pos):
            raise json.JSONDecodeError("expected ',' or ']'", text, pos)
        pos += 1


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
    except RecursionError:  # some item nested past the parser's depth: it alone is skipped (counted)
        conversations = _deep_file(text, path)
    _require_usable_turn(conversations, path)
    return conversations


def _deep_file(text: str, path: Path) -> list[Conversation]:
    """A file json.loads could not parse for depth: a JSON array of turns item by item, else JSONL line by line."""
    if text.lstrip().startswith("["):
        try:
            items, bad = _array_items(text)
        except json.JSONDecodeError:  # not one array (JSONL whose first line is deep)
            items, bad = [], 0
        if items:
            conversations = _from_json(items, path)
            conversations[0].bad_lines += bad
            return conversations
    return _from_jsonl(text, path)


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
        raise UnusableInput(f"{path}: no turns found; expected {FORMATS}")
    detail = ", ".join(f"{k}={v}" for k, v in reasons.most_common())
    raise UnusableInput(f"{path}: no usable turns ({detail}); expected {FORMATS}")
