"""How LangGraph store values become MemCompile turns and back, and how a store `filter` matches a value.

A value becomes one turn (the key is its dia_id):
- text: value["text"] when a string; else value["content"] (a message: a string, or content blocks whose text parts
  are joined); else the whole value as compact JSON (so nothing given is unsearchable).
- speaker: value["speaker"], else value["name"], else the message role ("user"/"human" -> user_speaker,
  "assistant"/"ai" -> assistant_speaker, any other role as written), else user_speaker.
- time: value["time"] (any format MemCompile parses; kept raw as given), else the time of the put.
- session, session_label, image_caption, image_query: taken when present.
Other fields are not stored (packets hold only the turn): `get` returns the stored turn, see turn_value.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..ingest.turn_input import BadTurn, coerce_turn, turn_record
from ..model import SourcePacket

ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}
PASSED_THROUGH = ("session", "session_label", "image_caption", "image_query")
_COMPARE = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # LangChain content blocks: "text" strings and {"type": "text", "text": ...}
        parts = [b if isinstance(b, str) else b.get("text") for b in content if isinstance(b, (str, Mapping))]
        texts = [p for p in parts if isinstance(p, str)]
        return "\n".join(texts) if texts else None
    return None


def value_text(value: Mapping[str, Any]) -> str:
    if isinstance(value.get("text"), str):
        return value["text"]
    text = _content_text(value.get("content"))
    if text is not None:
        return text
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def value_speaker(value: Mapping[str, Any], user_speaker: str, assistant_speaker: str) -> str:
    for field in ("speaker", "name"):
        if isinstance(value.get(field), str) and value[field].strip():
            return value[field]
    role = value.get("role", value.get("type"))
    if isinstance(role, str) and role.strip():
        side = ROLES.get(role.strip().lower())
        return {"user": user_speaker, "assistant": assistant_speaker}.get(side, role) if side else role
    return user_speaker


ESCAPE = "\u2205"  # "∅": a dia_id cannot be empty (an empty one is assigned D<session>:<n>), a store key can


def key_dia_id(key: str) -> str:
    """The dia_id a store key is kept under: the key itself, except "" (and keys starting with the escape, so the
    mapping stays one-to-one) get the escape in front."""
    return ESCAPE + key if not key or key.startswith(ESCAPE) else key


def dia_id_key(dia_id: str) -> str:
    """The store key of a stored dia_id (key_dia_id's inverse)."""
    return dia_id.removeprefix(ESCAPE)


def value_turn(value: Any, key: str, user_speaker: str, assistant_speaker: str) -> dict[str, Any]:
    """The turn a put stores; ValueError (one line) when it cannot be stored, before anything is changed."""
    if not isinstance(value, Mapping):
        raise ValueError(f"store value must be a JSON object, got {type(value).__name__}")
    turn: dict[str, Any] = {
        "speaker": value_speaker(value, user_speaker, assistant_speaker),
        "text": value_text(value),
        "time": value.get("time") or datetime.now().astimezone().isoformat(timespec="seconds"),
        "dia_id": key,
    }
    turn.update({f: value[f] for f in PASSED_THROUGH if value.get(f) not in (None, "")})
    try:
        coerced = coerce_turn(turn)
    except BadTurn as exc:
        raise ValueError(f"store value under key {key!r} cannot be a turn: {exc}") from None
    if coerced.dia_id != key:
        raise ValueError(f"store key {key!r} must be printable text without surrounding spaces")
    return turn


def turn_value(p: SourcePacket) -> dict[str, Any]:
    """What get and search return for a stored turn: the turn as add_turns takes it, with its parsed time."""
    return {**turn_record(p), "session_time": p.session_time}  # session_time: ISO 8601 when the time parsed


def _matches(actual: Any, condition: Any) -> bool:
    operators = isinstance(condition, Mapping) and condition and all(str(k).startswith("$") for k in condition)
    if operators:
        for op, expected in condition.items():
            if op not in _COMPARE:
                raise ValueError(f"unsupported filter operator {op!r} (use {', '.join(_COMPARE)})")
            try:
                if not _COMPARE[op](actual, expected):
                    return False
            except TypeError:  # e.g. None > 3: the item does not match
                return False
        return True
    if isinstance(condition, Mapping):
        return isinstance(actual, Mapping) and all(_matches(actual.get(k), c) for k, c in condition.items())
    return actual == condition


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter: every key's condition holds (equality, nested objects, $eq $ne $gt $gte $lt $lte)."""
    return not filter or all(_matches(value.get(k), c) for k, c in filter.items())
