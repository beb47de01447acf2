"""Benchmark files -> eval dialogues: LoCoMo (tests/data/locomo_mini.json) and LongMemEval-S (longmemeval_s_mini.json)."""

import json
from pathlib import Path

import pytest

from memcompile_langgraph.eval.locomo import load_locomo, parse_evidence
from memcompile_langgraph.eval.longmemeval import load_longmemeval
from memcompile_langgraph.ingest.loaders import UnusableInput
from memcompile_langgraph.ingest.turn_input import coerce_turn

DATA = Path(__file__).parent / "data"
LOCOMO_MINI = DATA / "locomo_mini.json"
LME_MINI = DATA / "longmemeval_s_mini.json"


def test_parse_evidence_splits_and_repairs_ids():
    assert parse_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert parse_evidence(["D1:3", "D1:3,D2:1"]) == ("D1:3", "D2:1")
    assert parse_evidence(["D:11:26", "D"]) == ("D11:26",)  # the benchmark's two malformed entries
    assert parse_evidence("D2:4") == ("D2:4",)
    assert parse_evidence(None) == () and parse_evidence([3, None]) == ()


def test_locomo_questions_skip_adversarial_and_keep_gold():
    bench = load_locomo(LOCOMO_MINI)
    assert [d.user_id for d in bench.dialogues] == ["mini-1", "mini-2"]
    assert bench.questions == 13 and dict(bench.skipped) == {"adversarial": 2, "gold_id_not_in_dialogue": 1}
    assert bench.categories == ("single-hop", "multi-hop", "temporal", "open-domain")
    q = {x.question: x for d in bench.dialogues for x in d.questions}
    assert q["Where does Priya work?"].gold == ("D1:4", "D2:1") and q["Where does Priya work?"].category == "single-hop"
    assert q["How many minutes did Tom need for the 10K?"].answer == "52"  # numeric answers become text
    assert q["What does Priya like about robots?"].gold == ()
    assert q["Is Ben a runner?"].gold == ("D1:4",) and q["Is Ben a runner?"].category == "open-domain"
    assert q["Who waited during the race?"].gold == ("D2:2",)  # D9:9 is not in mini-1: counted, left out
    assert q["When did Tom run the Riverside 10K?"].qid == "mini-1#2"
    assert len(bench.dialogues[0].turns) == 11
    assert bench.dialogues[0].turns[9]["blip_caption"] == "a photo of a man holding a race medal"


def test_locomo_sample_selection_and_bad_files(tmp_path):
    bench = load_locomo(LOCOMO_MINI, ["mini-2"])
    assert [d.user_id for d in bench.dialogues] == ["mini-2"] and bench.questions == 5
    with pytest.raises(UnusableInput, match="no sample named conv-99"):
        load_locomo(LOCOMO_MINI, ["conv-99"])
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"speaker": "A", "text": "hi"}) + "\n")
    with pytest.raises(UnusableInput, match="no LoCoMo samples"):
        load_locomo(turns)


def test_longmemeval_instances_become_dialogues_in_the_turn_schema():
    bench = load_longmemeval(LME_MINI)
    assert bench.name == "longmemeval"
    assert [d.user_id for d in bench.dialogues] == ["q-user-1", "q-temp-2", "q-user-1_abs"]
    assert dict(bench.skipped) == {"bad_haystack": 1, "duplicate_question_id": 1, "not_an_object": 1}
    d = bench.dialogues[0]
    assert [t["dia_id"] for t in d.turns] == [
        "sharegpt_a1_0:1",
        "sharegpt_a1_0:2",
        "answer_b2:1",
        "answer_b2:2",
        "answer_b2:3",
    ]
    assert d.turns[2] == {
        "speaker": "user",
        "text": "My beagle Max keeps barking at night.",
        "time": "2023/05/28 (Sun) 18:05",
        "session": 2,
        "session_label": "answer_b2",
        "dia_id": "answer_b2:1",
    }
    assert "has_answer" not in d.turns[2]  # evidence labels never reach the store
    (q,) = d.questions
    assert (q.qid, q.category, q.answer, q.gold) == ("q-user-1#0", "single-session-user", "a beagle", ("answer_b2:1",))
    t = bench.dialogues[1].questions[0]
    assert t.answer == "3" and t.gold == ("answer_c3:1", "answer_c4:1") and t.category == "temporal-reasoning"
    abstention = bench.dialogues[2]
    assert abstention.questions[0].gold == () and abstention.turns[1] == "not a turn"
    # every converted turn is one the ingest graph accepts
    assert coerce_turn(d.turns[0]).session_label == "sharegpt_a1_0"


def test_longmemeval_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UnusableInput, match="not valid JSON"):
        load_longmemeval(bad)
    bad.write_text(json.dumps([{"question_id": "x"}]))
    with pytest.raises(UnusableInput, match="no usable LongMemEval instance"):
        load_longmemeval(bad)
    assert [d.user_id for d in load_longmemeval(LME_MINI, ["q-temp-2"]).dialogues] == ["q-temp-2"]


def test_locomo_gold_ids_the_dialogue_does_not_hold_are_counted_not_scored(tmp_path):
    # conv-42 and conv-47 of the dev split name a turn their dialogue lacks (D10:19, D4:36)
    sample = {
        "sample_id": "s",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "I moved to Lisbon."},
                {"speaker": "B", "dia_id": "D1:2", "text": "I adopted a cat."},
            ],
        },
        "qa": [
            {"question": "Where?", "answer": "Lisbon, a cat", "evidence": ["D1:1", "D1:9; D1:2"], "category": 1},
            {"question": "Who?", "answer": "nobody", "evidence": ["D7:3"], "category": 4},
        ],
    }
    (tmp_path / "s.json").write_text(json.dumps([sample]))
    bench = load_locomo(tmp_path / "s.json")
    q = {x.question: x for d in bench.dialogues for x in d.questions}
    assert q["Where?"].gold == ("D1:1", "D1:2")  # recall 1 is reachable
    assert q["Who?"].gold == ()  # no usable gold: left out of recall, not scored 0
    assert dict(bench.skipped) == {"gold_id_not_in_dialogue": 2}
