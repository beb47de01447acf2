"""Cross-validation over dialogues (`memcompile eval ... --folds K`).

The dialogues are split into K folds; on each fold, the choice (a point of a small declared search space of
query-time settings) with the best Gold Recall on the other K-1 folds' questions is scored on the held fold's. Every
choice runs once over every question (one results file each, over the same stores), so a fold only regroups
records: selection is a lookup, and adding folds costs nothing. The default's own per-fold figures show how much a
fixed setting varies between conversations; the selected choice's show what tuning on the dev set is worth on
conversations it was not tuned on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from statistics import fmean, stdev
from typing import Any

from ..config import MemCompileConfig
from .metrics import gold_recall

DEFAULT_CHOICE = "default"
# The declared search space: per query-time config field, the values tried besides the configured one. A choice
# changes one field, so the space stays small (each choice is one pass over the questions) and a selected choice
# reads as one decision. Only fields the query plane reads belong here: the stores are built once, with the
# configured setting.
SEARCH_SPACE: dict[str, tuple[Any, ...]] = {
    "fusion_feedback": (0.0, 0.35),
    "dense_top": (40,),
    "spread_depth": (60,),
    "fusion_addressed": (1.5,),
    "fusion_temporal": (0.0, 0.6),
    "fusion_speaker": (0.75,),
    "fusion_asking": (0.0, 0.5),
    "fusion_recency": (0.3, 1.0),
}

Record = dict[str, Any]


def parse_space(spec: str | None, config: MemCompileConfig) -> dict[str, tuple[Any, ...]]:
    """`field=v1,v2 field2=v3` (None: the declared space, "none": no alternative, only the default's figures);
    values take the field's type."""
    if spec is None:
        return dict(SEARCH_SPACE)
    if spec.strip().lower() == "none":
        return {}
    known = config.to_dict()
    out: dict[str, tuple[Any, ...]] = {}
    for part in spec.split():
        name, sep, values = part.partition("=")
        if not sep or name not in known or name == "profile":
            raise ValueError(f"bad search axis {part!r}: write FIELD=V1,V2 with a MemCompileConfig field")
        kind = type(known[name])
        if kind is bool:
            convert: Callable[[str], Any] = lambda v: v.lower() in ("1", "true", "yes", "on")  # noqa: E731
        elif known[name] is None:
            convert = int
        else:
            convert = kind
        try:
            out[name] = tuple(convert(v) for v in values.split(",") if v)
        except ValueError as exc:
            raise ValueError(f"bad value in search axis {part!r}: {exc}") from None
    return out


def choices(space: Mapping[str, Sequence[Any]], config: MemCompileConfig) -> dict[str, dict[str, Any]]:
    """name -> config overrides: the configured setting first (named "default"), then one choice per value of each
    axis that differs from the configured one."""
    out: dict[str, dict[str, Any]] = {DEFAULT_CHOICE: {}}
    for name, values in space.items():
        for v in values:
            if v != getattr(config, name):
                out[f"{name}={v}"] = {name: v}
    return out


def make_folds(dialogues: Sequence[str], k: int) -> list[list[str]]:
    """K folds of whole dialogues, dealt in file order (deterministic, sizes differ by at most one)."""
    names = list(dict.fromkeys(dialogues))
    if not 2 <= k <= len(names):
        raise ValueError(f"--folds {k}: needs 2 to {len(names)} folds for {len(names)} dialogues")
    return [names[i::k] for i in range(k)]


def _recall(records: Sequence[Record]) -> float | None:
    scored = [gold_recall(r["gold"], r["selected"]) for r in records if r["gold"]]
    return fmean(scored) if scored else None


def _update_selected(records: Sequence[Record]) -> float | None:
    """Knowledge updates: the share whose updated (gold) statement is among the selected packets."""
    updates = [r for r in records if r["gold"] and r.get("replaced")]
    return fmean(float(bool(set(r["gold"]) & set(r["selected"]))) for r in updates) if updates else None


def select_choice(by_choice: Mapping[str, Sequence[Record]], dialogues: set[str]) -> str:
    """The choice with the best Gold Recall over these dialogues' questions; ties keep the earlier (the default)."""
    best, best_score = DEFAULT_CHOICE, -math.inf
    for name, records in by_choice.items():
        score = _recall([r for r in records if r["dialogue"] in dialogues])
        if score is not None and score > best_score + 1e-12:
            best, best_score = name, score
    return best


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean, sample standard deviation, min and max of the per-fold figures that exist."""
    xs = [v for v in values if v is not None]
    if not xs:
        return {"mean": None, "sd": None, "min": None, "max": None, "folds": 0}
    return {
        "mean": round(fmean(xs), 6),
        "sd": round(stdev(xs), 6) if len(xs) > 1 else 0.0,
        "min": round(min(xs), 6),
        "max": round(max(xs), 6),
        "folds": len(xs),
    }


def _group(records: Sequence[Record], categories: Sequence[str]) -> dict[str, Any]:
    """Gold Recall overall and per category (None where the group has no question with gold)."""
    cats = list(categories) + sorted({r["category"] for r in records} - set(categories))
    return {
        "questions": len(records),
        "gold_recall": _recall(records),
        "update_selected": _update_selected(records),
        "by_category": {c: _recall([r for r in records if r["category"] == c]) for c in cats},
    }


def _summary(per_fold: Sequence[dict[str, Any]], pooled: Sequence[Record], categories: Sequence[str]) -> dict:
    """Fold figures as mean/spread, beside the held-out records pooled into one figure (every question once)."""
    whole = _group(pooled, categories)
    return {
        "gold_recall": {**spread([f["gold_recall"] for f in per_fold]), "pooled": whole["gold_recall"]},
        "update_selected": {**spread([f["update_selected"] for f in per_fold]), "pooled": whole["update_selected"]},
        "by_category": {
            c: {**spread([f["by_category"].get(c) for f in per_fold]), "pooled": whole["by_category"][c]}
            for c in whole["by_category"]
        },
    }


def cross_validate(
    by_choice: Mapping[str, Sequence[Record]],
    dialogues: Sequence[str],
    k: int,
    categories: Sequence[str] = (),
    fitted: Mapping[str, Sequence[Record]] | None = None,
) -> dict[str, Any]:
    """The CV section of report.json from every choice's records (all over the same questions; `by_choice` starts
    with the default). The selection for a fold only reads records of dialogues outside it. `fitted`: settings
    fitted within the folds (each fold's records made by what was fitted without it), reported fold by fold beside
    the choices but never selected."""
    folds = make_folds(dialogues, k)
    everyone = set(dialogues)
    per_fold, held_records = [], []
    reported = {**by_choice, **(fitted or {})}
    fixed: dict[str, list[dict[str, Any]]] = {name: [] for name in reported}
    for i, held in enumerate(folds):
        inside = set(held)
        training = everyone - inside
        chosen = select_choice(by_choice, training)
        mine = [r for r in by_choice[chosen] if r["dialogue"] in inside]
        held_records += mine
        per_fold.append({"fold": i + 1, "dialogues": held, "selected": chosen, **_group(mine, categories)})
        for name, records in reported.items():
            fixed[name].append(_group([r for r in records if r["dialogue"] in inside], categories))
    default = fixed[DEFAULT_CHOICE]
    per_choice = {}
    for name, groups in fixed.items():
        pooled = [r for r in reported[name] if r["dialogue"] in everyone]
        deltas = [
            g["gold_recall"] - d["gold_recall"]
            for g, d in zip(groups, default)
            if g["gold_recall"] is not None and d["gold_recall"] is not None
        ]
        per_choice[name] = {
            **_summary(groups, pooled, categories),
            "fold_gold_recall": [g["gold_recall"] for g in groups],
            "delta_vs_default": spread(deltas),
            "folds_better": sum(d > 1e-12 for d in deltas),
            "folds_worse": sum(d < -1e-12 for d in deltas),
        }
    all_dev = select_choice(by_choice, everyone)
    return {
        "folds": k,
        "metric": "gold_recall",
        "choices": list(by_choice),
        "fold_dialogues": folds,
        "per_fold": per_fold,
        "selected": _summary(per_fold, held_records, categories),
        "per_choice": per_choice,
        "all_dev": {
            "selected": all_dev,
            "gold_recall": per_choice[all_dev]["gold_recall"]["pooled"],
            "default_gold_recall": per_choice[DEFAULT_CHOICE]["gold_recall"]["pooled"],
        },
    }


def _check_section(name: str, s: Any) -> None:
    """A report's cross_validation section as joint_selection reads it (a report is input: it may be anything)."""
    k = s.get("folds") if isinstance(s, Mapping) else None
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise ValueError(f"{name}: no fold count of at least 2")
    choices, per_choice = s.get("choices"), s.get("per_choice")
    if not isinstance(choices, list) or not isinstance(per_choice, Mapping) or DEFAULT_CHOICE not in choices:
        raise ValueError(f"{name}: no list of choices with the default")
    for c in choices:
        figures = per_choice.get(c) if isinstance(c, str) else None
        folds = figures.get("fold_gold_recall") if isinstance(figures, Mapping) else None
        if not isinstance(folds, list) or len(folds) != k:
            raise ValueError(f"{name}: choice {c!r} has no figure per fold")
        if not all(
            x is None or (isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x <= 1) for x in folds
        ):
            raise ValueError(f"{name}: choice {c!r} has a fold figure that is not a recall")
        if all(x is None for x in folds):
            raise ValueError(f"{name}: choice {c!r} has no scored fold")


def joint_selection(sections: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Cross-validation over several benchmarks together (`memcompile eval joint`): benchmark name -> the
    `cross_validation` section of its report, all with the same fold count. Fold i of the joint run holds fold i of
    every benchmark out; its choice is the one with the best mean, over benchmarks, of the benchmark's mean Gold
    Recall on its other folds (each benchmark weighs the same, whatever its size), and it is scored on every
    benchmark's held fold. Only choices every benchmark ran compete. A default chosen this way has to hold on all the
    benchmarks' conversations it was not chosen on."""
    if not sections:
        raise ValueError("no cross-validation report to join")
    for name, s in sections.items():
        _check_section(name, s)
    counts = {name: s["folds"] for name, s in sections.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(
            f"the reports have different fold counts ({', '.join(f'{n}: {k}' for n, k in counts.items())})"
        )
    k = next(iter(counts.values()))
    common = [c for c in next(iter(sections.values()))["choices"] if all(c in s["choices"] for s in sections.values())]
    figures = {  # benchmark -> choice -> per-fold Gold Recall
        name: {c: s["per_choice"][c]["fold_gold_recall"] for c in common} for name, s in sections.items()
    }

    def score(choice: str, folds: Sequence[int]) -> float:
        means = [[x for i in folds if (x := f[choice][i]) is not None] for f in figures.values()]
        return fmean(fmean(m) for m in means if m) if any(means) else -math.inf

    per_fold = []
    for i in range(k):
        training = [j for j in range(k) if j != i]
        chosen = max(common, key=lambda c: (score(c, training), c == DEFAULT_CHOICE))
        per_fold.append({"fold": i + 1, "selected": chosen, **{n: f[chosen][i] for n, f in figures.items()}})
    return {
        "folds": k,
        "benchmarks": list(sections),
        "choices": common,
        "per_fold": per_fold,
        "selected": {n: spread([f[n] for f in per_fold]) for n in sections},
        "per_choice": {c: {n: spread(f[c]) for n, f in figures.items()} for c in common},
    }
