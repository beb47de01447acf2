"""`memcompile eval locomo|longmemeval FILE`, `memcompile eval beam DIR`: the paper's protocol over a benchmark,
with report and plots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import UsageError
from .core import add_max_tokens_arg
from .llm_args import add_llm_args, build_answer_llm, build_llm
from .profile_args import add_profile_arg, profile_config

# flag -> (MemCompileConfig switch, value, Table 2 setting it stands for)
ABLATION_FLAGS = {
    "no_frontier": ("use_frontier", False, "A1 (with --no-scheduler: A2)"),
    "no_scheduler": ("use_scheduler", False, "A3 (with --no-frontier: A2)"),
    "cells_only": ("use_bm25_candidates", False, "A4"),
    "bm25_only": ("use_cells", False, "A5"),
    "no_intent": ("use_intent", False, "A6"),
    "dense_top10": ("dense_only", True, "A7"),
}


def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def cv_choices(args: argparse.Namespace, config: Any) -> dict[str, dict[str, Any]]:
    """The cross-validation choices --folds runs (none without it)."""
    from ..eval.crossval import choices, parse_space

    if not args.folds:
        if args.space is not None:
            raise UsageError("--space needs --folds K")
        return {}
    try:
        return choices(parse_space(args.space, config), config)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def eval_options(args: argparse.Namespace) -> Any:
    from ..eval.paper import ABLATIONS
    from ..eval.runner import EvalOptions
    from ..store.open import records_url_from

    if args.cells_only and args.bm25_only:
        raise UsageError("--cells-only and --bm25-only exclude each other (Table 2 runs A4 and A5 separately)")
    overrides: dict[str, Any] = {
        switch: value for flag, (switch, value, _) in ABLATION_FLAGS.items() if getattr(args, flag)
    }
    if args.no_fusion:
        overrides["fusion"] = False
    if args.max_tokens is not None:
        overrides["context_max_tokens"] = args.max_tokens
    if args.pool_reader:
        overrides["pool_reader"] = None if args.pool_reader == "none" else args.pool_reader
    elif args.fit_reader:  # a reader is fitted against the fused order, not the shipped reader's
        overrides["pool_reader"] = None
    ablations = list(ABLATIONS)[1:] if args.ablations == "all" else _csv(args.ablations)
    unknown = [a for a in ablations if a not in ABLATIONS]
    if unknown:
        raise UsageError(f"unknown --ablations {', '.join(unknown)} (choose from {', '.join(ABLATIONS)} or 'all')")
    llm = build_llm(args)
    answer = build_answer_llm(args) or llm
    if args.judge_model and answer is None:
        raise UsageError("--judge-model needs an answer model: give --llm-model or --answer-model")
    judge = None
    if args.judge_model:
        from ..llm.models import chat_model

        judge = chat_model(args.judge_model, args.llm_base_url)
    out = Path(args.out)
    config = profile_config(args).with_overrides(**overrides)
    return EvalOptions(
        out=out,
        store=Path(args.store) if args.store else out / "stores",
        config=config,
        view=args.view,
        ablations=tuple(ablations),
        llm=llm,
        answer_llm=answer,
        judge_llm=judge,
        progress=not args.quiet,
        records_url=records_url_from(args.records_url),
        chroma_url=args.chroma_url,
        folds=args.folds,
        choices=cv_choices(args, config),
    )


def summary_lines(report: dict[str, Any]) -> list[str]:
    from ..eval.markdown import mean_sd

    o = report["overall"]
    if not o.get("questions"):
        return ["no question has a result"]
    setting = f"profile {report['config'].get('profile', 'default')}, {report['config']['variant']}"
    lines = [
        f"{setting}: {o['questions']} questions: Gold Recall {100 * o['gold_recall']:.2f}%, full coverage {100 * o['full_coverage']:.2f}%, "
        f"{o['mean_packets']:.2f} packets, {o['mean_context_tokens']:.0f} context tokens, query p50 {o['query_ms_p50']:.0f} ms"
    ]
    if "judge" in o:
        lines.append(
            f"answers: J {100 * o['judge']:.2f}%"
            + (f", F1 {100 * o['f1']:.2f}, BLEU-1 {100 * o['bleu1']:.2f}" if o.get("f1") is not None else "")
        )
    cats = ", ".join(
        f"{c} {100 * f['gold_recall']:.2f}" for c, f in report["by_category"].items() if f.get("questions")
    )
    lines.append(f"by category: {cats}")
    for name, b in report["baselines"].items():
        lines.append(f"baseline {name}: Gold Recall {100 * b['gold_recall']:.2f}%")
    for name, a in report["ablations"].items():
        if name != report["config"]["variant"]:
            lines.append(f"{name} {a['label']}: Gold Recall {100 * a.get('gold_recall', 0):.2f}%")
    cv = report.get("cross_validation")
    if cv:
        fixed, tuned = cv["per_choice"]["default"]["gold_recall"], cv["selected"]["gold_recall"]
        lines.append(
            f"{cv['folds']}-fold CV Gold Recall: default {mean_sd(fixed)}, selected on the other folds "
            f"{mean_sd(tuned)} (chosen: {', '.join(f['selected'] for f in cv['per_fold'])})"
        )
    return lines


def cmd_eval(args: argparse.Namespace) -> int:
    from ..embeddings.minilm import default_embeddings
    from ..eval.beam import load_beam
    from ..eval.locomo import load_locomo
    from ..eval.longmemeval import load_longmemeval
    from ..eval.markdown import render_markdown
    from ..eval.plots import write_plots
    from ..eval.report import build_report, write_report
    from ..eval.runner import EvalRun
    from ..llm.calls import LLMUnavailable

    loader = {"locomo": load_locomo, "longmemeval": load_longmemeval, "beam": load_beam}[args.benchmark]
    bench = loader(args.file, _csv(args.samples))
    if not bench.questions:
        raise UsageError(f"{args.file}: no question to evaluate (left out: {dict(bench.skipped) or 'none'})")
    for flag, wanted in (("--fit-fusion", args.fit_fusion), ("--fit-reader", args.fit_reader)):
        if wanted and not args.folds:
            raise UsageError(f"{flag} needs --folds K (the model is fitted within the folds)")
    if args.folds:  # a fold count these dialogues cannot make is refused before any work
        from ..eval.crossval import make_folds

        try:
            make_folds([d.user_id for d in bench.dialogues], args.folds)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    others = _reader_examples(args)
    opts = eval_options(args)
    if opts.records_url:  # a bad URL or an unreachable server: one line before any work or report file
        from ..store.open import open_records

        open_records(None, opts.records_url).close()
    embeddings = default_embeddings()
    if embeddings is None:
        print(
            "memcompile: no embedding model found: dense channel and dense baseline off (set MEMCOMPILE_MODEL_DIR)",
            file=sys.stderr,
        )
    run = EvalRun(bench, opts, embeddings)
    failure = None
    try:
        run.run()
        if args.fit_fusion:
            from ..eval.fusion_fit import fit_fusion

            run.fitted_fusion = fit_fusion(run, args.fit_fusion)
        if args.fit_reader:
            from ..eval.fusion_fit import fit_pool_reader

            run.fitted_reader = fit_pool_reader(run, args.fit_reader, others)
    except LLMUnavailable as exc:
        failure = exc
    finally:  # interrupted or not, the report covers every finished question
        report = build_report(run, str(args.file))
        write_report(report, opts.out)
        plots = write_plots(report, opts.out)
        (opts.out / "report.md").write_text(render_markdown(report, plots), encoding="utf-8")
    if failure is not None:
        raise UsageError(
            f"{failure}; {report['overall'].get('questions', 0)} results kept in {opts.out}: rerun to resume"
        )
    for line in summary_lines(report):
        print(line)
    print(f"report: {opts.out / 'report.json'}, {opts.out / 'report.md'} ({run.wall_seconds:.1f} s)", file=sys.stderr)
    return 0


def _reader_examples(args: argparse.Namespace) -> list[Any]:
    """The other benchmarks' reader examples --reader-with names, checked before any work."""
    if not args.reader_with:
        return []
    if not args.fit_reader:
        raise UsageError("--reader-with needs --fit-reader")
    from ..eval.fusion_fit import ReaderExamples

    try:
        found = [ReaderExamples.load(p) for p in args.reader_with]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return found


def _cv_section(path: str) -> tuple[str, Path, dict[str, Any]]:
    """(benchmark name, report file, cross_validation section) of an eval output folder or its report.json."""
    import json

    file = Path(path) / "report.json" if Path(path).is_dir() else Path(path)
    try:
        report = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{file}: not a readable eval report ({type(exc).__name__})") from None
    section = report.get("cross_validation") if isinstance(report, dict) else None
    if not isinstance(section, dict):
        raise UsageError(f"{file}: no cross-validation section (run the eval with --folds K)")
    return str(report.get("benchmark") or file.parent.name), file, section


def cmd_joint(args: argparse.Namespace) -> int:
    import json

    from ..eval.crossval import joint_selection
    from ..eval.markdown import joint_lines

    found = [(arg, *_cv_section(arg)) for arg in args.reports]
    if len({file.resolve() for _, _, file, _ in found}) < len(found):
        raise UsageError("the same report is given twice")
    benchmarks = [b for _, b, _, _ in found]
    # a benchmark given twice (BEAM 100K and 500K, say) is named by its report as given too
    sections = {(b if benchmarks.count(b) == 1 else f"{b} ({arg})"): s for arg, b, _, s in found}
    try:
        joint = joint_selection(sections)
    except ValueError as exc:
        raise UsageError(f"cannot join these reports: {exc}") from None
    for line in joint_lines(joint):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(joint, indent=2) + "\n", encoding="utf-8")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate on a benchmark file: Gold Recall, baselines, ablations, report and plots")
    benches = p.add_subparsers(dest="benchmark", required=True)
    for name, help_text, metavar in (
        ("locomo", "a LoCoMo file (locomo10.json format)", "FILE"),
        ("longmemeval", "a LongMemEval(-S) JSON file", "FILE"),
        ("beam", "a folder of BEAM chats (chat.json + probing_questions.json each) or one chat folder", "DIR"),
    ):
        b = benches.add_parser(name, help=help_text)
        b.add_argument("file", metavar=metavar, help="the benchmark file (BEAM: a folder of chats)")
        b.add_argument(
            "--samples",
            default=None,
            metavar="IDS",
            help="comma-separated sample ids (LoCoMo sample_id, LongMemEval question_id, BEAM chat folder name)",
        )
        b.add_argument(
            "--out",
            default="memcompile-eval",
            help="results, report.json, report.md and plots (default: ./memcompile-eval)",
        )
        b.add_argument(
            "--store",
            default=None,
            help="one store per dialogue under this folder, reused when present (default: OUT/stores)",
        )
        b.add_argument(
            "--records-url",
            default=None,
            help="records in PostgreSQL, e.g. postgresql://user@host/db?schema=name: one schema holds every "
            "dialogue (default: $MEMCOMPILE_RECORDS_URL, else SQLite in each dialogue's store)",
        )
        b.add_argument("--chroma-url", default=None, help="vectors in a Chroma server, e.g. http://127.0.0.1:8000")
        b.add_argument(
            "--view", choices=("bundle", "raw", "claim"), default="bundle", help="reader view answered from (Table 4)"
        )
        add_max_tokens_arg(b)
        g = b.add_argument_group("Table 2 ablations of the evaluated setting")
        for flag, (_, _, setting) in ABLATION_FLAGS.items():
            g.add_argument("--" + flag.replace("_", "-"), action="store_true", help=setting)
        g.add_argument(
            "--no-fusion",
            action="store_true",
            help="the paper's pool (complete U_q, Eq. 10 order) and MMR anchors instead of evidence fusion",
        )
        g.add_argument(
            "--pool-reader",
            default=None,
            metavar="FILE",
            help="re-score the closed pool with this fitted pool reader (evidence/reader.py; --fit-reader writes "
            "one), 'shipped' (the default) or 'none' (the fused order)",
        )
        g.add_argument(
            "--ablations",
            default=None,
            metavar="LIST",
            help="also run these settings over the same stores: A1,...,A7 or 'all'",
        )
        cv = b.add_argument_group("cross-validation over dialogues")
        cv.add_argument(
            "--folds",
            type=int,
            default=0,
            metavar="K",
            help="split the dialogues into K folds; each fold is scored with the search-space choice that does best "
            "on the other folds (report: per-fold figures, mean and spread)",
        )
        cv.add_argument(
            "--space",
            default=None,
            metavar="SPEC",
            help="the choices --folds selects among: 'FIELD=V1,V2 FIELD2=V3' (config fields the query reads) or "
            "'none' for the configured setting alone (default: the declared space of eval/crossval.py)",
        )
        cv.add_argument(
            "--fit-fusion",
            default=None,
            metavar="OUT.json",
            help="also fit the fusion weights (evidence/fusion_model.py): within the folds for the report (each "
            "fold scored by a model fitted on the others), then on every dialogue, written to OUT.json",
        )
        cv.add_argument(
            "--fit-reader",
            default=None,
            metavar="OUT.json",
            help="also fit a pool reader (evidence/reader.py) the same way: each fold's model beside OUT.json "
            "(OUT-foldI.json), the fit on every dialogue in OUT.json, its examples in OUT-examples.npz",
        )
        cv.add_argument(
            "--reader-with",
            action="append",
            default=[],
            metavar="EXAMPLES.npz",
            help="fit the reader on another benchmark's examples too (another --fit-reader run's OUT-examples.npz): "
            "with the same fold count its fold I is held out with this run's fold I, with another count every "
            "fold's reader reads it whole (leave one chat out: --folds as many as the chats)",
        )
        add_llm_args(b, answer=True)
        add_profile_arg(b)
        b.add_argument("--judge-model", default=None, metavar="NAME", help="judge model (default: the answer model)")
        b.add_argument("--quiet", action="store_true", help="no progress bars")
        b.set_defaults(func=cmd_eval)
    j = benches.add_parser(
        "joint",
        help="cross-validation over several benchmarks together, from their --folds reports: each fold's choice "
        "is the best on the other folds of all of them",
    )
    j.add_argument("reports", nargs="+", metavar="OUT", help="eval output folders (or their report.json)")
    j.add_argument("--json", default=None, metavar="FILE", help="also write the joint figures to this JSON file")
    j.set_defaults(func=cmd_joint)
