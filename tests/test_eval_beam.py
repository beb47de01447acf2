"""BEAM's native layout (tests/data/beam_mini: two chats, both question-file layouts) -> eval dialogues and a run."""

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcompile_langgraph.eval.beam import CATEGORIES, chat_questions, chat_turns, gold_ids, load_beam
from memcompile_langgraph.ingest.loaders import UnusableInput
from memcompile_langgraph.ingest.turn_input import BadTurn, coerce_turn

BEAM_MINI = Path(__file__).parent / "data" / "beam_mini"
BEAM_DEV = Path("/work/shared/data/beam/100K")


def test_chats_become_one_user_each_with_batches_as_dated_sessions():
    bench = load_beam(BEAM_MINI)
    assert bench.name == "beam" and bench.categories == CATEGORIES
    assert [d.user_id for d in bench.dialogues] == ["1", "2"]
    d = bench.dialogues[0]
    assert [t["dia_id"] for t in d.turns] == [f"D1:{i}" for i in range(6)] + [f"D2:{i}" for i in range(6, 12)]
    # the first batch's anchor sits on its first message, the second's on the batch; the "->-> b,n" tag is dropped
    assert d.turns[2] == {
        "speaker": "User",
        "text": "The dashboard API currently responds in about 400ms on average.",
        "time": "March-15-2024",
        "session": 1,
        "session_label": "batch 1",
        "dia_id": "D1:2",
    }
    assert d.turns[8]["time"] == "April-05-2024" and d.turns[8]["session"] == 2 and d.turns[9]["speaker"] == "Assistant"


def test_gold_is_source_chat_ids_with_the_updated_statement_only_for_knowledge_updates():
    bench = load_beam(BEAM_MINI)
    q = {x.question: x for d in bench.dialogues for x in d.questions}
    assert q["What is the average response time of the dashboard API?"].gold == ("D2:8",)
    assert q["What is the average response time of the dashboard API?"].category == "knowledge_update"
    assert q["How many days between my first sprint end and the caching work?"].gold == ("D1:0", "D2:8")
    assert q["In what order did I bring up the sprint, the API speed and the columns?"].gold == ("D1:0", "D1:2", "D1:4")
    assert q["Have I written Flask routes?"].gold == ("D2:6", "D2:7")  # id 99 is not in the chat: counted
    assert q["Have I written Flask routes?"].answer.startswith("You said")
    assert q["How many cans of salmon does Miso eat every day?"].gold == ("D1:2",)
    assert q["How many cans of salmon does Miso eat every day?"].replaced == ("D1:0",)
    assert bench.questions == 9
    assert dict(bench.skipped) == {
        "gold_id_not_in_chat": 1,
        "not_retrieval:abstention": 1,
        "not_retrieval:summarization": 1,
        "bad_question": 1,
    }


def test_malformed_messages_are_turns_the_ingest_counts():
    d = load_beam(BEAM_MINI, ["2"]).dialogues[0]
    bad = []
    for t in d.turns:
        try:
            coerce_turn(t)
        except BadTurn as exc:
            bad.append(str(exc))
    assert bad == ["not_an_object", "missing_speaker"]  # a message without an id is not stored
    assert [t["dia_id"] for t in d.turns if isinstance(t, dict) and "dia_id" in t] == ["D1:0", "D1:1", "D1:2"]


def test_selection_and_unusable_folders_are_one_line_errors(tmp_path):
    assert [d.user_id for d in load_beam(BEAM_MINI / "2").dialogues] == ["2"]  # one chat folder works too
    with pytest.raises(UnusableInput, match="no sample named 7"):
        load_beam(BEAM_MINI, ["7"])
    with pytest.raises(UnusableInput, match="no BEAM chat"):
        load_beam(tmp_path)
    with pytest.raises(UnusableInput, match="not a folder"):
        load_beam(tmp_path / "missing")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "chat.json").write_text("[]")
    with pytest.raises(UnusableInput, match="no probing_questions.json"):
        load_beam(tmp_path)
    (tmp_path / "c" / "probing_questions.json").write_text("{not json")
    with pytest.raises(UnusableInput, match="not valid JSON"):
        load_beam(tmp_path)
    (tmp_path / "c" / "probing_questions.json").write_text("[1]")
    with pytest.raises(UnusableInput, match="not an object of categories"):
        load_beam(tmp_path)


json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 30) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(chat=json_value, probing=json_value, category=st.sampled_from(CATEGORIES))
def test_any_json_is_turns_and_questions_or_a_value_error(chat, probing, category):
    try:
        turns, dia = chat_turns(chat)
        questions = chat_questions("u", probing, dia, Counter())
    except ValueError:
        return
    assert all(g in dia.values() for q in questions for g in q.gold)
    assert all(isinstance(i, int) for i in gold_ids(category, probing))
    assert len([t for t in turns if isinstance(t, dict) and "dia_id" in t]) == len(dia)


def test_eval_beam_writes_report_with_beam_categories_and_baselines(tmp_path, embeddings):
    from memcompile_langgraph.cli import main

    out = tmp_path / "out"
    assert main(["eval", "beam", str(BEAM_MINI), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["benchmark"] == "beam" and report["overall"]["questions"] == 9
    assert list(report["by_category"]) == list(CATEGORIES)
    assert report["by_category"]["knowledge_update"]["questions"] == 2
    # both replaced statements are in their contexts and marked superseded (as the query graph's packets say)
    updates = report["overall"]["updates"]
    assert updates["update_questions"] == 2 and updates["old_also_in_context"] == updates["old_marked"] == 2
    assert {"bm25_top12", "dense_top12"} <= set(report["baselines"])
    assert set(report["baselines"]["dense_top12"]["by_category"]) == set(CATEGORIES)
    assert report["overall"]["gold_recall"] > 0 and (out / "report.md").read_text().startswith(
        "# MemCompile evaluation: beam"
    )


@pytest.mark.slow
@pytest.mark.skipif(not (BEAM_DEV / "1" / "chat.json").is_file(), reason="BEAM dev data not on this machine")
def test_eval_beam_on_one_real_chat(tmp_path, embeddings):
    from memcompile_langgraph.cli import main

    out = tmp_path / "out"
    assert main(["eval", "beam", str(BEAM_DEV), "--samples", "1", "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["overall"]["questions"] == 12 and report["dialogues"]["1"]["packets"] == 188
    assert report["overall"]["gold_ids_missing_from_dialogue"] == 0
    assert report["overall"]["gold_recall"] >= 0.5  # raw-turn dense top-12 scores 0.645 on the 20 chats


def test_gold_ids_read_every_shape_of_source_chat_ids():
    # BEAM 500K event_ordering gives one list of ids per event (chats 7, 11, 12, 14, 17, 19): all of them are gold
    assert gold_ids("event_ordering", [[18, 20], [148, 150], [20, 366]]) == [18, 20, 148, 150, 366]
    assert gold_ids("temporal_reasoning", {"first_event": [4], "second_event": [9, 4]}) == [4, 9]
    assert gold_ids("contradiction_resolution", {"first_statement": [3], "second_statement": [7]}) == [3, 7]
    assert gold_ids("knowledge_update", {"original_info": [1], "updated_info": [5, "6"]}) == [5, 6]
    assert gold_ids("knowledge_update", {"original_info": [1], "updated_info": [5]}, "original_info") == [1]
    assert gold_ids("information_extraction", 12) == [12] and gold_ids("information_extraction", None) == []
    assert gold_ids("information_extraction", [True, "x", 2.5, "8"]) == [8]
