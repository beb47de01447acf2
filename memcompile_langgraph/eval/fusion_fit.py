"""`memcompile eval ... --folds K --fit-fusion OUT.json`: the fusion weights fitted under cross-validation.

For each fold, a model is fitted on the other folds' questions only (their candidates and gold, collected with the
configured setting) and scored on the held fold's questions; the report sets those held-out figures beside the
configured setting's, fold by fold. The file written is the model fitted on every dialogue, with its manifest."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..evidence.fusion import fused_scores, weights_of
from ..evidence.fusion_model import Example, example, fit_weights, save_model
from ..evidence.normalize import normalize
from ..evidence.reader import FEATURES as READER_FEATURES
from ..evidence.reader import features as reader_features
from ..evidence.reader import fit_reader, save_reader
from .crossval import Record, make_folds
from .dataset import Dialogue, Question
from .question import evaluate_question
from .runner import EvalRun, builder_name, store_path

T = TypeVar("T")
ReaderExample = tuple[np.ndarray, np.ndarray, np.ndarray]  # fused scores, features, gold flags of one question
READER_L2 = 0.01  # pull of the reader's residual weights towards zero (today's ranking)
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
READER_KEYS = ["intent", "candidates", "pool", "dense", "query_vectors"]


def _collect(run: EvalRun, keys: list[str], make: Callable[[Any, dict[str, Any], Question], T]) -> dict[str, list[T]]:
    """Dialogue -> make(index, query state, question) for each question with gold, under the configured setting."""
    out: dict[str, list[T]] = {}
    for d in run.bench.dialogues:
        mem = _open(run, d, run.opts.config)
        try:
            index = mem.index(d.user_id)
            found = []
            for q in _scored(d):
                state = mem.query_graph.invoke({"query": q.question}, context=mem.context(d.user_id), output_keys=keys)
                found.append(make(index, state, q))
            out[d.user_id] = found
        finally:
            mem.close()
    return out


def collect_examples(run: EvalRun) -> dict[str, list[Example]]:
    """Dialogue -> one example per question with gold: the packets the configured setting's closed pool and dense
    channel offered it (what a fused score can reorder), with their signals."""
    cfg = run.opts.config

    def make(index: Any, state: dict[str, Any], q: Question) -> Example:
        address = normalize(state.get("candidates", []), index.layout.of_descriptor)
        vectors = state.get("query_vectors", [])
        return example(index, state["intent"], address, vectors, list(state.get("fused", {})), set(q.gold), cfg)

    return _collect(run, EXAMPLE_KEYS, make)


def collect_reader_examples(run: EvalRun) -> dict[str, list[ReaderExample]]:
    """Dialogue -> per question with gold, what the pool reader reads of its closed pool and D_q under the
    configured setting: their fused scores, features and gold flags."""
    cfg = run.opts.config

    def make(index: Any, state: dict[str, Any], q: Question) -> ReaderExample:
        intent, dense = state["intent"], state.get("dense", [])
        address = normalize(state.get("candidates", []), index.layout.of_descriptor)
        signals: dict[str, np.ndarray] = {}
        fused = fused_scores(index, intent, address, state.get("query_vectors", []), cfg, keep=signals)
        pool = [p.packet_id for p in state.get("pool", [])]
        window = list(dict.fromkeys(pool + [h.packet_id for h in dense if h.packet_id in index.packet_position]))
        x = reader_features(index, intent, window, fused, address, dense, signals, cfg)
        gold = np.array([index.packets[p].dia_id in set(q.gold) for p in window], dtype=bool)
        return fused[[index.packet_position[p] for p in window]], x, gold

    return _collect(run, READER_KEYS, make)


def fold_weights(
    examples: dict[str, list[Example]], folds: Sequence[Sequence[str]], prior: dict[str, float]
) -> list[dict[str, Any]]:
    """Per fold, the weights fitted on the examples of the dialogues outside it (and how many questions those were)."""
    out = []
    for i, held in enumerate(folds):
        training = [e for name, found in examples.items() if name not in held for e in found]
        out.append({"fold": i + 1, "weights": fit_weights(training, prior, L2), "questions": len(training)})
    return out


def held_out_records(run: EvalRun, folds: Sequence[Sequence[str]], configs: Sequence[Any]) -> list[Record]:
    """Every question's light record, each fold's dialogues under its own config (fitted without them)."""
    dialogues = {d.user_id: d for d in run.bench.dialogues}
    records: list[Record] = []
    for held, cfg in zip(folds, configs):
        for name in held:
            d = dialogues[name]
            mem = _open(run, d, cfg)
            try:
                for q in d.questions:
                    record, _ = evaluate_question(mem, q, run.opts.view, run.count_tokens, light=True)
                    records.append(record)
            finally:
                mem.close()
    return records


def fit_fusion(run: EvalRun, out: str | Path) -> dict[str, Any]:
    """Fit within folds (held-out records for the report), then on every dialogue (the file written)."""
    names = [d.user_id for d in run.bench.dialogues]
    folds = make_folds(names, run.opts.folds)
    examples = collect_examples(run)
    per_fold = fold_weights(examples, folds, weights_of(run.opts.config))
    records = held_out_records(run, folds, [run.opts.config.with_overrides(**f["weights"]) for f in per_fold])
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


class ReaderExamples:
    """One benchmark's reader examples by dialogue, with its folds (an --fit-reader run's OUT-examples.npz)."""

    def __init__(self, benchmark: str, examples: dict[str, list[ReaderExample]], folds: list[list[str]]):
        self.benchmark, self.examples, self.folds = benchmark, examples, folds

    def outside(self, held: Sequence[str] | None) -> list[ReaderExample]:
        return [e for name, found in self.examples.items() if held is None or name not in held for e in found]

    def save(self, path: Path) -> Path:
        flat = [(name, e) for name, found in self.examples.items() for e in found]
        np.savez_compressed(
            path,
            fused=np.concatenate([e[0] for _, e in flat]) if flat else np.zeros(0),
            features=np.concatenate([e[1] for _, e in flat]) if flat else np.zeros((0, len(READER_FEATURES))),
            gold=np.concatenate([e[2] for _, e in flat]) if flat else np.zeros(0, bool),
            sizes=np.array([len(e[2]) for _, e in flat], dtype=np.int64),
            dialogue=np.array([name for name, _ in flat]),
            meta=np.array(json.dumps({"benchmark": self.benchmark, "folds": self.folds, "features": READER_FEATURES})),
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> ReaderExamples:
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                if meta.get("features") != list(READER_FEATURES):
                    raise ValueError("made with other reader features")
                cuts = np.cumsum(z["sizes"])[:-1]
                parts = zip(
                    z["dialogue"].tolist(),
                    np.split(z["fused"], cuts),
                    np.split(z["features"], cuts),
                    np.split(z["gold"], cuts),
                )
                examples: dict[str, list[ReaderExample]] = {}
                for name, f, x, g in parts:
                    examples.setdefault(name, []).append((f, x, g))
        except (OSError, KeyError, ValueError, TypeError, AttributeError, zipfile.BadZipFile) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"reader examples {path}: unreadable ({first})") from None
        return cls(str(meta["benchmark"]), examples, meta["folds"])


def _joint_fit(sets: Sequence[tuple[ReaderExamples, Sequence[str] | None]]) -> tuple[Any, int]:
    """The reader fitted on each set's examples outside its held dialogues, every question weighing the same."""
    examples = [e for found, held in sets for e in found.outside(held)]
    return fit_reader(examples, READER_L2), len(examples)


def fit_pool_reader(run: EvalRun, out: str | Path, others: Sequence[ReaderExamples] = ()) -> dict[str, Any]:
    """The pool reader fitted within folds (each fold's file beside OUT, its held-out records for the report), then
    on every dialogue (OUT); its examples are kept in OUT-examples.npz. `others`: other benchmarks' examples. With as
    many folds, fold i of each (by its own folds) is held out with this run's fold i, as `memcompile eval joint` pairs
    folds: a reader fitted on both dev sets never reads a held fold of either. With another count (leave one chat out,
    say) no fold of theirs pairs with this run's, so each fold's reader reads them whole: they hold none of this run's
    dialogues."""
    names = [d.user_id for d in run.bench.dialogues]
    folds = make_folds(names, run.opts.folds)
    mine = ReaderExamples(run.bench.name, collect_reader_examples(run), folds)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    mine.save(target.with_name(f"{target.stem}-examples.npz"))
    per_fold, configs = [], []
    for i, held in enumerate(folds):
        sets = [(mine, held), *((o, o.folds[i] if len(o.folds) == len(folds) else None) for o in others)]
        reader, count = _joint_fit(sets)
        path = save_reader(
            target.with_name(f"{target.stem}-fold{i + 1}{target.suffix}"), reader, _reader_manifest(sets, count)
        )
        per_fold.append({"fold": i + 1, "file": str(path), "questions": count})
        configs.append(run.opts.config.with_overrides(pool_reader=str(path)))
    records = held_out_records(run, folds, configs)
    every = [(mine, None), *((o, None) for o in others)]
    reader, count = _joint_fit(every)
    path = save_reader(target, reader, _reader_manifest(every, count))
    weights = {f: round(float(w), 6) for f, w in zip(READER_FEATURES, reader.weights)}
    return {"file": str(path), "weights": weights, "per_fold": per_fold, "records": records}


def _reader_manifest(sets: Sequence[tuple[ReaderExamples, Sequence[str] | None]], questions: int) -> dict[str, Any]:
    """What a reader was fitted on: every set with the dialogues it gave (two sets of one benchmark, BEAM 100K and
    500K, may share dialogue names, so each set lists its own)."""
    fitted = [
        {"benchmark": found.benchmark, "dialogues": [n for n in found.examples if held is None or n not in held]}
        for found, held in sets
    ]
    return {
        "fitted_on": {"sets": fitted, "questions": questions},
        "objective": "listwise softmax log-likelihood of the gold packets among the closed pool and D_q, "
        "every question weighing the same",
        "score": "fused score + standardized features x weights",
        "l2": READER_L2,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
