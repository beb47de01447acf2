"""The generated knowledge-update set (eval/updates_set.py) as BEAM's loader reads it: every question's gold is the
later statement, in a later session, holding the answer the earlier one does not."""

from __future__ import annotations

import json

from memcompile_langgraph.eval.beam import load_beam
from memcompile_langgraph.eval.updates_set import SUBJECTS, write


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
