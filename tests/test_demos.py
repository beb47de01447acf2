"""The demos run offline as a user runs them: a subprocess, no OPENAI_API_KEY, the offline reader answering."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import FakeOpenAI

from memcompile_langgraph.integrations.memory_nodes import RECALL_HEADER

ROOT = Path(__file__).resolve().parents[1]
# each demo question -> the turn that answers it and words the answer must quote
DEMO_ANSWERS = {
    "What kind of dog did Tom adopt and what is its name?": ("D1:2", "beagle named Biscuit"),
    "When did Tom start the pottery class?": ("D2:1", "pottery class at the community center last Tuesday"),
    "Why is Priya seeing a physiotherapist?": ("D2:4", "knee has been hurting"),
    "Where does Priya work now?": ("D3:1", "startup called Northwind"),
    "Who is coming to Lisbon with Priya?": ("D3:5", "Anika is flying in"),
}


def run_demo(command: list[str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def answers(out: str) -> dict[str, str]:
    """question -> the printed answer line, for every Q:/A: pair of a demo's output."""
    blocks = [b for b in out.split("\n\n") if b.startswith("Q: ")]
    return {b.split("\n")[0][3:]: b.split("\nA: ")[1].split("\n")[0] for b in blocks}


def assert_answered(found: dict[str, str]) -> None:
    assert set(found) == set(DEMO_ANSWERS)
    for question, (dia_id, words) in DEMO_ANSWERS.items():
        prefix = f"From memory [{dia_id}], quoted by the offline reader: "
        assert found[question].startswith(prefix), (question, found[question])
        assert words in found[question], (question, found[question])


@pytest.mark.slow
def test_memcompile_demo_answers_its_questions_from_the_right_turns():
    out = run_demo(["memcompile", "demo"])
    assert "offline extractive reader (no language model)" in out
    assert_answered(answers(out))


@pytest.mark.slow
def test_retriever_qa_demo_answers_with_sources():
    out = run_demo([sys.executable, str(ROOT / "demos" / "retriever_qa.py"), "--k", "4"])
    assert_answered(answers(out))
    dog = next(b for b in out.split("\n\n") if b.startswith("Q: What kind of dog"))
    sources = dog.split("sources: ")[1].split(", ")
    assert len(sources) == 4 and sources[0].startswith("D1:2")


@pytest.mark.slow
def test_chat_agent_demo_recalls_across_conversations(tmp_path):
    out = run_demo([sys.executable, str(ROOT / "demos" / "chat_agent.py"), "--store", str(tmp_path / "mem")])
    later = out.split("=== conversation 'next-month' ===")[1]
    replies = [line for line in later.splitlines() if line.startswith("Aria: ")]
    assert len(replies) == 3 and all(r.startswith("Aria: From memory [m-") for r in replies)
    expected = ("beagle named Biscuit", "pottery class at the community center", "run the half marathon")
    for reply, words in zip(replies, expected):
        assert words in reply, reply
    # the very first message: empty memory
    assert "(recalled: nothing)" in out.split("=== conversation 'friday' ===")[0]
    assert "memory of 'tom': 12 turns" in out
    assert (tmp_path / "mem" / "memcompile.sqlite3").is_file()


@pytest.mark.slow
def test_chat_agent_demo_uses_chat_openai_when_a_key_is_set(tmp_path, monkeypatch):
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        proc = subprocess.run(
            [sys.executable, str(ROOT / "demos" / "chat_agent.py"), "--store", str(tmp_path / "mem")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        bodies = server.of("unknown")  # the demo's persona prompt is none of the engine's stage prompts
    assert len(bodies) == 6 and all(b["model"] == "gpt-4o-mini" for b in bodies)
    last = bodies[-1]["messages"]
    assert [m["role"] for m in last[:1] + last[-2:]] == ["system", "user", "system"]  # persona, question, its memory
    assert last[-1]["content"].startswith(RECALL_HEADER) and "Anika" in last[-1]["content"]
    assert proc.stdout.count("Aria: Biscuit") == 6  # the server's reply, printed as the assistant's
