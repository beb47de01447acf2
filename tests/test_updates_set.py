"""The generated knowledge-update sets (eval/updates_set.py) as BEAM's loader reads them: every question's gold is the
later statement, in a later session, holding the answer the earlier one does not. Both families are frozen: their
files' digests are pinned, so a change to the templates or the generator shows here before any figure moves."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from memcompile_langgraph.eval.beam import load_beam
from memcompile_langgraph.eval.updates_set import FORMS, HARDER, RECAPS, SUBJECTS, main, write, write2

# sha256 over each chat folder's files (relative path, then bytes), chats in numeric order, as written by the
# default command line of each family
SET_DIGESTS = {
    1: "12b39944b87434f9cba8ad1d2c813a10ced991002e9560a518094a684886936b",
    2: "d3193e6c71b6d0c2bcc9ad031f84f638df46504316a072460acd3aa9c09dd983",
}
RECAP_OPENINGS = tuple(r.split("{")[0] for r in RECAPS)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*.json"), key=lambda p: (int(p.parent.name), p.name)):
        h.update(f.relative_to(folder).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def test_the_generated_set_is_read_by_the_beam_loader_with_the_later_statement_as_gold(tmp_path):
    folder = write(tmp_path / "updates", chats=3, per_chat=5)
    bench = load_beam(folder)
    assert len(bench.dialogues) == 3 and bench.questions == 15
    for d in bench.dialogues:
        text = {t["dia_id"]: t for t in d.turns}
        for q in d.questions:
            assert q.category == "knowledge_update" and len(q.gold) == len(q.replaced) == 1
            new, old = text[q.gold[0]], text[q.replaced[0]]
            assert new["session"] > old["session"] and new["speaker"] == old["speaker"] == "User"
            assert q.answer in new["text"] and q.answer not in old["text"]
    assert json.loads((folder / "1" / "chat.json").read_text())[0]["time_anchor"]
    assert len(SUBJECTS) >= 15


def test_both_families_are_frozen_and_family_2_leaves_family_1_unchanged(tmp_path):
    for family, digest in SET_DIGESTS.items():
        main([str(tmp_path / str(family)), "--family", str(family)])
        assert _digest(tmp_path / str(family)) == digest, f"family {family} changed: it was frozen"


def test_family_2_states_each_update_in_its_form_with_the_older_value_told_again_later(tmp_path):
    assert set(HARDER) == {s.names[0] for s in SUBJECTS}
    folder = write2(tmp_path / "hard")
    bench = load_beam(folder)
    assert bench.questions == 80
    raw = {
        str(c): json.loads((folder / str(c) / "probing_questions.json").read_text())["knowledge_update"]
        for c in range(1, 11)
    }
    forms: Counter[str] = Counter()
    for d in bench.dialogues:
        turns = d.turns
        at = {t["dia_id"]: k for k, t in enumerate(turns)}
        for q, item in zip(d.questions, raw[d.user_id], strict=True):
            form = item["update_form"]
            forms[form] += 1
            old = turns[at[q.replaced[0]]]
            assert q.answer not in old["text"] and old["speaker"] == "User"
            news = [turns[at[g]] for g in q.gold]
            assert all(q.answer in t["text"] and t["session"] > old["session"] for t in news)
            if form == "split":  # the value alone; the user's turn before it only names the subject
                (new,) = news
                lead = turns[at[q.gold[0]] - 2]
                assert new["speaker"] == lead["speaker"] == "User" and lead["session"] == new["session"]
                assert not any(c.isdigit() for c in lead["text"])
                assert not any(name.lower() in new["text"].lower() for name in _subject(q).names)
            elif form == "recap":  # the user's statement and the assistant's summary right after it
                assert [t["speaker"] for t in news] == ["User", "Assistant"]
                assert at[q.gold[1]] == at[q.gold[0]] + 1 and news[1]["text"].startswith(RECAP_OPENINGS)
            if item["history_after"]:  # the older value, told again after the update
                value = item_old_value(old["text"], q)
                assert any(
                    value in t["text"] and t["session"] >= news[0]["session"] and at[t["dia_id"]] > at[q.gold[-1]]
                    for t in turns
                )
    assert set(forms) == set(FORMS) and max(forms.values()) - min(forms.values()) <= 1


def item_old_value(old_text: str, q) -> str:
    """The older value: the value of the subject's list that the first statement holds."""
    return next(v for v in sorted(_subject(q).values, key=len, reverse=True) if v in old_text)


def _subject(q):
    return next(s for s in SUBJECTS if q.question in s.ask)
