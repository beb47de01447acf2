"""The generated set of current facts of any kind (eval/current_facts_set.py) as BEAM's loader reads it. It is frozen:
its files' digest is pinned, so a change to its templates shows here before any figure moves."""

from __future__ import annotations

import json
from collections import Counter

from support.generated_sets import set_digest

from memcompile_langgraph.eval.beam import load_beam
from memcompile_langgraph.eval.current_facts_set import FORMS, main

# sha256 over each chat folder's files (relative path, then bytes), chats in numeric order, default command line
DIGEST = "110e507c2fe683882825417b2dc9fe3848e51545e5142686500699520f6d0d76"


def test_the_set_is_frozen_mostly_non_numeric_and_a_third_without_a_change_word(tmp_path):
    main([str(tmp_path / "set")])
    assert set_digest(tmp_path / "set") == DIGEST, "the current-facts set changed: it was frozen"
    raw = [
        q
        for c in range(1, 11)
        for q in json.loads((tmp_path / "set" / str(c) / "probing_questions.json").read_text())["knowledge_update"]
    ]
    forms = Counter(q["update_form"] for q in raw)
    assert set(forms) == set(FORMS) and min(forms.values()) >= 26
    assert sum(q["kind"] != "number" for q in raw) > len(raw) * 0.8


def test_every_gold_is_the_later_user_statement_holding_the_new_value(tmp_path):
    bench = load_beam(main([str(tmp_path / "set"), "--chats", "3"]) or tmp_path / "set")
    assert bench.questions == 24
    for d in bench.dialogues:
        text = {t["dia_id"]: t for t in d.turns}
        for q in d.questions:
            new, old = text[q.gold[0]], text[q.replaced[0]]
            assert q.category == "knowledge_update" and new["session"] > old["session"]
            assert new["speaker"] == old["speaker"] and q.answer in new["text"] and q.answer not in old["text"]
