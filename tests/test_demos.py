"""The demos run offline as a user runs them: a subprocess, no OPENAI_API_KEY, the scripted reader answering."""
import os
import subprocess
import sys
from pathlib import Path

from openai_server import FakeOpenAI

from memcompile_langgraph.integrations.memory_nodes import RECALL_HEADER

ROOT = Path(__file__).resolve().parents[1]


def run_demo(name: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, str(ROOT / "demos" / name), *args], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_chat_agent_demo_recalls_across_conversations(tmp_path):
    out = run_demo("chat_agent.py", "--store", str(tmp_path / "mem"))
    later = out.split("=== conversation 'next-month' ===")[1]
    assert "Aria: From memory [m-" in later and "named Biscuit" in later and "community center" in later
    assert "(recalled: nothing)" in out.split("=== conversation 'friday' ===")[0]  # the very first message: empty memory
    assert "memory of 'tom': 12 turns" in out
    assert (tmp_path / "mem" / "memcompile.sqlite3").is_file()


def test_retriever_qa_demo_answers_with_sources():
    out = run_demo("retriever_qa.py", "--k", "4")
    blocks = [b for b in out.split("\n\n") if b.startswith("Q: ")]
    assert len(blocks) == 5
    dog = blocks[0]
    assert "beagle named Biscuit" in dog.split("\nA: ")[1]
    sources = dog.split("sources: ")[1].split(", ")
    assert len(sources) == 4 and sources[0].startswith("D1:2")


def test_chat_agent_demo_uses_chat_openai_when_a_key_is_set(tmp_path, monkeypatch):
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        proc = subprocess.run([sys.executable, str(ROOT / "demos" / "chat_agent.py"), "--store", str(tmp_path / "mem")], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        bodies = server.of("unknown")  # the demo's persona prompt is none of the engine's stage prompts
    assert len(bodies) == 6 and all(b["model"] == "gpt-4o-mini" for b in bodies)
    last = bodies[-1]["messages"]
    assert [m["role"] for m in last[:1] + last[-2:]] == ["system", "user", "system"]  # persona, question, its memory
    assert last[-1]["content"].startswith(RECALL_HEADER) and "Anika" in last[-1]["content"]
    assert proc.stdout.count("Aria: Biscuit") == 6  # the server's reply, printed as the assistant's
