"""Family 6: every character is kept except invalid or dangerous ones (counted); every id an API takes is
NFC-normalized, as stored ids are."""

from __future__ import annotations

import itertools
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile
from memcompile_langgraph.evidence.render import fit_context
from memcompile_langgraph.ingest.turn_input import visible

from .strategies import LINE_BREAKS, examples

DANGEROUS = "\x00\x07\x1b\x7f\x9b\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
KEPT = {
    "emoji ZWJ sequence": "our family \U0001f469\u200d\U0001f469\u200d\U0001f467 went camping",
    "Persian ZWNJ": "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \u0628\u0631\u0648\u0645",
    "Devanagari ZWJ": "\u0915\u094d\u200d\u0937 is written so on purpose",
    "direction marks": "\u05e9\u05dc\u05d5\u05dd\u200f 2024 \u200eok",
    "zero-width space": "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u200b\u0e04\u0e23\u0e31\u0e1a",
    "variation selector": "I \u2764\ufe0f kayaks",
}
_users = itertools.count()


def _store(mem: MemCompile, text: str) -> tuple[dict, object]:
    user = f"x{next(_users)}"
    counts = mem.add_turns([{"speaker": "Ann", "text": text, "dia_id": "D1:1"}], user_id=user)
    index = mem.index(user)
    packet = index.packets.get(index.by_dia.get("D1:1"))
    return counts, packet


@pytest.mark.parametrize("name", sorted(KEPT))
def test_script_characters_survive_storage_and_rendering(make_mem, name):
    mem = make_mem(dense=False)
    counts, packet = _store(mem, KEPT[name])
    assert packet.text == KEPT[name] and "cleaned_text" not in counts
    user = packet.user_id
    index = mem.index(user)
    assert KEPT[name] in fit_context(index, index.packet_order, "raw").text()


@examples(40)
@given(text=st.text(st.characters(exclude_categories=("Cs",), exclude_characters=DANGEROUS + "\x0e\x1f"), max_size=60))
def test_every_ordinary_character_is_kept(make_mem, text):
    """Apart from NFC, line breaks written as \\n and surrounding space: the text as given."""
    mem = make_mem(dense=False)
    counts, packet = _store(mem, text)
    expected = unicodedata.normalize("NFC", text).replace("\r\n", "\n")
    for brk in LINE_BREAKS:
        expected = expected.replace(brk, "\n")
    controls = {chr(c) for c in [*range(0x09), *range(0x0E, 0x20), *range(0x7F, 0xA0)]} - set(LINE_BREAKS)
    expected = "".join(c for c in expected if c not in controls).strip()
    if not visible(expected):
        assert counts.get("skipped_empty_text") == 1
        return
    assert packet.text == expected


@examples(30)
@given(
    text=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30),
    bad=st.sampled_from(DANGEROUS),
    at=st.integers(0, 30),
)
def test_dangerous_characters_are_removed_and_counted(make_mem, text, bad, at):
    mem = make_mem(dense=False)
    given_text = f"kayak {text[:at]}{bad}{text[at:]}"
    counts, packet = _store(mem, given_text)
    assert bad not in packet.text and not any(c in packet.text for c in DANGEROUS)
    assert counts.get("cleaned_text") == 1


@examples(20)
@given(
    text=st.text(st.characters(exclude_categories=()), max_size=20),
    at=st.integers(0, 20),
    surrogate=st.characters(categories=("Cs",)),
)
def test_invalid_characters_are_replaced_and_counted(make_mem, text, at, surrogate):
    mem = make_mem(dense=False)
    counts, packet = _store(mem, f"kayak {text[:at]}{surrogate}{text[at:]}")
    assert "\ufffd" in packet.text and counts.get("invalid_unicode") == 1
    packet.text.encode("utf-8")


def test_ids_are_nfc_everywhere(tmp_path):
    mem = MemCompile(tmp_path / "store", dense=False)
    nfd_user, nfc_user = unicodedata.normalize("NFD", "Jos\u00e9"), "Jos\u00e9"
    nfd_dia = unicodedata.normalize("NFD", "caf\u00e9-1")
    turns = [
        {"speaker": "Ann", "text": "my first kayak", "dia_id": nfd_dia},
        {"speaker": "Ann", "text": "red one", "dia_id": "D2"},
    ]
    assert mem.add_turns(turns, user_id=nfd_user)["stored"] == 2
    assert mem.users() == [nfc_user] and mem.stats(nfc_user)["packets"] == 2  # one user, however composed
    assert unicodedata.normalize("NFC", nfd_dia) in mem.index(nfd_user).by_dia
    assert mem.delete_turns(nfc_user, [nfd_dia]) == 1  # the id as given first (NFD) finds the stored NFC one
    assert mem.delete_turns(nfd_user, " D2 ") == 1  # cleaned as stored ids are
    with pytest.raises(ValueError):
        mem.delete_turns(nfc_user, [7])
    mem.forget(nfd_user)
    assert mem.users() == []
    mem.close()
