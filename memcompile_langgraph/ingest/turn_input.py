"""A turn as handed over (any JSON value in any field) -> a validated TurnInput, before anything is written.

Every field is checked here, so a bad field skips its own turn (counted) and never fails the batch at commit.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..model import SourcePacket, TurnInput
from ..text.terms import one_line, scrub

MAX_SESSION = 10**9  # session numbers are stored as SQLite integers; beyond this a number is a mistake
MAX_LABEL = 200  # characters of a session label
_SESSION_NUMBER = re.compile(r"^(?:session[ _-]?)?(\d{1,9})$", re.I)  # "3", "session_3", "Session 3"
_SINGLE_LINE = ("speaker", "time", "session_label", "dia_id")  # fields a provenance header shows
# field -> the keys it may come under (LoCoMo names an image's caption blip_caption and its search query query)
_KEYS = {
    "speaker": ("speaker",),
    "text": ("text",),
    "time": ("time",),
    "session_label": ("session_label",),
    "dia_id": ("dia_id",),
    "image_caption": ("image_caption", "blip_caption"),
    "image_query": ("image_query", "query"),
}


class BadTurn(ValueError):
    """A turn that cannot be stored; its message names the reason that is counted."""


@dataclass(frozen=True, slots=True)
class CheckedTurn:
    turn: TurnInput  # speaker whole: the store cuts it, identity does not
    warnings: tuple[str, ...]  # counted conditions of a turn stored not exactly as given


@dataclass(frozen=True, slots=True)
class Occurrence:
    """A turn with its occurrence in the call that handed it over: its session as given, and which of the equal
    turns of that session it is (the 2nd "Yes" of Tom). A re-sent file gives every turn the same occurrence again;
    a turn inserted into it moves no other turn's."""

    raw: Any
    key: str


def occurrences(turns: Iterable[Any]) -> list[Occurrence]:
    """Occurrences counted across the whole call (batches do not restart the count)."""
    seen: Counter = Counter()
    out = []
    for raw in turns:
        if not isinstance(raw, Occurrence):
            scope = f"{_get(raw, 'session')}|{_get(raw, 'session_label')}"
            speaker, text = _get(raw, "speaker"), _get(raw, "text")
            seen[scope, speaker, text] += 1
            raw = Occurrence(raw, f"{scope}#{seen[scope, speaker, text]}")
        out.append(raw)
    return out


def _get(raw: Any, key: str) -> str:
    """A field as given; another value stands for its type only (the occurrence needs no more, and it always prints)."""
    value = getattr(raw, key) if isinstance(raw, TurnInput) else raw.get(key) if isinstance(raw, Mapping) else None
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < MAX_SESSION:
        return str(value)
    return type(value).__name__


def given_text(turn: Occurrence) -> str:
    """The turn's text as handed over (what a span shows with content capture on)."""
    return _get(turn.raw, "text")


def _field(raw: Mapping, name: str) -> str:
    value = next((raw[k] for k in _KEYS[name] if raw.get(k) not in (None, "")), "")
    if name == "speaker" and not isinstance(value, str):
        raise BadTurn("missing_speaker")
    if name == "text" and not isinstance(value, str):
        raise BadTurn("text_not_string")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadTurn(f"{name}_not_string")
    try:
        return value if isinstance(value, str) else str(value)  # an epoch time or a numeric dia_id, kept as given
    except ValueError:  # an integer too long to print
        raise BadTurn(f"{name}_not_string") from None


def _session(value: Any) -> tuple[int | None, str]:
    """(number, label): a number as given, or a label ("session_3" is 3; "2024-03-04 call" is numbered per user)."""
    if value is None:
        return None, ""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_SESSION:
        return value, ""
    if not isinstance(value, str):
        raise BadTurn("bad_session")
    label = one_line(scrub(value).text)
    if not label or len(label) > MAX_LABEL:
        raise BadTurn("bad_session")
    m = _SESSION_NUMBER.match(label)
    return (int(m.group(1)), label if not label.isdigit() else "") if m else (None, label)


def visible(text: str) -> bool:
    """Something a reader can see: not only spaces and invisible format characters (joiners, marks)."""
    return any(not ch.isspace() and unicodedata.category(ch) != "Cf" for ch in text)


def check_turn(raw: Any) -> CheckedTurn:
    """Every field of one turn validated and cleaned; BadTurn with a short reason when it cannot be stored."""
    if isinstance(raw, Occurrence):
        raw = raw.raw
    if isinstance(raw, TurnInput):
        raw = {f: getattr(raw, f) for f in TurnInput.__dataclass_fields__}
    if not isinstance(raw, Mapping):
        raise BadTurn("not_an_object")
    if raw.get("speaker") is None:
        raise BadTurn("missing_speaker")
    if raw.get("text") is None:
        raise BadTurn("missing_text")
    given = {name: _field(raw, name) for name in _KEYS}
    fields, warnings = {}, set()
    for name, value in given.items():
        cleaned = scrub(value)
        fields[name] = one_line(cleaned.text) if name in _SINGLE_LINE else cleaned.text
        if cleaned.removed:
            warnings.add("cleaned_text")  # control, NUL or bidi-override characters removed
        if cleaned.invalid:
            warnings.add("invalid_unicode")  # lone surrogates, replaced by U+FFFD
        if "\ufffd" in value:
            warnings.add("invalid_utf8")  # bytes that were not UTF-8, replaced when the file was read
    if not visible(fields["speaker"]):
        raise BadTurn("missing_speaker")
    if not visible(fields["text"]) and not visible(fields["image_caption"]):
        raise BadTurn("empty_text")
    session, label = _session(raw.get("session"))
    fields["session_label"] = fields["session_label"] or label
    return CheckedTurn(TurnInput(session=session, **fields), tuple(sorted(warnings)))


def coerce_turn(raw: Any) -> TurnInput:
    return check_turn(raw).turn


def turn_record(packet: SourcePacket) -> dict[str, Any]:
    """A stored turn as add_turns takes it back: the inverse of check_turn for what the store keeps (the raw time,
    the session's number and label, the dia_id, and for a turn stored without a dia_id its place hash), so that
    re-adding it anywhere gives the same packet."""
    record: dict[str, Any] = {
        "speaker": packet.speaker,
        "text": packet.text,
        "time": packet.session_time_raw,
        "session": packet.session,
        "session_label": packet.session_label,
        "dia_id": packet.dia_id,
    }
    record.update({f: getattr(packet, f) for f in ("image_caption", "image_query") if getattr(packet, f)})
    plain = SourcePacket.hash_content(
        packet.speaker, packet.text, packet.session_time_raw, packet.image_caption, packet.image_query
    )
    if packet.content_hash != plain:  # stored without a dia_id: known by its place in what was sent, kept here
        record[PLACE_HASH] = packet.content_hash
    return record


PLACE_HASH = "place_hash"  # an exported turn's identity when it was first stored without a dia_id
EXPIRES_AT = "expires_at"  # an exported turn's end, when it was stored with a time to live (ISO 8601 with offset)


def expiry_text(at: float) -> str:
    """When a turn expires, as an export writes it."""
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="seconds")


def parse_expiry(value: Any) -> float | None:
    """An `expires_at` as unix seconds; None when it is no ISO 8601 time with an offset (untrusted input)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value)
        return when.timestamp() if when.tzinfo is not None else None
    except (ValueError, OverflowError, OSError):
        return None


_HASH = re.compile(r"[0-9a-f]{32}")


def place_hash(raw: Any) -> str | None:
    """The place hash an exported turn carries (turn_record), when well formed: re-adding it anywhere gives the
    packet the identity it had, so the file first sent is known there too, and the export is known where it came
    from."""
    value = raw.get(PLACE_HASH) if isinstance(raw, Mapping) else None
    return value if isinstance(value, str) and _HASH.fullmatch(value) else None
