"""Knowledge updates as a class (engineering, not in the paper): a later statement of the same speaker about the same
subject, with another value, updates the earlier one, whatever words either uses.

The subject is found through the dense channel: two statements are about one subject when their packet vectors are
close (cosine >= config.update_subject_similarity; the paper's z(p) carries the claims, people and keywords). Their
values are what each states that the other does not: numbers (digits or number words) and names (capitalised words
inside a sentence). Among a subject's statements the newest is the current one: `follow_updates` brings it into the
selection when only an older one was selected, `subject_supersessions` marks the older ones superseded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..config import MemCompileConfig
from ..index.user import UserIndex
from ..model import SourcePacket
from .updates import Supersession

_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*%?")
_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty hundred thousand million half double".split()
)
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+|\n+")
_WORD = re.compile(r"[A-Za-z][\w'-]*")


def stated_values(text: str) -> frozenset[str]:
    """The numbers and names a statement states (normalised: "1,450" is "1450"; a name is a capitalised word that
    does not open its sentence, "I" aside)."""
    out = {n.replace(",", "") for n in _NUMBER.findall(text)}
    for sentence in _SENTENCE.split(text):
        words = _WORD.findall(sentence)
        out.update(w.lower() for w in words if w.lower() in _NUMBER_WORDS)
        out.update(w for w in words[1:] if w[0].isupper() and w != "I")
    return frozenset(out)


def _statements(index: UserIndex, cfg: MemCompileConfig) -> np.ndarray:
    """1.0 for packets that can state a fact that changes: not the assistant's, not a turn that only asks."""
    return (1.0 - index.speaker_mask([cfg.assistant_speaker])) * (1.0 - index.asking_array())


def follow_updates(index: UserIndex, selected: list[str], cfg: MemCompileConfig) -> list[str]:
    """`selected` with the newest later statement of each of its first `update_follow_from` statements' subjects in
    it: put right after the statement it updates, the selection's last packets making room (at most
    `update_follow_max` are brought in)."""
    n = len(index.packet_order)
    if not (cfg.update_follow_max and cfg.update_subject_similarity) or len(index.vectors) != n or n < 2:
        return selected
    matrix, rows = index.vectors.matrix(), index.vector_rows()
    stating = _statements(index, cfg)
    out, brought = list(selected), 0
    for pid in selected[: cfg.update_follow_from]:
        pos = index.packet_position[pid]
        p = index.packets[pid]
        if not stating[pos] or not (mine := stated_values(p.text)):
            continue
        later = np.arange(pos + 1, n)
        if not len(later):
            continue
        close = matrix[rows[later]] @ matrix[rows[pos]] >= cfg.update_subject_similarity
        found = None
        for i in later[close][::-1]:  # newest first
            q = index.packets[index.packet_order[int(i)]]
            if stating[int(i)] and q.speaker == p.speaker and q.session != p.session:
                theirs = stated_values(q.text)
                if theirs - mine and mine - theirs:
                    found = q.packet_id
                    break
        if found is None or found in out:
            continue
        out.insert(out.index(pid) + 1, found)
        out.pop()  # the last of the selection makes room
        brought += 1
        if brought >= cfg.update_follow_max:
            break
    return out


def subject_supersessions(
    index: UserIndex, packets: Sequence[SourcePacket], cfg: MemCompileConfig
) -> dict[str, Supersession]:
    """Earlier packet id -> the newest later packet among `packets` stating its subject with other values (same
    speaker, another session, close vectors)."""
    if not cfg.update_subject_similarity or len(index.vectors) != len(index.packet_order):
        return {}
    matrix, rows = index.vectors.matrix(), index.vector_rows()
    stating = _statements(index, cfg)
    ordered = sorted(
        (p for p in packets if stating[index.packet_position[p.packet_id]]), key=lambda p: p.seq, reverse=True
    )
    values = {p.packet_id: stated_values(p.text) for p in ordered}
    out: dict[str, Supersession] = {}
    for i, old in enumerate(ordered):
        v_old = matrix[rows[index.packet_position[old.packet_id]]]
        for new in ordered[:i]:  # newest first
            if new.speaker != old.speaker or new.session == old.session or not values[old.packet_id]:
                continue
            gone, came = values[old.packet_id] - values[new.packet_id], values[new.packet_id] - values[old.packet_id]
            similar = float(matrix[rows[index.packet_position[new.packet_id]]] @ v_old)
            if gone and came and similar >= cfg.update_subject_similarity:
                out[old.packet_id] = Supersession(
                    old.packet_id, new.packet_id, tuple(sorted(gone)), tuple(sorted(came))
                )
                break
    return out
