"""Parsing and validating untrusted model replies (App. A.2, F.1): JSON in code fences, list aliases, labels."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..address.intent import match_people, offline_intent
from ..config import MemCompileConfig
from ..extract.base import Metadata, TurnWindow
from ..model import Intent
from ..text.terms import clean_text, terms
from ..text.timeparse import normalize_event_time
from .calls import InvalidReply

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_LABEL = re.compile(r"^\[?\s*(C\d{1,6})\s*\]?$")
_NORMALIZED_TIME = re.compile(
    r"^(?:\d{4}(?:-\d{2}(?:-\d{2})?)?|\d{4}-(?:spring|summer|autumn|fall|winter)|week of \d{4}-\d{2}-\d{2})$"
)

# keys a provider may wrap a requested list in (JSON mode only returns objects)
FACT_ALIASES = ("facts", "statements", "factual_statements", "claims", "items", "results", "data")
LABEL_ALIASES = ("ranked_candidate_ids", "candidate_ids", "ranked_ids", "ranking", "labels", "ids", "ranked_labels")


def parse_json(text: str) -> Any:
    """The JSON value of a reply: bare, inside a ``` fence, or the first object/array in surrounding prose."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidReply("the reply is empty")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for body in candidates:
        body = body.strip()
        try:
            return json.loads(body)
        except ValueError:
            pass
        for start in (i for i, ch in enumerate(body) if ch in "[{"):
            try:
                return json.JSONDecoder().raw_decode(body, start)[0]
            except ValueError:
                continue
    raise InvalidReply("the reply is not valid JSON")


def unwrap_list(value: Any, aliases: Sequence[str]) -> list:
    """A requested list, also when a provider wrapped it in an object under an alias (or its only list field)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in aliases:
            if isinstance(value.get(key), list):
                return value[key]
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
    raise InvalidReply(f"expected a JSON array or an object holding one ({aliases[0]!r})")


def unwrap_object(value: Any, required: Sequence[str]) -> dict:
    """The requested object, also when wrapped in a one-element list or under a single key."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and not any(k in value for k in required) and len(value) == 1:
        inner = next(iter(value.values()))
        if isinstance(inner, dict):
            value = inner
    if not isinstance(value, dict) or not any(k in value for k in required):
        raise InvalidReply(f"expected a JSON object with {', '.join(required)}")
    return value


def string_list(value: Any, field: str, cfg: MemCompileConfig, limit: int | None = None) -> tuple[str, ...]:
    """Distinct cleaned strings, at most `limit`; anything but a list of strings (or null) is invalid."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidReply(f"{field} must be a list of strings")
    items = [clean_text(" ".join(v.split()))[: cfg.llm_max_item_chars] for v in value]
    out = tuple(dict.fromkeys(v for v in items if v))
    return out[:limit] if limit is not None else out


def canonical_people(names: Sequence[str], known_people: Sequence[str], cfg: MemCompileConfig) -> tuple[str, ...]:
    """Names a model returned, mapped to the stored spelling when they match a known person."""
    out = []
    for name in names[: cfg.llm_max_people]:
        known = match_people(name, known_people)
        out.append(known[0] if known else name)
    return tuple(dict.fromkeys(out))


def normalized_time(value: Any, anchor: str | None) -> str:
    """A model's time string in the engine's normal form, or "" when it is absent or cannot be normalized."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidReply("times must be strings or null")
    value = " ".join(value.split())[:200]
    if _NORMALIZED_TIME.match(value.lower()):
        return value.lower()
    return normalize_event_time(value, anchor)


# --- stage parsers ------------------------------------------------------------------------------------


def parse_facts(text: str, cfg: MemCompileConfig) -> list[str]:
    """A JSON array of standalone statements; an item may also be an object holding one under a usual key."""
    items = unwrap_list(parse_json(text), FACT_ALIASES)
    out = []
    for item in items:
        if isinstance(item, dict):
            item = next((item[k] for k in ("fact", "statement", "text", "claim") if isinstance(item.get(k), str)), None)
        if not isinstance(item, str):
            raise InvalidReply("every fact must be a string")
        item = clean_text(" ".join(item.split()))
        if item:
            out.append(item[: cfg.llm_max_item_chars])
    return list(dict.fromkeys(out))[: cfg.llm_max_facts]


def lowercased(keywords: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(k.lower() for k in keywords))


def parse_metadata(text: str, window: TurnWindow, cfg: MemCompileConfig) -> Metadata:
    """App. F metadata object -> Metadata; the interaction time is the packet's own, never the model's."""
    obj = unwrap_object(parse_json(text), ("people", "keywords", "time", "event"))
    p = window.packet
    anchor = p.session_time
    event = obj.get("event") or {}
    if not isinstance(event, dict):
        raise InvalidReply("event must be an object")
    when = obj.get("time")
    if isinstance(when, str) or when is None:
        when = [when, None]
    if not isinstance(when, list) or len(when) != 2:
        raise InvalidReply("time must be [event_time, interaction_time]")
    event_time = normalized_time(when[0], anchor) or normalized_time(event.get("event_time"), anchor)
    if not isinstance(obj.get("needs_profile_extraction", False), bool):
        raise InvalidReply("needs_profile_extraction must be true or false")
    if not isinstance(event.get("polarity", "unknown"), str):  # typed, though X(i,c) reads the claim's marker
        raise InvalidReply("event.polarity must be a string")
    for role in ("subject_people", "focus_terms", "goal_context_terms"):  # the event roles must be well-typed too
        string_list(event.get(role), f"event.{role}", cfg)
    return Metadata(
        people=canonical_people(string_list(obj.get("people"), "people", cfg), window.known_people, cfg),
        # lowercased like the heuristic's: Cell Jaccard and entropy (Eq. 18-21) compare keywords as strings
        keywords=lowercased(string_list(obj.get("keywords"), "keywords", cfg, cfg.max_keywords)),
        event_time=event_time,
        interaction_time=p.session_time or p.session_time_raw,
    )


def parse_intent(text: str, query: str, known_people: Sequence[str], cfg: MemCompileConfig) -> Intent:
    """App. F intent object -> Intent; the temporal flag also keeps the offline question-form cue."""
    obj = unwrap_object(parse_json(text), ("need_attribute", "people", "keywords", "time"))
    need = obj.get("need_attribute", False)
    if not isinstance(need, bool):
        raise InvalidReply("need_attribute must be true or false")
    when = obj.get("time")
    if when is not None and not isinstance(when, str):
        raise InvalidReply("time must be a string or null")
    when = " ".join(when.split())[:200] if when and when.strip().lower() not in ("null", "none") else None
    keywords = string_list(obj.get("keywords"), "keywords", cfg, cfg.max_keywords)
    base = offline_intent(query, known_people, cfg.max_keywords)
    return replace(
        base,
        people=canonical_people(string_list(obj.get("people"), "people", cfg), known_people, cfg),
        keywords=keywords,
        time=when,
        temporal=base.temporal or when is not None,
        need_attribute=need,
        terms=tuple(dict.fromkeys(terms(query) + terms(" ".join(keywords)))),
    )


def parse_labels(text: str, labels: Sequence[str], k: int) -> list[str]:
    """Exactly k distinct labels from the closed list; InvalidReply keeps the valid unique ones in order as partial."""
    try:
        items = unwrap_list(parse_json(text), LABEL_ALIASES)
    except InvalidReply as exc:
        raise InvalidReply(str(exc), partial=[]) from None
    allowed, kept, problems = set(labels), [], []
    for item in items:
        match = _LABEL.match(item.strip().upper()) if isinstance(item, str) else None
        label = match.group(1) if match else None
        if label is None or label not in allowed:
            problems.append(f"{str(item)[:20]!r} is not a label of the candidate list")
        elif label in kept:
            problems.append(f"{label} appears more than once")
        else:
            kept.append(label)
    if len(items) != k:
        problems.append(f"{len(items)} labels were returned, exactly {k} are required")
    if problems:
        raise InvalidReply("; ".join(dict.fromkeys(problems))[:400], partial=kept[:k])
    return kept


def parse_judge(text: str) -> bool:
    """CORRECT -> True, WRONG -> False, from {"label": ...} or a reply that names exactly one of them."""
    try:
        value = parse_json(text)
        label = value.get("label") if isinstance(value, dict) else value
    except InvalidReply:
        label = text
    if isinstance(label, str):
        found = set(re.findall(r"\b(CORRECT|WRONG)\b", label.upper()))
        if len(found) == 1:
            return found.pop() == "CORRECT"
    raise InvalidReply('the label must be exactly "CORRECT" or "WRONG"')


UPDATE_ALIASES = ("updates", "pairs", "decisions", "results", "items")
_PAIR = re.compile(r"^\[?\s*U(\d{1,4})\s*\]?$", re.I)


def _found_in(value: Any, claim: str, field: str, cfg: MemCompileConfig) -> str:
    """A value copied from its claim: a short string the claim holds (case and spacing aside), as the claim writes
    it; anything else is a value the model made up."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidReply(f"{field} must be a non-empty string for an update")
    words = value.split()
    if len(" ".join(words)) > cfg.llm_update_max_value_chars:
        raise InvalidReply(f"{field} is longer than {cfg.llm_update_max_value_chars} characters")
    m = re.search(r"\s+".join(map(re.escape, words)), claim, re.I)
    if m is None:
        raise InvalidReply(f"{field} {value[:40]!r} is not written in its statement")
    return m.group(0)


def parse_updates(
    text: str, claims: Sequence[tuple[str, str]], cfg: MemCompileConfig
) -> dict[int, tuple[str, str] | None]:
    """Pair index -> (old value, new value) for an update, None for none; every pair decided exactly once, values
    found in their own statements (claims: the (older, newer) statement of each pair, in request order)."""
    items = unwrap_list(parse_json(text), UPDATE_ALIASES)
    out: dict[int, tuple[str, str] | None] = {}
    for item in items:
        if not isinstance(item, dict):
            raise InvalidReply("every decision must be an object")
        m = _PAIR.match(item.get("pair", "")) if isinstance(item.get("pair"), str) else None
        i = int(m.group(1)) - 1 if m else -1
        if not 0 <= i < len(claims):
            raise InvalidReply(f"{str(item.get('pair'))[:20]!r} is not a listed pair")
        if i in out:
            raise InvalidReply(f"U{i + 1} is decided more than once")
        update = item.get("update")
        if not isinstance(update, bool):
            raise InvalidReply("update must be true or false")
        old, new = claims[i]
        pair = (
            (
                _found_in(item.get("old_value"), old, "old_value", cfg),
                _found_in(item.get("new_value"), new, "new_value", cfg),
            )
            if update
            else None
        )
        out[i] = pair
        if pair is not None and pair[0].lower() == pair[1].lower():
            raise InvalidReply(f"U{i + 1}: an update needs a new value different from the old one")
    if len(out) != len(claims):
        raise InvalidReply(f"{len(out)} of {len(claims)} pairs were decided; decide every pair")
    return out
