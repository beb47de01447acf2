"""`memcompile eval ... --folds K --fit-fusion OUT.json`: the fusion weights fitted under cross-validation.

For each fold, a model is fitted on the other folds' questions only (their candidates and gold, collected with the
configured setting) and scored on the held fold's questions; the report sets those held-out figures beside the
configured setting's, fold by fold. The file written is the model fitted on every dialogue, with its manifest."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..evidence.fusion import weights_of
from ..evidence.fusion_model import Example, example, fit_weights, save_model
from ..evidence.normalize import normalize
from .crossval import Record, make_folds
from .dataset import Dialogue, Question
from .question import evaluate_question
from .runner import EvalRun, builder_name, store_path

L2 = 0.05  # pull towards the hand-set weights (the fit is on a few hundred questions)


def _open(run: EvalRun, d: Dialogue, config: Any) -> Any:
    from ..memory import MemCompile

    opts = run.opts
    return MemCompile(
        store_path(opts.store, d.user_id, builder_name(opts.llm, opts.config)),
        embeddings=run.embeddings,
        config=config,
        llm=opts.llm,
        records_url=opts.records_url,
        chroma_url=opts.chroma_url,
    )


def _scored(d: Dialogue) -> list[Question]:
    return [q for q in d.questions if q.gold]


# the channels an example is made of; query_vectors is one of the graph's own, not in its output
EXAMPLE_KEYS = ["intent", "candidates", "fused", "query_vectors"]


def collect_examples(run: EvalRun) -> dict[str, list[Example]]:
    """Dialogue -> one example per question with gold: the packets the configured setting's closed pool and dense
    channel offered it (what a fused score can reorder), with their signals."""
    cfg = run.opts.config
    out: dict[str, list[Example]] = {}
    for d in run.bench.dialogues:
        mem = _open(run, d, cfg)
        try:
            index = mem.index(d.user_id)
            found = []
            for q in _scored(d):
                state = mem.query_graph.invoke(
                    {"query": q.question}, context=mem.context(d.user_id), output_keys=EXAMPLE_KEYS
                )
                address = normalize(state.get("candidates", []), index.layout.of_descriptor)
                candidates = list(state.get("fused", {}))
                vectors = state.get("query_vectors", [])
                found.append(example(index, state["intent"], address, vectors, candidates, set(q.gold), cfg))
            out[d.user_id] = found
        finally:
            mem.close()
    return out


def fold_weights(
    examples: dict[str, list[Example]], folds: Sequence[Sequence[str]], prior: dict[str, float]
) -> list[dict[str, Any]]:
    """Per fold, the weights fitted on the examples of the dialogues outside it (and how many questions those were)."""
    out = []
    for i, held in enumerate(folds):
        training = [e for name, found in examples.items() if name not in held for e in found]
        out.append({"fold": i + 1, "weights": fit_weights(training, prior, L2), "questions": len(training)})
    return out


def held_out_records(
    run: EvalRun, examples: dict[str, list[Example]], folds: Sequence[Sequence[str]]
) -> tuple[list[Record], list[dict[str, Any]]]:
    """Every question's light record under the model fitted without its fold, and each fold's weights."""
    cfg, dialogues = run.opts.config, {d.user_id: d for d in run.bench.dialogues}
    records: list[Record] = []
    fitted = fold_weights(examples, folds, weights_of(cfg))
    for held, fold in zip(folds, fitted):
        weights = fold["weights"]
        for name in held:
            d = dialogues[name]
            mem = _open(run, d, cfg.with_overrides(**weights))
            try:
                for q in d.questions:
                    record, _ = evaluate_question(mem, q, run.opts.view, run.count_tokens, light=True)
                    records.append(record)
            finally:
                mem.close()
    return records, fitted


def fit_fusion(run: EvalRun, out: str | Path) -> dict[str, Any]:
    """Fit within folds (held-out records for the report), then on every dialogue (the file written)."""
    names = [d.user_id for d in run.bench.dialogues]
    folds = make_folds(names, run.opts.folds)
    examples = collect_examples(run)
    records, per_fold = held_out_records(run, examples, folds)
    everything = [e for found in examples.values() for e in found]
    weights = fit_weights(everything, weights_of(run.opts.config), L2)
    path = save_model(
        out,
        weights,
        {
            "fitted_on": {
                "benchmark": run.bench.name,
                "dialogues": names,
                "questions": sum(len(_scored(d)) for d in run.bench.dialogues),
            },
            "objective": "listwise softmax log-likelihood of the gold packets among the closed pool and dense hits",
            "prior": "the hand-set weights of the configuration it was fitted under",
            "l2": L2,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
    )
    return {"file": str(path), "weights": weights, "per_fold": per_fold, "records": records}
