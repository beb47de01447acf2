"""A benchmark run: one store per dialogue (built once, then reused), every question through the query graph,
baselines over the same turns, results appended as they finish so an interrupted run resumes where it stopped."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ..config import MemCompileConfig
from ..evidence.reader import reader_for
from ..model import stable_hash
from ..runtime.engine import embedding_identity
from .answers import AnswerStage
from .baselines import RawTurnBaselines
from .dataset import Benchmark, Dialogue, Question
from .metrics import token_counter
from .paper import ABLATIONS, SWITCHES, setting_run, variant_of
from .question import evaluate_question
from .results import DialogueLog, ResultLog, fingerprint

log = logging.getLogger(__name__)
CHOICE_PREFIX = "cv-"  # variant (and results file) name of a cross-validation choice


@dataclass
class EvalOptions:
    out: Path
    store: Path
    config: MemCompileConfig = field(default_factory=MemCompileConfig)
    view: str = "bundle"
    ablations: tuple[str, ...] = ()  # further Table 2 settings run over the same stores
    llm: Any = None  # chat model of the build and query LLM stages (None: offline components)
    answer_llm: Any = None  # chat model answering (None: no answers, retrieval metrics only)
    judge_llm: Any = None
    progress: bool = True
    records_url: str | None = None  # records in PostgreSQL (None: $MEMCOMPILE_RECORDS_URL, else SQLite per dialogue)
    chroma_url: str | None = None  # vectors in a Chroma server (None: Chroma in each dialogue's directory)
    folds: int = 0  # cross-validation over dialogues (eval/crossval.py); 0 = none
    choices: dict[str, dict[str, Any]] = field(default_factory=dict)  # CV choice -> config overrides of `config`


@dataclass
class Variant:
    name: str
    config: MemCompileConfig
    log: ResultLog
    done: dict[str, dict[str, Any]]

    def todo(self, d: Dialogue) -> list[Question]:
        return [q for q in d.questions if not answers(self.done.get(q.qid), q)]


def answers(record: dict[str, Any] | None, q: Question) -> bool:
    """Whether a finished record is this question's: the same question scored on the same gold. A file edited under
    the same ids, or a loader that reads the gold anew, makes its questions run again."""
    return record is not None and (
        record.get("question"),
        record.get("category"),
        record.get("gold"),
        record.get("replaced"),
        record.get("answer", q.answer),
    ) == (q.question, q.category, list(q.gold), list(q.replaced), q.answer)


def model_name(model: Any) -> str | None:
    if model is None:
        return None
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)


def builder_name(llm: Any, config: MemCompileConfig) -> str | None:
    """What made a store's descriptors and vectors: the model (None offline), marked when factless turns keep no
    descriptor (the paper profile) and when the dense document is not z(p), so two constructions never share a
    store (a store's vectors of another document would be made again, or left out by a read)."""
    name = model_name(llm)
    if not config.factless_claims:
        name = f"{name or 'offline'}-no-factless-claims"
    if config.dense_document != "packet":
        name = f"{name or 'offline'}-{config.dense_document}-document"
    return name


def store_path(root: Path, user_id: str, builder: str | None) -> Path:
    """<store>/<dialogue> for offline builds, <store>/<model>/<dialogue> for LLM-built ones; names kept file-safe."""

    def safe(name: str) -> str:
        clean = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:80]
        return clean if clean == name and clean not in (".", "..") else f"{clean}-{stable_hash(name, length=8)}"

    return root / safe(builder) / safe(user_id) if builder else root / safe(user_id)


class QueryVectors(Embeddings):
    """The embedder of a run whose choices ask the same questions: each query's vectors are made once (by the main
    setting, which runs first and is the one timed) and reused by every choice. It records the vectors it stores as
    the model's own, so a store stays the model's. Batches (a store build, the baselines) pass through."""

    def __init__(self, inner: Embeddings, size: int = 4096):
        self.inner, self.size = inner, size
        self.identity = embedding_identity(inner)
        self._memo: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _vector(self, text: str) -> list[float]:
        with self._lock:
            hit = self._memo.get(text)
            if hit is not None:
                self._memo.move_to_end(text)
                return hit
        vector = self.inner.embed_query(text)
        with self._lock:
            self._memo[text] = vector
            if len(self._memo) > self.size:
                self._memo.popitem(last=False)
        return vector

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(texts) > 2:  # not a query's [e(q+), e(q)]
            return self.inner.embed_documents(texts)
        return [self._vector(t) for t in texts]


class EvalRun:
    def __init__(self, bench: Benchmark, opts: EvalOptions, embeddings: Any):
        if embeddings is not None and len(opts.choices) > 1:
            embeddings = QueryVectors(embeddings)
        self.bench, self.opts, self.embeddings = bench, opts, embeddings
        self.tokenizer, self.count_tokens = token_counter()
        self.answers = (
            AnswerStage(opts.answer_llm, opts.judge_llm or opts.answer_llm) if opts.answer_llm is not None else None
        )
        opts.out.mkdir(parents=True, exist_ok=True)
        self.dialogues = DialogueLog(opts.out / "dialogues.json")
        self.variants = self._variants()
        self.wall_seconds = 0.0
        self.fitted_fusion: dict[str, Any] | None = None  # eval/fusion_fit.py's result under --fit-fusion
        self.fitted_reader: dict[str, Any] | None = None  # and under --fit-reader

    # --- settings --------------------------------------------------------------------------------
    def record_inputs(self, config: MemCompileConfig) -> dict[str, Any]:
        """Everything that changes a record (the results file is named after it)."""
        return {
            "benchmark": self.bench.name,
            "config": config.to_dict(),
            "view": self.opts.view,
            "tokenizer": self.tokenizer,
            # the model's identity, not its class: another model or precision in the same class makes other records
            "embeddings": embedding_identity(getattr(self.embeddings, "inner", self.embeddings)),
            "llm": model_name(self.opts.llm),
            "answer_llm": model_name(self.opts.answer_llm),
            "judge_llm": model_name(self.opts.judge_llm or self.opts.answer_llm),
        }

    def _variants(self) -> list[Variant]:
        main = self.opts.config
        ran = lambda name: setting_run(name, main.offline_frontier, self.opts.llm is not None)  # noqa: E731
        configs = {ran(variant_of({k: getattr(main, k) for k in SWITCHES})): main}
        full_system = {k: k != "dense_only" for k in SWITCHES}  # A0's switches; each setting then sets its own
        for name in self.opts.ablations:
            configs.setdefault(ran(name), main.with_overrides(**{**full_system, **ABLATIONS[name][1]}))
        for name, overrides in self.opts.choices.items():
            if overrides:  # the choice without overrides is the main setting itself
                configs.setdefault(CHOICE_PREFIX + name, main.with_overrides(**overrides))
        out = []
        for name, cfg in configs.items():
            # settled as the memory will run it, so the report and the results file name the spread it uses
            _, cfg = reader_for(cfg)
            results = ResultLog(self.opts.out / f"results-{name}-{fingerprint(self.record_inputs(cfg))}.jsonl")
            out.append(Variant(name, cfg, results, results.load()))
        return out

    @property
    def main(self) -> Variant:
        return self.variants[0]

    def choice_records(self) -> dict[str, list[dict[str, Any]]]:
        """Cross-validation choice -> its finished records, in the order the choices were declared."""
        named = {v.name: v for v in self.variants}
        return {
            name: self.records(named[CHOICE_PREFIX + name] if overrides else self.main)
            for name, overrides in self.opts.choices.items()
        }

    # --- running -----------------------------------------------------------------------------------
    def run(self) -> None:
        started = time.perf_counter()
        remaining = sum(len(v.todo(d)) for d in self.bench.dialogues for v in self.variants)
        bar = _bar(remaining, self.opts.progress)
        try:
            for d in self.bench.dialogues:
                self.run_dialogue(d, bar)
        finally:
            for v in self.variants:
                v.log.close()
            if bar is not None:
                bar.close()
            self.wall_seconds = time.perf_counter() - started

    def run_dialogue(self, d: Dialogue, bar: Any) -> None:
        todo = {v.name: v.todo(d) for v in self.variants}
        if not any(todo.values()) and d.user_id in self.dialogues.data:
            return
        from ..memory import MemCompile

        path = store_path(self.opts.store, d.user_id, builder_name(self.opts.llm, self.opts.config))
        for i, v in enumerate(self.variants):
            if i and not todo[v.name]:
                continue
            mem = MemCompile(
                path,
                embeddings=self.embeddings,
                config=v.config,
                llm=self.opts.llm,
                answer_llm=self.opts.answer_llm,
                records_url=self.opts.records_url,
                chroma_url=self.opts.chroma_url,
            )
            try:
                if i == 0:
                    self._build(mem, d, path)
                questions = [q.question for q in todo[v.name]]
                baselines = (
                    RawTurnBaselines(mem.index(d.user_id), self.embeddings).rank(questions)
                    if i == 0 and questions
                    else None
                )
                jobs = [(q, baselines[n] if baselines else None) for n, q in enumerate(todo[v.name])]
                light = v.name.startswith(CHOICE_PREFIX)
                for record in self._map(lambda job: self._question(mem, job[0], job[1], light), jobs):
                    v.log.append(record)
                    if bar is not None:
                        bar.update(1)
                if mem.usage(d.user_id)["stages"]:
                    self.dialogues.update(d.user_id, usage=mem.usage(d.user_id))
            finally:
                mem.close()

    def _build(self, mem: Any, d: Dialogue, path: Path) -> None:
        """Store the dialogue's turns unless the store already holds them (ingest is idempotent per turn)."""
        started = time.perf_counter()
        counts = mem.add_turns(d.turns, user_id=d.user_id, progress=self.opts.progress)
        seconds = round(time.perf_counter() - started, 2)
        stats = mem.stats(d.user_id)
        facts = {k: stats[k] for k in ("packets", "descriptors", "cells", "sessions", "vectors")}
        if counts.get("stored"):
            self.dialogues.update(d.user_id, store=str(path), ingest_seconds=seconds, ingest_counts=counts, **facts)
        else:
            self.dialogues.update(d.user_id, store=str(path), **facts)

    def _question(self, mem: Any, q: Question, baseline: dict[str, list[str]] | None, light: bool) -> dict[str, Any]:
        record, state = evaluate_question(mem, q, self.opts.view, self.count_tokens, baseline, light)
        if self.answers is not None and not light:  # choices are compared on retrieval only
            record.update(self.answers(mem, q, state))
        return record

    def _map(self, fn: Callable[[Any], dict[str, Any]], jobs: list[Any]) -> Iterator[dict[str, Any]]:
        """Offline: in order on this thread. With a model: the configured number of questions in flight."""
        if self.opts.llm is None and self.answers is None:
            yield from (fn(job) for job in jobs)
            return
        with ThreadPoolExecutor(max_workers=max(1, self.opts.config.llm_concurrency)) as pool:
            futures = [pool.submit(fn, job) for job in jobs]
            try:
                for f in as_completed(futures):
                    yield f.result()
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

    # --- results -------------------------------------------------------------------------------------
    def records(self, variant: Variant) -> list[dict[str, Any]]:
        """This benchmark's finished records of a variant, in question order."""
        done = variant.log.load()
        return [done[q.qid] for d in self.bench.dialogues for q in d.questions if answers(done.get(q.qid), q)]


def _bar(total: int, enabled: bool) -> Any:
    if not enabled or not total:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="questions", unit="q")
