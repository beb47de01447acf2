"""Knowledge updates as a class (evidence/subjects.py): the subject through the dense channel, values as numbers and
names, the newest statement brought into the selection and the older ones marked; and the generated update set
(eval/updates_set.py) as BEAM's loader reads it."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.config import DEFAULT_CONFIG
from memcompile_langgraph.eval.beam import load_beam
from memcompile_langgraph.eval.updates_set import SUBJECTS, write
from memcompile_langgraph.evidence.subjects import follow_updates, stated_values, subject_supersessions

ON = replace(DEFAULT_CONFIG, update_subject_similarity=0.55, update_follow_from=6, update_follow_max=1)


def test_values_are_numbers_and_names_inside_a_sentence():
    assert stated_values("I checked and the staging database takes up 1,450 GB of disk.") == {"1450", "GB"}
    assert stated_values("Mia changed schools, she's at Riverside Primary now.") == {"Riverside", "Primary"}
    assert stated_values("Headcount on the team went to seven.") == {"seven"}
    assert stated_values("I think so. What about it?") == frozenset()


@given(st.text(max_size=300))
def test_values_of_any_text_are_a_set_of_its_own_words_and_numbers(text):
    for value in stated_values(text):
        assert value.replace(",", "") and (value in text or value in text.replace(",", "") or value in text.lower())


FILLER = [
    "Can you help me write a unit test for the date parser?",
    "What's a good way to structure a weekly planning meeting?",
    "How should I name feature branches in git?",
]


def _turns(old: str, new: str) -> list[dict]:
    out, n = [], 0
    for session, said in enumerate([[old, *FILLER], FILLER, [new, *FILLER]], 1):
        for text in said:
            n += 1
            out.append(
                {
                    "speaker": "User",
                    "text": text,
                    "time": f"2024-0{session}-01",
                    "session": session,
                    "dia_id": f"D{session}:{n}",
                }
            )
            n += 1
            out.append(
                {
                    "speaker": "Assistant",
                    "text": "Sure, here is one way to do it.",
                    "time": f"2024-0{session}-01",
                    "session": session,
                    "dia_id": f"D{session}:{n}",
                }
            )
    return out


def test_the_newest_statement_of_a_selected_subject_is_brought_in_and_the_older_marked(make_mem):
    old, new = "The monthly rent on my flat is $1,450.", "The landlord raised what I pay for the apartment to $1,600."
    mem = make_mem(turns=_turns(old, new))
    index = mem.index("u")
    by_text = {p.text: pid for pid, p in index.packets.items()}
    selected = [by_text[old], *[pid for pid in index.packet_order if pid not in (by_text[old], by_text[new])][:5]]
    followed = follow_updates(index, selected, ON)
    assert followed[:2] == [by_text[old], by_text[new]] and len(followed) == len(selected)
    assert follow_updates(index, selected, replace(DEFAULT_CONFIG, update_subject_similarity=0.0)) == selected
    marks = subject_supersessions(index, [index.packets[p] for p in followed], ON)
    assert marks[by_text[old]].new == by_text[new] and marks[by_text[old]].new_values == ("1600",)


def test_a_later_statement_of_another_subject_or_of_the_same_values_is_no_update(make_mem):
    old = "The monthly rent on my flat is $1,450."
    for new in (
        "Our CI test run needs 21 minutes on the build server.",
        "The monthly rent on my flat is still $1,450.",
    ):
        mem = make_mem(turns=_turns(old, new))
        index = mem.index("u")
        by_text = {p.text: pid for pid, p in index.packets.items()}
        selected = [by_text[old]]
        assert follow_updates(index, selected, ON) == selected
        assert subject_supersessions(index, [index.packets[by_text[old]], index.packets[by_text[new]]], ON) == {}


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
