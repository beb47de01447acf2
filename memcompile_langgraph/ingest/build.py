"""Build-plane stages (Algorithm 1, lines 1-10) as plain functions over typed records."""

from __future__ import annotations

from collections import ChainMap, Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

from ..config import MemCompileConfig
from ..extract.base import Extractor, Metadata, TurnWindow
from ..extract.sentences import has_negation
from ..index.user import UserIndex
from ..model import Descriptor, SourcePacket, TurnInput, stable_hash
from ..text.terms import count_tokens
from ..text.timeparse import parse_session_time
from .turn_input import (
    EXPIRES_AT,
    BadTurn,
    CheckedTurn,
    Occurrence,
    check_turn,
    occurrences,
    parse_expiry,
    place_hash,
)

MAX_SPEAKER = 200  # characters of a speaker name kept in the store (identity uses the whole name)


def turn_warnings(checked: CheckedTurn, cfg: MemCompileConfig) -> list[str]:
    """Counted conditions of a turn that is stored, but not exactly as given or not whole everywhere."""
    turn = checked.turn
    out = list(checked.warnings)
    if len(turn.speaker) > MAX_SPEAKER:
        out.append("trimmed_speaker")
    if len(turn.speaker[:MAX_SPEAKER]) + len(turn.text) + 2 > cfg.embed_max_chars:
        out.append("trimmed_for_embedding")  # the turn does not fit whole in its embedded packet document
    return out


@dataclass
class Packetized:
    packets: list[SourcePacket] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)


def _session_for(
    turn: TurnInput,
    parsed: str | None,
    sessions: Mapping[int, tuple[str, str | None]],
    last: int | None,
    by_label: Mapping[str, int],
) -> int:
    """A given session wins, then a given label (the user's session of that label, or a new one); else a turn continues
    the latest session (`last`) on the same day, or opens the next one."""
    if turn.session is not None:
        return turn.session
    if turn.session_label:
        return by_label[turn.session_label] if turn.session_label in by_label else (last or 0) + 1
    if last is None:
        return 1
    last_time = sessions[last][1]
    if parsed is None or last_time is None or last_time[:10] == parsed[:10]:
        return last
    return last + 1


def _first_sessions(sessions: ChainMap) -> dict[str, int]:
    """Each session label's first session, over the stored sessions and then this batch's (in the order opened)."""
    out: dict[str, int] = {}
    for n, (label, _) in chain(sessions.maps[1].items(), sessions.maps[0].items()):
        out.setdefault(label, n)
    return out


def packetize(turns: Iterable[Any], index: UserIndex, user_id: str) -> Packetized:
    """Register one immutable packet per new turn (Algorithm 1 line 3); bad and known turns are counted, not stored."""
    out = Packetized()
    # the batch's entries overlay the stored ones (nothing copied or recounted): a call costs O(batch), not O(stored)
    # typeshed wants every map of a ChainMap mutable; only the first (the batch's) is ever written
    seen_hashes: ChainMap[str, str] = ChainMap({}, index.hashes)  # type: ignore[arg-type]
    # stored: dia -> packet id; this batch: dia -> content hash
    seen_dias: ChainMap[str, str] = ChainMap({}, index.by_dia)  # type: ignore[arg-type]
    sessions = ChainMap({}, index.sessions)
    per_session = ChainMap({}, index.session_packets)
    last = index.last_session
    by_label: dict[str, int] | None = None  # a label's first session: made when a turn names a label
    seq = len(index.packet_order) and index.packets[index.packet_order[-1]].seq + 1
    for given in occurrences(turns):  # turns add_turns numbered keep their occurrence in the whole call
        try:
            checked = check_turn(given.raw)
        except BadTurn as exc:
            out.counts[f"skipped_{exc}"] += 1
            continue
        turn = checked.turn
        content_hash = turn_identity(given, turn)
        dia_id = turn.dia_id
        if dia_id and dia_id in seen_dias:
            existing = seen_dias[dia_id]
            same = (
                index.packets[existing].content_hash == content_hash
                if existing in index.packets
                else existing == content_hash
            )
            out.counts["already_stored" if same else "skipped_duplicate_dia_id"] += 1
            continue
        if not dia_id and content_hash in seen_hashes:
            out.counts["already_stored"] += 1
            continue
        # sessions follow the stored turns only: re-sent known turns must not open sessions for the new ones
        parsed = parse_session_time(turn.time) if turn.time else None
        if turn.session_label and by_label is None:
            by_label = _first_sessions(sessions)
        session = _session_for(turn, parsed, sessions, last, by_label or {})
        label = turn.session_label or f"session_{session}"
        if session not in sessions:
            sessions[session] = (label, parsed)
            if by_label is not None:
                by_label.setdefault(label, session)
            last = session if last is None else max(last, session)
        number = per_session.get(session, 0) + 1  # the turn's number in its session
        if not dia_id:
            while f"D{session}:{number}" in seen_dias:
                number += 1
            dia_id = f"D{session}:{number}"
        per_session[session] = number
        # warnings are counted once, for the turns actually stored
        out.counts.update(
            turn_warnings(checked, index.cfg) + (["unparsed_time"] if turn.time and parsed is None else [])
        )
        packet = SourcePacket(
            packet_id=stable_hash(user_id, dia_id, content_hash),
            user_id=user_id,
            dia_id=dia_id,
            speaker=turn.speaker[:MAX_SPEAKER],
            session=session,
            session_label=label,
            session_time=parsed,
            session_time_raw=turn.time,
            text=turn.text,
            seq=seq,
            image_caption=turn.image_caption,
            image_query=turn.image_query,
            content_hash=content_hash,
        )
        seq += 1
        seen_dias[dia_id] = content_hash
        seen_hashes[content_hash] = packet.packet_id
        out.packets.append(packet)
    return out


def turn_identity(given: Occurrence, turn: TurnInput) -> str:
    """The content hash a checked turn's packet is stored with: of its fields; for a turn without a dia_id, of its
    occurrence in the call too (a re-sent file is known, two equal replies are two turns); an exported turn's place
    hash as it came."""
    content_hash = SourcePacket.hash_content(turn.speaker, turn.text, turn.time, turn.image_caption, turn.image_query)
    if not turn.dia_id:
        return stable_hash("place", given.key, content_hash, length=32)  # the word stored ids were made with
    return place_hash(given.raw) or content_hash


def given_expiries(turns: list[Occurrence], now: float) -> tuple[list[Occurrence], dict[str, float], Counter[str]]:
    """The turns that carry an `expires_at` (an export's, of a turn stored with a time to live): (the turns to store,
    those whose time has passed left out; content hash -> when each expires; the counts of turns left out)."""
    kept, counts = [], Counter[str]()
    at_of: dict[str, float] = {}
    for given in turns:
        raw = given.raw.get(EXPIRES_AT) if isinstance(given.raw, Mapping) else None
        if raw is None:
            kept.append(given)
            continue
        at = parse_expiry(raw)
        if at is None:
            counts["skipped_bad_expires_at"] += 1
        elif at <= now:
            counts["skipped_expired"] += 1
        else:
            try:
                identity = turn_identity(given, check_turn(given.raw).turn)
            except BadTurn:  # counted by the build
                kept.append(given)
                continue
            at_of[identity] = min(at, at_of.get(identity, at))
            kept.append(given)
    return kept, at_of, counts


def turn_windows(packets: list[SourcePacket], index: UserIndex, cfg: MemCompileConfig) -> tuple[list[TurnWindow], int]:
    """Each packet with its preceding turn and the names known so far; long texts trimmed for extraction."""
    previous = index.packets[index.packet_order[-1]] if index.packet_order else None
    people = list(index.people) + [p.speaker for p in packets if p.speaker not in index.people]
    people = list(dict.fromkeys(people))
    out, trimmed = [], 0
    for p in packets:
        view = p
        if len(p.text) > cfg.extract_max_chars:
            view = replace(p, text=p.text[: cfg.extract_max_chars])
            trimmed += 1
        out.append(TurnWindow(packet=view, previous=previous, known_people=people))
        previous = view
    return out, trimmed


def fallback_claim(p: SourcePacket) -> str:
    """The cleaned text of a turn with no retained claim, so every packet stays addressable."""
    text = p.text or f"{p.speaker} shared an image: {p.image_caption} {p.image_query}".strip()
    return f"{p.speaker}: {text}" if not text.startswith(p.speaker) else text


def make_descriptors(window: TurnWindow, facts: list[str], metas: list[Metadata], seq_start: int) -> list[Descriptor]:
    p = window.packet
    out = []
    for i, (fact, meta) in enumerate(zip(facts, metas)):
        out.append(
            Descriptor(
                descriptor_id=f"{p.packet_id}:{i:03d}",
                packet_id=p.packet_id,
                claim=fact,
                dia_id=p.dia_id,
                speaker=p.speaker,
                session=p.session,
                session_time=p.session_time,
                people=meta.people,
                keywords=meta.keywords,
                event_time=meta.event_time,
                interaction_time=meta.interaction_time,
                n_tokens=count_tokens(fact),
                seq=seq_start + i,
                negated=has_negation(fact),  # App. B.2's marker in the text, not a model's event polarity
            )
        )
    return out


def extract_all(
    windows: list[TurnWindow], extractor: Extractor, cfg: MemCompileConfig
) -> tuple[list[list[str]], Counter[str]]:
    """Facts per turn. A turn with none keeps one descriptor of its own text (factless_claims, the default), or
    none (the paper, App. B.1): its packet is then reached through the dense channel only."""
    facts: list[list[str]] = []
    counts: Counter[str] = Counter()
    batch = getattr(extractor, "facts_batch", None)  # an LLM extractor runs its calls concurrently
    found = batch(windows) if batch is not None else [extractor.facts(window) for window in windows]
    for window, got in zip(windows, found):
        got = [f for f in got if f.strip()]
        if not got and cfg.factless_claims:
            got = [fallback_claim(window.packet)[: 4 * 1024]]
            counts["fallback_claims"] += 1
        elif not got:
            counts["factless_turns"] += 1
        facts.append(got)
    return facts, counts


def metadata_all(
    windows: list[TurnWindow], facts: list[list[str]], extractor: Extractor, seq_start: int
) -> list[Descriptor]:
    out: list[Descriptor] = []
    pairs = [(f, window) for window, turn_facts in zip(windows, facts) for f in turn_facts]
    batch = getattr(extractor, "metadata_batch", None)
    metas = iter(batch(pairs) if batch is not None else [extractor.metadata(f, window) for f, window in pairs])
    for window, turn_facts in zip(windows, facts):
        out += make_descriptors(window, turn_facts, [next(metas) for _ in turn_facts], seq_start + len(out))
    return out
