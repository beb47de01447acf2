"""How LangGraph store values become MemCompile turns and back, and how a store `filter` matches a value.

A put keeps two things: the value itself, unchanged (a JSON document beside the turn's packet, see item_document),
and one turn made from it that MemCompile indexes (the key is its dia_id):
- text: with `index=[paths]` (LangGraph's field paths), the text at those paths; else value["text"] when a string;
  else value["content"] (a message: a string, or content blocks whose text parts are joined); else one
  "field: value" line per leaf (so nothing given is unsearchable).
- speaker: value["speaker"], else value["name"], else the message role ("user"/"human" -> user_speaker,
  "assistant"/"ai" -> assistant_speaker, any other role as written), else user_speaker.
- time: value["time"] (any format MemCompile parses; kept raw as given), else the time of the first put.
- session, session_label, image_caption, image_query: taken when present.
A field a turn cannot hold (invisible text, a "time" or "session" that is an object) is not the turn's; the value
keeps it, as any JSON object is a store value.
Turns written by other surfaces (add_turns, the chat nodes) have no document: they read back as the turn.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from datetime import time as time_of_day
from typing import Any

from langgraph.store.base import get_text_at_path

from ..ingest.turn_input import BadTurn, coerce_turn, turn_record, visible
from ..model import SourcePacket
from ..text.terms import clean_text

ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}
PASSED_THROUGH = ("session", "session_label", "image_caption", "image_query")
ORDERED = ("$gt", "$gte", "$lt", "$lte")  # compared as numbers, as InMemoryStore does


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # LangChain content blocks: "text" strings and {"type": "text", "text": ...}
        parts = [b if isinstance(b, str) else b.get("text") for b in content if isinstance(b, (str, Mapping))]
        texts = [p for p in parts if isinstance(p, str)]
        return "\n".join(texts) if texts else None
    return None


def _leaves(value: Any, path: str = "") -> list[str]:
    if isinstance(value, Mapping):
        return [line for k, v in value.items() for line in _leaves(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [line for i, v in enumerate(value) for line in _leaves(v, f"{path}[{i}]")]
    leaf = value if isinstance(value, str) else json.dumps(value)
    return [f"{path}: {leaf}" if path else leaf]


def _shown(text: str) -> bool:
    """Text a turn can hold: something visible once cleaned as a turn's fields are (not only spaces, format and
    control characters)."""
    return visible(clean_text(text))


def value_text(value: Mapping[str, Any], index: list[str] | None = None) -> str:
    if index:
        texts = [t for p in index for t in get_text_at_path(value, p)]
        if any(_shown(t) for t in texts):
            return "\n".join(t for t in texts if _shown(t))
    if isinstance(value.get("text"), str) and _shown(value["text"]):
        return str(value["text"])
    text = _content_text(value.get("content"))
    if text is not None and _shown(text):
        return text
    leaves = "\n".join(_leaves(value))
    return leaves if _shown(leaves) else json.dumps(value, ensure_ascii=False)


def value_speaker(value: Mapping[str, Any], user_speaker: str, assistant_speaker: str) -> str:
    for field in ("speaker", "name"):
        if isinstance(value.get(field), str) and _shown(value[field]):
            return str(value[field])
    role = value.get("role", value.get("type"))
    if isinstance(role, str) and _shown(role):
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


def value_turn(
    value: Any,
    key: str,
    user_speaker: str,
    assistant_speaker: str,
    index: list[str] | None = None,
    time: str | None = None,
) -> dict[str, Any]:
    """The turn a put stores (time: the put's when the value has none); ValueError (one line) when it cannot be
    stored, before anything is changed."""
    if not isinstance(value, Mapping):
        raise ValueError(f"store value must be a JSON object, got {type(value).__name__}")
    value = json_copy(value)
    turn: dict[str, Any] = {
        "speaker": value_speaker(value, user_speaker, assistant_speaker),
        "text": value_text(value, index),
        "time": time or datetime.now().astimezone().isoformat(timespec="seconds"),
        "dia_id": key,
    }
    # the value's own time and turn fields, where a turn can hold them; any other stays in the value only, as a
    # store keeps any JSON object (a "session" object, a "time" that is a range)
    given = {"time": value.get("time") or None} | {f: value.get(f) for f in PASSED_THROUGH}
    for field, v in given.items():
        if v not in (None, "") and _holds({**turn, field: v}):
            turn[field] = v
    try:
        coerced = coerce_turn(turn)
    except BadTurn as exc:
        raise ValueError(f"store value under key {key!r} cannot be a turn: {exc}") from None
    if coerced.dia_id != key:
        composed = unicodedata.normalize("NFC", key)
        if composed != key and coerce_turn({**turn, "dia_id": composed}).dia_id == composed:
            raise ValueError(
                f"store key {ascii(key)} is in decomposed Unicode (NFD); keys are kept composed (NFC): "
                f"send {ascii(composed)}"
            )
        raise ValueError(f"store key {key!r} must be printable text without surrounding spaces")
    return turn


def _holds(turn: dict[str, Any]) -> bool:
    try:
        coerce_turn(turn)
    except BadTurn:
        return False
    return True


def turn_value(p: SourcePacket) -> dict[str, Any]:
    """What get and search return for a turn without a document: the turn as add_turns takes it, with its parsed
    time."""
    return {**turn_record(p), "session_time": p.session_time}  # session_time: ISO 8601 when the time parsed


@dataclass(frozen=True)
class ItemDocument:
    """What a put keeps beside its turn: the value as given, where the item sorts (the dialogue position of its
    first put: an update keeps its place), whether a query may find it (`index=False`: never) and the field paths
    that named its text (None: the default text), each text at them scored apart as LangGraph's stores do."""

    value: dict[str, Any]
    position: int
    indexed: bool
    paths: tuple[str, ...] | None = None

    def dumps(self) -> str:
        doc: dict[str, Any] = {"value": self.value, "position": self.position, "indexed": self.indexed}
        if self.paths is not None:
            doc["paths"] = list(self.paths)
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    def texts(self) -> list[str]:
        """The texts a query is compared with, one per field found at the paths (none: the turn's text is)."""
        try:
            found = [t for p in self.paths or () for t in get_text_at_path(self.value, p)]
        except (TypeError, ValueError, IndexError, KeyError):
            return []  # stored text is untrusted: a path that no longer reads scores the turn's text
        return [t for t in found if t.strip()]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """One JSON object, refused when two of its keys became one when written as JSON (True and "true", 1 and "1"):
    json keeps the last silently, and a field would be lost."""
    keys = [k for k, _ in pairs]
    twice = next((k for k in keys if keys.count(k) > 1), None)
    if twice is not None:
        raise ValueError(
            f"two keys of one object are both {twice!r} in JSON (a key such as True or 1 is written as a string): rename one"
        )
    return dict(pairs)


def _iso(obj: Any) -> str:
    if isinstance(obj, (date, time_of_day)):  # a datetime too: ISO 8601, as LangGraph's JSON serialiser writes it
        return obj.isoformat()
    raise TypeError(f"a {type(obj).__name__} is not JSON")


def json_copy(value: Mapping[str, Any]) -> dict[str, Any]:
    """The value as a JSON store keeps it (dates and times as ISO 8601 text); ValueError (one line) for anything JSON
    cannot hold (LangGraph's servers store JSON)."""
    try:
        copy: dict[str, Any] = json.loads(
            json.dumps(value, allow_nan=False, default=_iso), object_pairs_hook=_unique_keys
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"store value must be JSON: {exc}") from None
    return copy


def item_document(
    value: Mapping[str, Any], position: int, indexed: bool, paths: list[str] | None = None
) -> ItemDocument:
    """The document of a put: the value as JSON keeps it (json_copy)."""
    return ItemDocument(json_copy(value), position, indexed, None if paths is None else tuple(paths))


def read_document(text: str) -> ItemDocument | None:
    """A stored document read back; None (the item reads as its turn) when it is not one: stored text is untrusted."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    value, position, indexed, paths = doc.get("value"), doc.get("position"), doc.get("indexed"), doc.get("paths")
    if not isinstance(value, dict) or type(position) is not int or not isinstance(indexed, bool):
        return None
    if not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)):
        paths = None  # no list of paths: the turn's text is scored
    return ItemDocument(value, position, indexed, None if paths is None else tuple(paths))


def _operator(actual: Any, op: str, expected: Any) -> bool:
    if op == "$eq":
        return bool(actual == expected)
    if op == "$ne":
        return bool(actual != expected)
    if op not in ORDERED:
        raise ValueError(f"unsupported filter operator {op!r} (use $eq, $ne, {', '.join(ORDERED)})")
    try:
        a, b = float(actual), float(expected)
    except (TypeError, ValueError, OverflowError):
        return False  # a value that is no number (None, "abc", an object) does not match
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _matches(actual: Any, condition: Any) -> bool:
    if isinstance(condition, Mapping):
        if any(str(k).startswith("$") for k in condition):
            return all(_operator(actual, str(op), expected) for op, expected in condition.items())
        return isinstance(actual, Mapping) and all(_matches(actual.get(k), c) for k, c in condition.items())
    if isinstance(condition, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(condition)
            and all(_matches(a, c) for a, c in zip(actual, condition))
        )
    return bool(actual == condition)


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter as InMemoryStore applies it: every key's condition holds (equality, nested objects, lists
    element by element, $eq $ne and the numeric $gt $gte $lt $lte)."""
    return not filter or all(_matches(value.get(k), c) for k, c in filter.items())
