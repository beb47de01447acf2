"""The store the inspector tests look at: the demo conversation for DEMO and one private turn for OTHER, which a
token bound to DEMO must never show."""

from __future__ import annotations

from memcompile_langgraph.cli.demo_data import QUESTIONS, demo_turns

DEMO, OTHER = "demo", "ann"
SECRET = "Ann keeps her spare key under the blue flowerpot."
QUESTION, GOLD = QUESTIONS[3], "D3:1"  # "Which startup did Priya get a new job at?": Priya's Northwind turn


def filled(where, embeddings):
    """The memory of `where` (support.record_backends.Where) holding both users."""
    mem = where.memory(embeddings=embeddings)
    mem.add_turns(demo_turns(), user_id=DEMO)
    mem.add_turns([{"speaker": "Ann", "text": SECRET, "time": "2024-02-01"}], user_id=OTHER)
    return mem
