"""The offline prompt-token estimate builds one request per model call the stages would make."""

import json

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import QUESTIONS, demo_turns
from memcompile_langgraph.eval.estimate import estimate, main


def test_estimate_counts_one_request_per_stage_call(embeddings):
    mem = MemCompile(None, embeddings=embeddings)
    mem.add_turns(demo_turns(), user_id="demo")
    out = estimate(mem, "demo", QUESTIONS)
    stats = mem.stats("demo")
    assert out["fact"]["requests"] == stats["packets"]
    assert out["metadata"]["requests"] == stats["descriptors"]
    assert out["intent"]["requests"] == out["schedule"]["requests"] == out["answer"]["requests"] == len(QUESTIONS)
    assert 0 < out["frontier"]["requests"] <= len(QUESTIONS)
    # a scheduler request renders its whole pool, so its size grows with the pool
    assert out["schedule"]["prompt_tokens"] / out["schedule"]["requests"] > out["intent"]["prompt_tokens"] / len(
        QUESTIONS
    )


def test_estimate_command_on_a_locomo_file(tmp_path, capsys):
    conv = {
        "speaker_a": "Tom",
        "speaker_b": "Priya",
        "session_1_date_time": "9:15 am on 4 March, 2024",
        "session_1": [
            {"speaker": t["speaker"], "dia_id": f"D1:{i}", "text": t["text"]} for i, t in enumerate(demo_turns()[:6], 1)
        ],
    }
    data = [
        {
            "sample_id": "s1",
            "conversation": conv,
            "qa": [
                {"question": "What did Tom adopt?", "answer": "a beagle", "category": 4},
                {"question": "Trick?", "category": 5},
            ],
        }
    ]
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(data))
    assert main([str(path), "--sample", "s1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["_questions"] == {"n": 1, "turns": 6} and out["fact"]["requests"] == 6
    assert main([str(path), "--sample", "nope"]) == 2
