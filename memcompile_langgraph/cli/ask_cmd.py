"""`memcompile ask "Q" --store DIR --user U --llm-model M`: compile the memory and print the model's answer."""

from __future__ import annotations

import argparse
import json

from . import UsageError
from .core import add_as_of_arg, add_store_args, open_memory
from .llm_args import add_llm_args
from .profile_args import add_profile_arg


def cmd_ask(args: argparse.Namespace) -> int:
    from ..llm.calls import LLMUnavailable

    if not (args.llm_model or args.answer_model):
        raise UsageError("ask needs a model: give --llm-model (and optionally --answer-model)")
    mem = open_memory(args)
    try:
        answer, ctx = mem.answer(args.query, user_id=args.user, as_of=args.as_of)
    except LLMUnavailable as exc:
        raise UsageError(str(exc)) from exc
    finally:
        mem.close()
    if args.json:
        print(json.dumps({"answer": answer, "packets": ctx.dia_ids}, indent=2))
    else:
        print(answer)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="answer a question from memory with an LLM")
    p.add_argument("query", help="the question")
    add_store_args(p)
    add_llm_args(p, answer=True)
    add_profile_arg(p)
    add_as_of_arg(p)
    p.add_argument("--json", action="store_true", help="answer and the dia_ids of the evidence packets")
    p.set_defaults(func=cmd_ask)
