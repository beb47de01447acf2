"""A chat agent with long-term memory: recall -> model -> remember, across separate conversation threads.

Offline by default: a scripted reader quotes the recalled claim that best matches each question. With
OPENAI_API_KEY set, ChatOpenAI ($MEMCOMPILE_CHAT_MODEL, default gpt-4o-mini) answers instead.

    python demos/chat_agent.py [--store DIR] [--user tom] [--name Tom]
"""

from __future__ import annotations

import argparse
import tempfile

from langgraph.checkpoint.memory import InMemorySaver

from memcompile_langgraph import MemCompile
from memcompile_langgraph.integrations.chat_agent import build_chat_agent
from memcompile_langgraph.integrations.memory_nodes import is_recall_message
from memcompile_langgraph.integrations.offline_model import memory_claims

ASSISTANT = "Aria"
# (thread id, what the user says); each thread is a separate conversation, the memory is shared by all of them
CONVERSATIONS = [
    (
        "monday",
        [
            "Hi! I just adopted a beagle named Biscuit from the shelter.",
            "I also signed up for a pottery class at the community center.",
        ],
    ),
    ("friday", ["My sister Anika is flying in from Lisbon next week to run the half marathon."]),
    (
        "next-month",
        [
            "What is the name of the dog I adopted?",
            "Where do I take my pottery class?",
            "Which race is my sister Anika running?",
        ],
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="keep the memory here (default: a temporary folder)")
    parser.add_argument("--user", default="tom", help="user id: whose memory")
    parser.add_argument("--name", default="Tom", help="the user's name, stored as the speaker of their turns")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memcompile-chat-") as tmp:
        mem = MemCompile(args.store or tmp)
        agent = build_chat_agent(mem, user_name=args.name, assistant_name=ASSISTANT, checkpointer=InMemorySaver())
        for thread, lines in CONVERSATIONS:
            print(f"=== conversation '{thread}' ===")
            for line in lines:
                out = agent.invoke(
                    {"messages": [("user", line)]},
                    {"configurable": {"thread_id": thread}},
                    context={"user_id": args.user},
                )
                recalled = [m for m in out["messages"] if is_recall_message(m)]
                dia_ids = list(dict.fromkeys(c.dia_id for c in memory_claims(recalled)))
                print(f"{args.name}: {line}")
                print(f"   (recalled: {', '.join(dia_ids) or 'nothing'})")
                print(f"{ASSISTANT}: {out['messages'][-1].text}\n")
        stats = mem.stats(args.user)
        print(
            f"memory of '{args.user}': {stats['packets']} turns, {stats['descriptors']} claims, {stats['cells']} Cells"
        )
        mem.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
