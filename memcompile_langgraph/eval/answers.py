"""The model path of a run: answer over the compiled context, judge it, score token F1 and BLEU-1 (Sec. 4.1).

Calls go through the store's LLM client, so they are cached and land in its usage ledger per stage (Table 8);
a resumed run answers from the cache without paying twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .dataset import Question
from .metrics import bleu1, token_f1

if TYPE_CHECKING:
    from ..memory import MemCompile


class AnswerStage:
    def __init__(self, answer_model: Any, judge_model: Any):
        self.answer_model = answer_model
        self.judge_model = judge_model

    def __call__(self, mem: MemCompile, q: Question, state: dict[str, Any]) -> dict[str, Any]:
        from ..llm.answer import UNKNOWN, generate_answer, judge_answer

        context = state.get("context", "")
        temporal = bool(getattr(state.get("intent"), "temporal", False))
        if context:
            generated = generate_answer(
                mem.llm_client(self.answer_model, user_id=q.dialogue), q.question, context, temporal
            )
        else:
            generated = UNKNOWN  # nothing compiled: no request, as MemCompile.answer does
        correct = judge_answer(mem.llm_client(self.judge_model, user_id=q.dialogue), q.question, q.answer, generated)
        return {
            "generated": generated,
            "judge": bool(correct),
            "f1": token_f1(generated, q.answer),
            "bleu1": bleu1(generated, q.answer),
        }
