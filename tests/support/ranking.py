"""Comparing two rankings of one question that should agree but may differ in the last bits of their scores.

A memory read back from disk (Chroma, a snapshot file) holds its vectors as stored, the live one as the model
returned them: they differ by a few 1e-7, and the int8 model differs more between CPUs. So two rankings agree when
their scores agree within a tolerance and only near-equal scores change places; the rendered text is compared
only when the order came out the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SCORE_TOL = 1e-4  # far above float32 noise (and the 6-decimal rounding of printed scores), far below real gaps


def assert_same_ranking(a: Sequence[tuple[str, float]], b: Sequence[tuple[str, float]], tol: float = SCORE_TOL):
    """(id, score) lists: same scores within tol; a pair ordered differently, or an id in one list only (pushed out
    at the cut-off), only where the scores concerned are within tol."""
    sa, sb = dict(a), dict(b)
    for x in sa.keys() & sb.keys():
        assert abs(sa[x] - sb[x]) <= tol, (x, sa[x], sb[x])
    only_a, only_b = sa.keys() - sb.keys(), sb.keys() - sa.keys()
    for x in only_a:
        assert any(abs(sa[x] - sb[y]) <= tol for y in only_b), f"{x} ({sa[x]}) is missing from {list(b)}"
    for y in only_b:
        assert any(abs(sb[y] - sa[x]) <= tol for x in only_a), f"{y} ({sb[y]}) is missing from {list(a)}"
    pos_b = {x: i for i, (x, _) in enumerate(b)}
    common = [x for x, _ in a if x in pos_b]
    for i, x in enumerate(common):
        for y in common[i + 1 :]:
            if pos_b[x] > pos_b[y]:
                assert abs(sa[x] - sa[y]) <= tol, f"{x} ({sa[x]}) and {y} ({sa[y]}) swapped: {list(a)} vs {list(b)}"


def _ranking(packets: Sequence[Any]) -> list[tuple[str, float]]:
    """(dia_id, score) of SelectedPacket records or of their JSON form (the CLI's --json)."""
    return [(p["dia_id"], p["score"]) if isinstance(p, dict) else (p.dia_id, p.score) for p in packets]


def assert_same_context(a_packets: Sequence[Any], a_text: str, b_packets: Sequence[Any], b_text: str) -> None:
    """Two compiled contexts (their packets and text): the same ranking up to ties, and the same text whenever the
    packets came out in the same order."""
    ranking_a, ranking_b = _ranking(a_packets), _ranking(b_packets)
    assert_same_ranking(ranking_a, ranking_b)
    if [x for x, _ in ranking_a] == [x for x, _ in ranking_b]:
        assert a_text == b_text
