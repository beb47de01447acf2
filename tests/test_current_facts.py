"""Current facts of any kind: a later statement of the same speaker about the same subject supersedes the earlier one
whatever the value is (a place, an employer, a partner), offline and through the model's update stage; the current
statement is read first."""

from __future__ import annotations

import json
import re

import pytest
from support.generated_sets import FILLER

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.llm.models import chat_model


def turns(old: str, new: str) -> list[dict]:
    out = [{"speaker": "Ana", "text": old, "time": "2024-03-01", "session": 1}]
    out += [{"speaker": "Ana", "text": t, "time": "2024-03-01", "session": 1} for t in FILLER]
    out += [{"speaker": "Ana", "text": t, "time": "2024-05-01", "session": 2} for t in FILLER[:3]]
    out += [{"speaker": "Ana", "text": new, "time": "2024-06-10", "session": 3}]
    return out


@pytest.mark.parametrize(
    ("old", "new", "question"),
    [
        ("I live in Berlin.", "I moved from Berlin to Lisbon.", "Where do I live?"),
        ("I work at Contoso as an engineer.", "I work at Northwind as an engineer.", "Where do I work?"),
        ("I'm dating Sam.", "I'm dating Priya.", "Who am I dating?"),
    ],
)
def test_a_later_statement_of_another_value_comes_first_and_marks_the_earlier(make_mem, old, new, question):
    ctx = make_mem(turns=turns(old, new), user_id="ana").compile(question, user_id="ana")
    ids = [p.dia_id for p in ctx.packets]
    assert ids[0] == "D3:1", ids  # the current statement is read first
    assert {p.dia_id: p.superseded_by for p in ctx.packets}["D1:1"] == "D3:1"
    assert "- [superseded on 2024-06-10 by [D3:1]: stated here on 2024-03-01]" in ctx.text.split("\n\n")[1]


def test_a_statement_told_again_or_a_question_asking_no_current_value_marks_nothing(make_mem):
    mem = make_mem(turns=turns("I live in Berlin.", "I live in Berlin."), user_id="ana")
    assert not [p for p in mem.compile("Where do I live?", user_id="ana").packets if p.superseded_by is not None]
    mem = make_mem(turns=turns("I live in Berlin.", "I moved from Berlin to Lisbon."), user_id="ana")
    assert not [
        p for p in mem.compile("Did I ever live in Berlin?", user_id="ana").packets if p.superseded_by is not None
    ]


def test_the_model_is_offered_the_pair_that_names_no_question_term_and_names_the_values(
    openai_server, tmp_path, embeddings
):
    cfg = MemCompileConfig(llm_backoff_seconds=0.01, llm_call_attempts=2)
    mem = MemCompile(tmp_path, llm=chat_model("fake-model", openai_server.base_url), config=cfg, embeddings=embeddings)
    mem.add_turns(turns("I live in Berlin.", "I moved from Berlin to Lisbon."), user_id="ana")

    def decide(body):  # confirms the move, rejects every other pair
        pairs = re.findall(
            r"^\[(U\d+)\]\nolder.*?: (\".*\")\nnewer.*?: (\".*\")$", body["messages"][1]["content"], re.M
        )
        return json.dumps(
            {
                "updates": [
                    {"pair": u, "update": True, "old_value": "Berlin", "new_value": "Lisbon"}
                    if "Berlin" in old and "Lisbon" in new
                    else {"pair": u, "update": False}
                    for u, old, new in pairs
                ]
            }
        )

    openai_server.script("update", decide)
    ctx = mem.compile("Where do I live?", user_id="ana")
    assert "Lisbon" in openai_server.of("update")[0]["messages"][1]["content"]
    assert [p.dia_id for p in ctx.packets][0] == "D3:1"
    assert "- [superseded on 2024-06-10 by [D3:1]: Lisbon replaces Berlin stated here on 2024-03-01]" in ctx.text
    mem.close()
