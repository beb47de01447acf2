"""Offline prompt-token estimate of every LLM stage for one conversation file (App. E, Table 8).

No model is called: the stage request builders run over the real turns and questions, with the offline engine
standing in for the model's outputs (heuristic claims feed the metadata requests; the deterministic scheduler's
pool, anchors and dense window feed the scheduler requests). Tokens are counted with text.count_tokens (words
and punctuation marks; tiktoken's encodings are not available offline) and, as a second estimate, characters / 4.

    python -m memcompile_langgraph.eval.estimate locomo10.json --sample conv-26
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

from ..index.user import UserIndex
from ..ingest.build import turn_windows
from ..llm.calls import Request
from ..llm.prompts import answer_request, fact_request, intent_request, label_request, metadata_request
from ..text.terms import count_tokens


def _measure(totals: dict, stage: str, req: Request) -> None:
    text = req.system + req.user
    t = totals[stage]
    t["requests"] += 1
    t["prompt_tokens"] += count_tokens(text)
    t["prompt_chars_div4"] += len(text) // 4


def estimate(mem: Any, user_id: str, questions: list[str]) -> dict[str, dict[str, float]]:
    """Requests and token counts per stage for a user already ingested in `mem` (offline components)."""
    cfg = mem.config
    index = mem.index(user_id)
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(int))
    packets = [index.packets[p] for p in index.packet_order]
    windows, _ = turn_windows(packets, UserIndex(user_id, cfg), cfg)  # each turn with its real preceding turn
    for turn_window in windows:
        claims = [d.claim for d in index.by_packet[turn_window.packet.packet_id]]
        _measure(totals, "fact", fact_request(turn_window))
        for claim in claims:
            _measure(totals, "metadata", metadata_request(claim, turn_window))
    for q in questions:
        state = mem.query_graph.invoke({"query": q}, context=mem.context(user_id))
        pool = [index.packets[p.packet_id] for p in state["pool"]]
        totals["schedule"]["pool_packets"] += len(pool)
        _measure(totals, "intent", intent_request(q))
        if pool:
            k = min(cfg.k0, len(pool))
            _measure(totals, "schedule", label_request("schedule", q, pool, k, cfg.llm_candidate_max_chars)[0])
        window = list(dict.fromkeys([*state.get("anchors", []), *(h.packet_id for h in state.get("dense", []))]))
        totals["frontier"]["window_packets"] += len(window)
        if len(window) > len(state.get("anchors", [])):
            k = min(cfg.frontier_rank_cutoff, len(window))
            _measure(
                totals,
                "frontier",
                label_request("frontier", q, [index.packets[p] for p in window], k, cfg.llm_candidate_max_chars)[0],
            )
        _measure(totals, "answer", answer_request(q, state.get("context", ""), state["intent"].temporal))
    return {stage: dict(v) for stage, v in totals.items()}


def main(argv: list[str] | None = None) -> int:
    from ..ingest.loaders import load_file
    from ..memory import MemCompile

    ap = argparse.ArgumentParser(
        prog="python -m memcompile_langgraph.eval.estimate", description=__doc__.splitlines()[0]
    )
    ap.add_argument("file")
    ap.add_argument("--sample", required=True, help="sample_id of the conversation, e.g. conv-26")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    conv = next((c for c in load_file(args.file) if c.user_id == args.sample), None)
    if conv is None:
        print(f"estimate: no sample {args.sample!r} in {args.file}", file=sys.stderr)
        return 2
    questions = [q["question"] for q in conv.qa if q.get("category") != 5 and isinstance(q.get("question"), str)]
    mem = MemCompile(None)
    mem.add_turns(conv.turns, user_id=args.sample)
    out = estimate(mem, args.sample, questions)
    out["_questions"] = {"n": len(questions), "turns": len(conv.turns)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    n = max(1, len(questions))
    print(f"{args.sample}: {len(conv.turns)} turns, {len(questions)} questions (category 5 excluded)")
    print(f"{'stage':<10}{'requests':>9}{'prompt tok':>12}{'chars/4':>10}{'prompt/q':>10}")
    for stage in ("fact", "metadata", "intent", "schedule", "frontier", "answer"):
        t = out.get(stage, {})
        print(
            f"{stage:<10}{t.get('requests', 0):>9}{t.get('prompt_tokens', 0):>12}{t.get('prompt_chars_div4', 0):>10}"
            f"{t.get('prompt_tokens', 0) / n:>10.0f}"
        )
    print(
        f"mean scheduler pool {out.get('schedule', {}).get('pool_packets', 0) / n:.1f} packets, "
        f"frontier window {out.get('frontier', {}).get('window_packets', 0) / n:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
