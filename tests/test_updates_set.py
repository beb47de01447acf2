"""The generated knowledge-update sets (eval/updates_set.py over the templates of updates_set.json) as BEAM's loader reads them: every question's gold is the
later statement, in a later session, holding the answer the earlier one does not. Every family is frozen: their
files' digests are pinned, so a change to the templates or the generator shows here before any figure moves."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from support.generated_sets import set_digest

from memcompile_langgraph.eval.beam import load_beam
from memcompile_langgraph.eval.updates_set import DATA, FAMILIES, KINDS4, PHRASES, main, write

SUBJECTS, SUBJECTS3, SUBJECTS4 = (FAMILIES[n].subjects for n in (1, 3, 4))
FORMS, FORMS3, FORMS4 = (FAMILIES[n].forms for n in (2, 3, 4))
CONFIRMS = PHRASES["confirms"]

# sha256 over each chat folder's files (relative path, then bytes), chats in numeric order, as written by the
# default command line of each family
SET_DIGESTS = {
    1: "12b39944b87434f9cba8ad1d2c813a10ced991002e9560a518094a684886936b",
    2: "d3193e6c71b6d0c2bcc9ad031f84f638df46504316a072460acd3aa9c09dd983",
    3: "fe3ec975dd95dd60c4b5e7d54c143f7409a919289c37e97c91888eaeddfeb28e",
    4: "c1a09f708d7f6260b6bc92b85b1a64fd02cf60412653e74a3b545aa9263e8c17",
}
RECAP_OPENINGS = tuple(r.split("{")[0] for r in PHRASES["recaps"])


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


def test_every_family_is_frozen_and_a_later_family_leaves_the_earlier_ones_unchanged(tmp_path):
    for family, digest in SET_DIGESTS.items():
        main([str(tmp_path / str(family)), "--family", str(family)])
        assert set_digest(tmp_path / str(family)) == digest, f"family {family} changed: it was frozen"


def test_family_2_states_each_update_in_its_form_with_the_older_value_told_again_later(tmp_path):
    assert [(s.names, s.values, s.ask, s.said["old"]) for s in FAMILIES[2].subjects] == [
        (s.names, s.values, s.ask, s.said["old"]) for s in SUBJECTS
    ]  # family 1's subjects, with harder forms of their own
    folder = write(tmp_path / "hard", family=2)
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


def test_family_3_has_new_subjects_and_states_each_update_in_its_form(tmp_path):
    old_names = {n for s in SUBJECTS for n in s.names}
    assert not old_names & {n for s in SUBJECTS3 for n in s.names}
    assert not {q for s in SUBJECTS for q in s.ask} & {q for s in SUBJECTS3 for q in s.ask}
    forms: Counter[str] = Counter()
    twice = 0
    for turns, at, q, item in _questions(write(tmp_path / "three", family=3)):
        form = item["update_form"]
        forms[form] += 1
        subject = next(s for s in SUBJECTS3 if q.question in s.ask)
        olds = [turns[at[r]] for r in q.replaced]
        (new,) = (turns[at[g]] for g in q.gold)
        assert len(olds) == (2 if item["updated_twice"] else 1)
        twice += item["updated_twice"]
        assert new["speaker"] == "User" and q.answer.lower() in new["text"].lower()
        assert all(o["speaker"] == "User" and q.answer.lower() not in o["text"].lower() for o in olds)
        assert all(at[o["dia_id"]] < at[new["dia_id"]] and o["session"] < new["session"] for o in olds)
        if form == "correction":  # names the value it corrects, the newest earlier one
            assert _value(subject, olds[-1]["text"]) in new["text"].lower()
        if form in ("later", "asked"):  # the value's turn does not name the entity; an earlier user turn does
            assert not any(n.lower() in new["text"].lower() for n in subject.names)
            k = at[new["dia_id"]]
            gap = [k - 2] if form == "asked" else [k - 6, k - 8, k - 10]  # two to four exchanges between
            leads = [turns[j] for j in gap if turns[j]["session"] == new["session"]]
            assert any(n.lower() in t["text"].lower() for t in leads for n in subject.names)
        if form == "mixed":
            assert new["text"].count(".") >= 6
        if item["history_after"]:  # the first value, told again after the update
            first = _value(subject, olds[0]["text"])
            assert any(first in t["text"].lower() and at[t["dia_id"]] > at[new["dia_id"]] for t in turns)
    assert set(forms) == set(FORMS3) and max(forms.values()) - min(forms.values()) <= 1
    assert 20 <= twice <= 30


def _questions(folder: Path):
    """(turns, their positions by dia_id, question, its item in probing_questions.json) of a generated family of 80
    questions, as the BEAM loader reads them, chats in order."""
    bench = load_beam(folder)
    assert bench.questions == 80
    for d in bench.dialogues:
        raw = json.loads((folder / d.user_id / "probing_questions.json").read_text())["knowledge_update"]
        at = {t["dia_id"]: k for k, t in enumerate(d.turns)}
        for q, item in zip(d.questions, raw, strict=True):
            yield d.turns, at, q, item


def _value(subject, text: str) -> str:
    return next(v.lower() for v in sorted(subject.values, key=len, reverse=True) if v.lower() in text.lower())


def test_family_4_has_new_subjects_of_every_kind_and_states_each_update_in_its_form(tmp_path):
    earlier = [*SUBJECTS, *SUBJECTS3]
    assert not {n for s in earlier for n in s.names} & {n for s in SUBJECTS4 for n in s.names}
    assert not {q for s in earlier for q in s.ask} & {q for s in SUBJECTS4 for q in s.ask}
    kinds = Counter(s.kind for s in SUBJECTS4)
    assert len(SUBJECTS4) == 16 and set(kinds) == set(KINDS4) and max(kinds.values()) - min(kinds.values()) <= 1
    for s in SUBJECTS4:  # no value holds another, so an answer can't hide in the statement it replaced
        assert len(s.values) >= 5 and len(s.ask) >= 3
        assert not [(a, b) for a in s.values for b in s.values if a != b and a.lower() in b.lower()]
    subjects: Counter[str] = Counter()
    n = twice = history = 0
    for turns, at, q, item in _questions(write(tmp_path / "four", family=4)):
        form = item["update_form"]
        assert form == FORMS4[n % len(FORMS4)]  # the forms in turn over the set's questions
        n += 1
        subject = next(s for s in SUBJECTS4 if q.question in s.ask)
        subjects[subject.names[0]] += 1
        olds = [turns[at[r]] for r in q.replaced]
        (new,) = (turns[at[g]] for g in q.gold)
        assert len(olds) == (2 if item["updated_twice"] else 1)
        twice += item["updated_twice"]
        assert q.answer in new["text"]  # verbatim
        assert all(o["speaker"] == "User" and q.answer.lower() not in o["text"].lower() for o in olds)
        assert all(at[o["dia_id"]] < at[new["dia_id"]] and o["session"] < new["session"] for o in olds)
        k = at[new["dia_id"]]
        named = [name.lower() in new["text"].lower() for name in subject.names]
        assert new["speaker"] == ("Assistant" if form == "confirmed" else "User")
        if form == "question":
            assert new["text"].endswith("?")
        if form in ("compared", "negation"):  # names the value it replaces, the newest earlier one
            assert _value(subject, olds[-1]["text"]) in new["text"].lower()
        if form == "negation":
            assert not any(named)
        if form == "confirmed":  # the user's turn before names the subject, not the value; the user confirms
            doc, confirm = turns[k - 1], turns[k + 1]
            assert doc["speaker"] == confirm["speaker"] == "User" and q.answer not in doc["text"]
            assert any(name.lower() in doc["text"].lower() for name in subject.names) and confirm["text"] in CONFIRMS
        if form == "list":  # several paragraphs, code, and one line of the list holding the value
            lines = new["text"].split("\n")
            assert new["text"].count("\n\n") >= 3 and "```" in new["text"]
            assert len([x for x in lines if x.startswith("- ")]) == 5
            assert len([x for x in lines if q.answer in x]) == 1
        if item["history_after"]:  # the first value, told again after the update
            history += 1
            first = _value(subject, olds[0]["text"])
            assert any(first in t["text"].lower() and at[t["dia_id"]] > k for t in turns)
    assert len(subjects) == 16 and min(subjects.values()) >= 2
    assert {s.kind for s in SUBJECTS4 if s.names[0] in subjects} == set(KINDS4)
    assert 20 <= twice <= 30 and 20 <= history <= 30


def test_the_templates_are_data_the_installed_package_ships():
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert f'"eval/{DATA.name}"' in pyproject  # package-data: an installed package has the templates
    assert set(json.loads(DATA.read_text())["families"]) == {str(n) for n in FAMILIES}
