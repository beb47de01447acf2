"""A fitted evidence fusion: the weights of evidence/fusion.py's signals learned from questions with known evidence,
instead of set by hand (`memcompile eval ... --folds K --fit-fusion OUT.json` fits one; `fusion_model` in the config
points at it).

The model is the fused score itself: base signals (BM25, passage, address and dense z-scores), neighbour support
from the adjacent turns' base sum, bonuses (asking, recency, temporal, speaker, addressed) and the feedback pass,
each with its weight. Fitting is a listwise ranker: per question, a softmax over the packets its closed pool and
dense channel offered, maximizing the log-probability of its gold packets, with an L2 pull towards the hand-set
weights (with few questions the fit stays near them). Numpy only; the file is a small JSON with a manifest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import MemCompileConfig
from ..index.user import UserIndex
from ..model import Intent, PacketScore
from .fusion import (
    BASE_SIGNALS,
    BONUS_SIGNALS,
    FUSION_WEIGHTS,
    combine,
    feedback_signal,
    fusion_signals,
    weights_of,
)

FORMAT = "memcompile-fusion-model"
VERSION = 1


class FusionModelError(ValueError):
    """A fusion model file that is missing, unreadable or not of this format (the message is one line)."""


def _fail(path: str | Path, why: str, what: str = "fusion model") -> FusionModelError:
    return FusionModelError(f"{what} {path}: {why}")


def read_model_file(path: str | Path, fmt: str, version: int, what: str = "fusion model") -> dict[str, Any]:
    """A model file's JSON object, its format and version checked (the message of the error is one line)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _fail(path, "no such file", what) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise _fail(path, f"unreadable ({type(exc).__name__}: {first})", what) from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise _fail(path, f"not a {fmt} file", what)
    if data.get("version") != version:
        raise _fail(path, f"version {data.get('version')!r}, this code reads version {version}", what)
    return data


def _finite(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer beyond any float
        return False


def finite_numbers(path: str | Path, values: Mapping[str, Any], name: str, what: str = "fusion model") -> None:
    """Every value a finite number (the model file's `name`s)."""
    bad = [k for k, v in values.items() if not _finite(v)]
    if bad:
        raise _fail(path, f"{name} {bad[0]} is not a finite number", what)


def load_weights(path: str | Path) -> dict[str, float]:
    """The weights of a fusion model file, its schema checked: format, version, exactly the fusion weights, finite."""
    data = read_model_file(path, FORMAT, VERSION)
    weights, manifest = data.get("weights"), data.get("manifest")
    if not isinstance(manifest, dict) or manifest.get("features") != list(FUSION_WEIGHTS):
        raise _fail(path, "the manifest does not list this code's features")
    if not isinstance(weights, dict) or set(weights) != set(FUSION_WEIGHTS):
        raise _fail(path, f"weights must name exactly {', '.join(FUSION_WEIGHTS)}")
    finite_numbers(path, weights, "weight")
    return {k: float(weights[k]) for k in FUSION_WEIGHTS}


def with_fusion_model(cfg: MemCompileConfig) -> MemCompileConfig:
    """The config with its fusion_model's weights in the fusion fields (unchanged without a model file)."""
    return cfg.with_overrides(**load_weights(cfg.fusion_model)) if cfg.fusion_model else cfg


def save_model(path: str | Path, weights: Mapping[str, float], manifest: Mapping[str, Any]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "format": FORMAT,
        "version": VERSION,
        "weights": {k: round(float(weights[k]), 6) for k in FUSION_WEIGHTS},
        "manifest": {**manifest, "features": list(FUSION_WEIGHTS)},
    }
    out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return out


@dataclass(frozen=True)
class Example:
    """One question's candidates: base signals of each packet and of its previous / next turn in the session (zeros
    at a session's edge), bonus signals, the feedback signal, and which packets are gold."""

    base: np.ndarray  # (m, len(BASE_SIGNALS))
    previous: np.ndarray
    following: np.ndarray
    bonus: np.ndarray  # (m, len(BONUS_SIGNALS))
    feedback: np.ndarray  # (m,)
    gold: np.ndarray  # (m,) bool


def _columns(signals: Mapping[str, np.ndarray], names: Sequence[str], n: int) -> np.ndarray:
    return np.stack([signals.get(name, np.zeros(n)) for name in names], axis=1) if n else np.zeros((0, len(names)))


def example(
    index: UserIndex,
    intent: Intent,
    address: list[PacketScore],
    query_vectors: Sequence[Sequence[float]],
    candidates: Sequence[str],
    gold: set[str],
    cfg: MemCompileConfig,
) -> Example:
    """The signals of these candidate packets for one question (the feedback pass as `cfg`'s weights rank)."""
    n = len(index.packet_order)
    signals = fusion_signals(index, intent, address, query_vectors, cfg, every=True)
    sessions = index.session_array()
    fb = feedback_signal(index, intent, combine(signals, weights_of(cfg), sessions), cfg)
    base, bonus = _columns(signals, BASE_SIGNALS, n), _columns(signals, BONUS_SIGNALS, n)
    rows = np.array([index.packet_position[p] for p in candidates], dtype=np.int64)
    prev_ok = (rows > 0) & (sessions[np.maximum(rows - 1, 0)] == sessions[rows])
    next_ok = (rows < n - 1) & (sessions[np.minimum(rows + 1, n - 1)] == sessions[rows])
    return Example(
        base=base[rows],
        previous=np.where(prev_ok[:, None], base[np.maximum(rows - 1, 0)], 0.0),
        following=np.where(next_ok[:, None], base[np.minimum(rows + 1, n - 1)], 0.0),
        bonus=bonus[rows],
        feedback=fb[rows] if fb is not None else np.zeros(len(rows)),
        gold=np.array([index.packets[p].dia_id in gold for p in candidates], dtype=bool),
    )


def _unpack(w: np.ndarray) -> tuple[np.ndarray, float, float, np.ndarray, float]:
    nb = len(BASE_SIGNALS)
    return w[:nb], float(w[nb]), float(w[nb + 1]), w[nb + 2 : nb + 2 + len(BONUS_SIGNALS)], float(w[-1])


def example_scores(ex: Example, weights: Mapping[str, float]) -> np.ndarray:
    """The fused score (evidence/fusion.py) of the example's candidates under these weights."""
    w = np.array([weights[k] for k in FUSION_WEIGHTS])
    wb, wp, wn, wo, wf = _unpack(w)
    return (
        ex.base @ wb
        + wp * np.maximum(ex.previous @ wb, 0.0)
        + wn * np.maximum(ex.following @ wb, 0.0)
        + ex.bonus @ wo
        + wf * ex.feedback
    )


def segment_softmax(s: np.ndarray, starts: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Softmax of s within each question's run of candidates (`starts` of the runs, `segment` of each entry)."""
    s = s - np.maximum.reduceat(s, starts)[segment]
    e = np.exp(s)
    return e / np.add.reduceat(e, starts)[segment]


def listwise_target(golds: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, segment, target) of questions' candidate runs laid end to end: the target distribution gives each
    question's gold candidates its weight in equal shares, and every question the same weight."""
    sizes = np.array([len(g) for g in golds])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    segment = np.repeat(np.arange(len(golds)), sizes)
    target = np.concatenate([g / g.sum() for g in golds]) / len(golds)
    return starts, segment, target


def adam(gradient: Callable[[np.ndarray], np.ndarray], w0: np.ndarray, steps: int, rate: float) -> np.ndarray:
    """Full-batch Adam from w0 (deterministic: no sampling)."""
    w, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for t in range(1, steps + 1):
        grad = gradient(w)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w = w - rate * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w


def fit_weights(
    examples: Sequence[Example], prior: Mapping[str, float], l2: float = 0.05, steps: int = 400, rate: float = 0.03
) -> dict[str, float]:
    """Weights maximizing the mean over questions of the mean log-softmax probability of each gold candidate,
    minus l2 * |w - prior|^2 (Adam, full batch, deterministic). Questions without a gold candidate teach nothing."""
    used = [e for e in examples if e.gold.any() and len(e.gold) > 1]
    w0 = np.array([prior[k] for k in FUSION_WEIGHTS], dtype=np.float64)
    if not used:
        return dict(prior)
    base = np.concatenate([e.base for e in used])
    prev = np.concatenate([e.previous for e in used])
    foll = np.concatenate([e.following for e in used])
    bonus = np.concatenate([e.bonus for e in used])
    fb = np.concatenate([e.feedback for e in used])
    starts, segment, target = listwise_target([e.gold for e in used])
    per_question = 1.0 / len(used)

    def gradient(w: np.ndarray) -> np.ndarray:
        wb, wp, wn, wo, wf = _unpack(w)
        up, un = prev @ wb, foll @ wb
        s = base @ wb + wp * np.maximum(up, 0.0) + wn * np.maximum(un, 0.0) + bonus @ wo + wf * fb
        ds = segment_softmax(s, starts, segment) * per_question - target  # d(-loglik)/ds
        return np.concatenate(
            [
                ds @ base + wp * (ds * (up > 0)) @ prev + wn * (ds * (un > 0)) @ foll,
                [ds @ np.maximum(up, 0.0), ds @ np.maximum(un, 0.0)],
                ds @ bonus,
                [ds @ fb],
            ]
        ) + 2 * l2 * (w - w0)

    w = adam(gradient, w0, steps, rate)
    return {k: float(x) for k, x in zip(FUSION_WEIGHTS, w)}


__all__ = [
    "Example",
    "FusionModelError",
    "example",
    "example_scores",
    "fit_weights",
    "load_weights",
    "save_model",
    "with_fusion_model",
]
