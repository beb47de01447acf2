"""A second-stage reader of the closed pool (engineering, not in the paper): a small ranker fitted on the stage
signals, run on the pool only.

The fused score ranks every packet of the memory by one weighted sum; the reader re-scores the few packets it let
through (the closed pool and D_q, about a hundred) with what only exists there: where each packet stands in the
fused and dense orders, whether the address plane found it and with what support, how much of the question its
claims hold, how its neighbours and its session fare within the pool, beside the fused signals themselves. Its score
is the fused score plus a linear residual over those features (standardized), so a model of zero weights is today's
ranking. It is fitted on questions with known evidence (`memcompile eval ... --folds K --fit-reader OUT.json`: a
listwise softmax over each question's candidates, numpy only) and read from the file `pool_reader` names: by
default the one fitted on the dev sets that ships with the package; with None the fused order stands.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..address.bm25 import BM25Index
from ..address.candidates import lexical_query
from ..config import MemCompileConfig
from ..index.user import UserIndex
from ..model import DenseHit, Intent, PacketScore
from ..text.terms import terms
from .fusion import BASE_SIGNALS, BONUS_SIGNALS
from .fusion_model import (
    FusionModelError,
    adam,
    finite_numbers,
    listwise_target,
    read_model_file,
    segment_softmax,
)
from .spread import spans_history

log = logging.getLogger(__name__)
# the reader fitted on the three dev sets together (LoCoMo, BEAM 100K and 500K; docs/cross-validation.md), shipped
# beside this module: `pool_reader="shipped"`, the default
SHIPPED = "shipped"
SHIPPED_FILE = Path(__file__).with_name("pool_reader.json")
FORMAT = "memcompile-pool-reader"
VERSION = 1
WHAT = "pool reader"
OWN_FEATURES = (
    "fused",  # z of the fused score within the candidates
    "fused_rank",  # 1 / log2(2 + rank) in fused order
    "dense_rank",  # the same in D_q's order, 0 outside it
    "address",  # found by the address plane (in U_q)
    "support",  # log(1 + its address support)
    *BASE_SIGNALS,
    *BONUS_SIGNALS,
    "query_cover",  # share of the question's terms among the packet's claim terms
    "keyword_cover",  # share of the intent's keyword terms among them
    "claim_cover",  # the best single claim's share of the question's terms
    "neighbour",  # the better fused z of the turns before and after it in its session
    "session_share",  # share of the candidates from its session
    "claims",  # log(1 + its claims)
    "assistant",  # said by the assistant
    "other_named",  # the question names people and its speaker is none of them (fusion_speaker: one of them)
    "session_position",  # where it stands in its session, 0 its first turn and 1 its last
    "channels",  # how many of the address plane, Cell routing and D_q found it
    "novelty",  # share of its claim terms' weight that no earlier claim held: where something was brought up
)
# A question about the whole history (evidence/spread.py) reads every feature again with weights of its own: the turns
# where the user brought a topic up are not found by what finds one fact. Zero for other questions.
FEATURES = (*OWN_FEATURES, *(f"history_{f}" for f in OWN_FEATURES))


@dataclass(frozen=True)
class PoolReader:
    """Standardization (mean, scale per feature) and the residual weights of the reader's score."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    def scores(self, fused: np.ndarray, x: np.ndarray) -> np.ndarray:
        return fused + ((x - self.mean) / self.scale) @ self.weights


def _cover(wanted: set[str], have: set[str]) -> float:
    return len(wanted & have) / len(wanted) if wanted else 0.0


def _novelty(bm25: BM25Index, own: set[int], held: set[str]) -> float:
    """The share of a packet's claim terms (`held`), weighted by idf, that first appear in its own claims (`own`, their
    BM25 documents); 0 in a memory too small for BM25's idf to weigh terms (every weight 0 or below)."""
    weights = {t: max(bm25.idf(t), 0.0) for t in held}
    total = math.fsum(weights.values())
    return math.fsum(w for t, w in weights.items() if bm25.first_document(t) in own) / total if total else 0.0


def features(
    index: UserIndex,
    intent: Intent,
    candidates: Sequence[str],
    fused: np.ndarray,
    address: Sequence[PacketScore],
    dense: Sequence[DenseHit],
    signals: Mapping[str, np.ndarray],
    cfg: MemCompileConfig,
) -> np.ndarray:
    """(len(candidates), len(FEATURES)): the reader's features of these packets (fused: the score of every packet of
    the index, aligned with packet_order; signals: evidence/fusion.py's, every one that applies)."""
    m = len(candidates)
    pos = np.array([index.packet_position[p] for p in candidates], dtype=np.int64)
    own = fused[pos]
    mu, sd = float(own.mean()) if m else 0.0, float(own.std()) if m else 0.0
    z = (own - mu) / sd if sd > 0 else np.zeros(m)
    order = np.argsort(-own, kind="stable")
    rank = np.empty(m)
    rank[order] = np.arange(m)
    dense_at = {h.packet_id: i for i, h in enumerate(dense)}
    found = {p.packet_id: p for p in address}
    query = set(lexical_query(intent))
    keywords = {t for k in intent.keywords for t in terms(k)}
    sessions = index.session_array()
    n = len(index.packet_order)
    share: dict[int, int] = {}
    for i in pos:
        share[int(sessions[i])] = share.get(int(sessions[i]), 0) + 1
    members = {s: np.flatnonzero(sessions == s) for s in share}  # each candidate session's turns, in storage order
    named = {t for person in intent.people for t in terms(person)}
    rows = []
    for j, pid in enumerate(candidates):
        i = int(pos[j])
        at = [index.position[d.descriptor_id] for d in index.by_packet[pid]]  # its claims' BM25 documents
        claims = [set(index.claim_terms[k]) for k in at]
        held = set().union(*claims) if claims else set()
        around = [k for k in (i - 1, i + 1) if 0 <= k < n and sessions[k] == sessions[i]]
        near = max(((fused[k] - mu) / sd for k in around), default=0.0) if sd > 0 else 0.0
        hit = found.get(pid)
        speaker = set(terms(index.packets[pid].speaker))
        turns = members[int(sessions[i])]
        rows.append(
            [
                z[j],
                1.0 / math.log2(2 + rank[j]),
                1.0 / math.log2(2 + dense_at[pid]) if pid in dense_at else 0.0,
                float(hit is not None),
                math.log1p(hit.support) if hit else 0.0,
                *(float(signals[s][i]) if s in signals else 0.0 for s in (*BASE_SIGNALS, *BONUS_SIGNALS)),
                _cover(query, held),
                _cover(keywords, held),
                max((_cover(query, c) for c in claims), default=0.0),
                near,
                share[int(sessions[i])] / m,
                math.log1p(len(claims)),
                float(index.packets[pid].speaker == cfg.assistant_speaker),
                float(bool(named) and not speaker & named),
                int(np.searchsorted(turns, i)) / (len(turns) - 1) if len(turns) > 1 else 0.0,
                float(hit is not None) + float(bool(hit and hit.cells)) + float(pid in dense_at),
                _novelty(index.bm25, set(at), held),
            ]
        )
    plain = np.array(rows, dtype=np.float64).reshape(m, len(OWN_FEATURES))
    return np.hstack([plain, plain if spans_history(intent.query) else np.zeros_like(plain)])


def read(
    reader: PoolReader,
    index: UserIndex,
    intent: Intent,
    pool: list[PacketScore],
    dense: Sequence[DenseHit],
    fused: np.ndarray,
    address: Sequence[PacketScore],
    signals: Mapping[str, np.ndarray],
    cfg: MemCompileConfig,
) -> tuple[list[PacketScore], dict[str, float]]:
    """The pool in the reader's order with its scores, and the score of every packet of the pool and D_q."""
    hits = [h.packet_id for h in dense if h.packet_id in index.packet_position]
    window = list(dict.fromkeys([p.packet_id for p in pool] + hits))
    if not window:
        return pool, {}
    x = features(index, intent, window, fused, address, dense, signals, cfg)
    own = fused[[index.packet_position[p] for p in window]]
    scores = dict(zip(window, map(float, reader.scores(own, x))))
    rank = {p.packet_id: i for i, p in enumerate(pool)}
    ordered = sorted(pool, key=lambda p: (-scores[p.packet_id], rank[p.packet_id]))
    return [
        PacketScore(p.packet_id, scores[p.packet_id], p.representative, p.first_position, p.support, p.cells)
        for p in ordered
    ], scores


def fit_reader(
    examples: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    l2: float,
    shares: Sequence[float] | None = None,
    steps: int = 300,
    rate: float = 0.05,
) -> PoolReader:
    """The reader maximizing the weighted mean over questions of the log-softmax probability of their gold
    candidates (examples: per question its candidates' fused scores, features and gold flags; shares: each
    question's weight, equal by default), minus l2 * |w|^2: standardized on these examples, Adam from zero weights
    (today's ranking), deterministic. The softmax has a fitted temperature of its own, so the weights learn the order
    and not how sharp the fused score is. Questions without a gold candidate among several teach nothing; with none
    at all the reader is today's ranking."""
    keep = [i for i, e in enumerate(examples) if e[2].any() and len(e[2]) > 1]
    k = len(FEATURES)
    if not keep:
        return PoolReader(np.zeros(k), np.ones(k), np.zeros(k))
    used = [examples[i] for i in keep]
    weight = np.array([shares[i] for i in keep] if shares is not None else [1.0] * len(keep), dtype=np.float64)
    weight = weight / weight.sum()
    fused = np.concatenate([e[0] for e in used])
    x = np.concatenate([e[1] for e in used])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    xs = (x - mean) / scale
    starts, segment, target = listwise_target([e[2] for e in used])
    target = target * len(used) * weight[segment]
    per_entry = weight[segment]

    def gradient(theta: np.ndarray) -> np.ndarray:
        w, sharp = theta[:k], math.exp(theta[k])
        s = fused + xs @ w
        ds = segment_softmax(sharp * s, starts, segment) * per_entry - target  # d(-loglik)/d(sharp * s)
        return np.concatenate([sharp * (ds @ xs) + 2 * l2 * w, [sharp * float(ds @ s)]])

    theta = adam(gradient, np.zeros(k + 1), steps, rate)
    return PoolReader(mean, scale, theta[:k])


def save_reader(path: str | Path, reader: PoolReader, manifest: Mapping[str, Any]) -> Path:
    import json

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    table = {"mean": reader.mean, "scale": reader.scale, "weights": reader.weights}
    data = {
        "format": FORMAT,
        "version": VERSION,
        **{name: {f: round(float(v), 6) for f, v in zip(FEATURES, values)} for name, values in table.items()},
        "manifest": {**manifest, "features": list(FEATURES)},
    }
    out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return out


def load_reader(path: str | Path) -> PoolReader:
    """A pool reader file, its schema checked (FusionModelError, one line, otherwise)."""
    data = read_model_file(path, FORMAT, VERSION, WHAT)
    manifest = data.get("manifest")
    if not isinstance(manifest, dict) or manifest.get("features") != list(FEATURES):
        raise FusionModelError(f"{WHAT} {path}: the manifest does not list this code's features")
    table = []
    for name in ("mean", "scale", "weights"):
        values = data.get(name)
        if not isinstance(values, dict) or set(values) != set(FEATURES):
            raise FusionModelError(f"{WHAT} {path}: {name} must name exactly the manifest's features")
        finite_numbers(path, values, name, WHAT)
        table.append(np.array([float(values[f]) for f in FEATURES]))
    if (table[1] <= 0).any():
        raise FusionModelError(f"{WHAT} {path}: a scale is not positive")
    return PoolReader(*table)


@functools.cache
def _shipped() -> PoolReader:
    """The shipped reader, read once per process: the package's own file does not change under it, and a process
    may open many memories."""
    return load_reader(SHIPPED_FILE)


# A process that opens many memories with one bad file (an eval opens one per dialogue) says so once.
_warned: set[str] = set()


def open_reader(path: str | Path | None) -> PoolReader | None:
    """The reader of this file (SHIPPED: the one fitted on the dev sets, shipped with the package), or None (the
    fused order) without one; a file that does not load is one warning per process and fault."""
    if not path:
        return None
    try:
        return _shipped() if str(path) == SHIPPED else load_reader(path)
    except FusionModelError as exc:
        if str(exc) not in _warned:
            _warned.add(str(exc))
            log.warning("%s: the fused order stands", exc)
        return None


def reader_for(config: MemCompileConfig) -> tuple[PoolReader | None, MemCompileConfig]:
    """The reader `config` names and the config as a memory runs with it: what is left to the reader's loading (the
    session spread) settled for whether it did."""
    reader = open_reader(config.pool_reader)
    return reader, config.with_reader(reader is not None)


__all__ = [
    "FEATURES",
    "SHIPPED",
    "PoolReader",
    "features",
    "fit_reader",
    "load_reader",
    "open_reader",
    "read",
    "reader_for",
    "save_reader",
]
