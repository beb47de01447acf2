"""Per-question measures: Gold Recall, budget duplication (DBR, App. A.4), token F1 and BLEU-1, token counts."""

from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..text.terms import count_tokens, term_set


def gold_recall(gold: Sequence[str], found: Iterable[str]) -> float:
    """|gold ∩ found| / |gold|; callers leave out questions without gold."""
    gold_set = set(gold)
    return len(gold_set & set(found)) / len(gold_set)


def full_coverage(gold: Sequence[str], found: Iterable[str]) -> bool:
    return set(gold) <= set(found)


def budget_duplication(packet_ids: Sequence[str], k: int) -> tuple[int, int, float]:
    """(slots, unique, DBR) of the first k slots: DBR is the share of slots repeating a packet already present."""
    slots = list(packet_ids[:k])
    unique = len(set(slots))
    return len(slots), unique, (len(slots) - unique) / len(slots) if slots else 0.0


# --- answer metrics: the protocol of the LoCoMo evaluation code the paper's baselines share (Mem0 / A-Mem) ---
_F1_PUNCT = re.compile(r"[.,!?]")
_BLEU_TOKEN = re.compile(r"\w+|[^\w\s]")


def answer_coverage(answer: str, context: str, held: str | None = None) -> float | None:
    """Share of the gold answer's content terms (stemmed, stop words out) the context holds; None without any.
    `held`: count only the answer terms this text holds (the gold turns' own text: what a context can carry)."""
    wanted = term_set(answer) & term_set(held) if held is not None else term_set(answer)
    return len(wanted & term_set(context)) / len(wanted) if wanted else None


def f1_tokens(text: str) -> list[str]:
    """Lower-cased, sentence punctuation (. , ! ?) turned into spaces, split on whitespace."""
    return _F1_PUNCT.sub(" ", str(text).lower()).split()


def token_f1(prediction: str, gold: str) -> float:
    """F1 over the two token *sets* (that protocol's definition)."""
    pred, ref = set(f1_tokens(prediction)), set(f1_tokens(gold))
    common = len(pred & ref)
    if not common:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, gold: str) -> float:
    """Sentence BLEU with unigram weight 1: clipped unigram precision times the brevity penalty.

    Words and punctuation marks are separate tokens (lower-cased). No unigram match scores 0, as in NLTK's
    sentence_bleu with smoothing method 1 and weights (1, 0, 0, 0).
    """
    pred = _BLEU_TOKEN.findall(str(prediction).lower())
    ref = _BLEU_TOKEN.findall(str(gold).lower())
    if not pred or not ref:
        return 0.0
    ref_counts = Counter(ref)
    clipped = sum(min(n, ref_counts[t]) for t, n in Counter(pred).items())
    if not clipped:
        return 0.0
    brevity = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return brevity * clipped / len(pred)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]; 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# --- context tokens ----------------------------------------------------------------------------------------
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _tiktoken_cached() -> bool:
    """Whether tiktoken's cl100k_base file is already in its cache (where tiktoken itself looks), so nothing downloads."""
    cache = (
        os.environ.get("TIKTOKEN_CACHE_DIR")
        or os.environ.get("DATA_GYM_CACHE_DIR")
        or str(Path(tempfile.gettempdir()) / "data-gym-cache")
    )
    return (Path(cache) / hashlib.sha1(_CL100K_URL.encode()).hexdigest()).is_file()


def token_counter() -> tuple[str, Callable[[str], int]]:
    """(name, count): tiktoken cl100k_base when it loads offline, else the package's word-and-punctuation count."""
    if _tiktoken_cached():
        try:
            import tiktoken

            enc = tiktoken.get_encoding("cl100k_base")
            return "tiktoken:cl100k_base", lambda text: len(enc.encode(text, disallowed_special=()))
        except Exception:  # noqa: BLE001 - a broken cache or install means the fallback, never a crash
            pass
    return "memcompile.text.count_tokens (words and punctuation marks)", count_tokens
