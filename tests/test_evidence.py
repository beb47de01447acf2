from memcompile_langgraph.evidence.frontier import admit, frontier_window, fusion_order
from memcompile_langgraph.evidence.normalize import normalize
from memcompile_langgraph.model import Candidate, DenseHit


def cand(did, pid, score, pos):
    return Candidate(did, pid, score, 0.0, ("bm25",), pos)


def test_normalize_collapses_to_max_and_orders_by_score_position_id():
    cands = [
        cand("a1", "A", 3.0, 0),
        cand("b1", "B", 3.0, 1),
        cand("a2", "A", 2.0, 2),
        cand("c1", "C", 1.0, 3),
        cand("a3", "A", 3.0, 4),
    ]
    pool = normalize(cands)
    assert [p.packet_id for p in pool] == ["A", "B", "C"]
    assert pool[0].representative == "a1"  # tie at 3.0 keeps the earliest candidate
    assert pool[0].support == 8.0
    assert len({p.packet_id for p in pool}) == len(pool)


def test_normalize_ties_break_on_first_position_then_packet_id():
    pool = normalize([cand("x", "Z", 1.0, 0), cand("y", "Y", 1.0, 1)])
    assert [p.packet_id for p in pool] == ["Z", "Y"]
    pool = normalize([cand("y", "B", 1.0, 0), cand("x", "A", 1.0, 0)])
    assert [p.packet_id for p in pool][0] == "B"  # given order is the candidate order


def test_admit_keeps_anchors_and_bounds_additions():
    anchors = [f"a{i}" for i in range(10)]
    order = ["n1", "a0", "n2", "n3", "a1", "n4"]
    assert admit(anchors, order, 5, 2) == anchors + ["n1", "n2"]
    assert admit(anchors, order, 2, 2) == anchors + ["n1"]  # only the first K_R positions are eligible
    assert admit(anchors, order, 5, 0) == anchors
    assert admit(anchors, ["a3", "a4", "a5", "a6", "a7", "n1"], 5, 2) == anchors  # n1 is at position 6


def test_window_and_fusion_order():
    anchors = ["a", "b"]
    dense = [DenseHit("c", 0.9), DenseHit("a", 0.8), DenseHit("d", 0.7)]
    window = frontier_window(anchors, dense)
    assert window == ["a", "b", "c", "d"]
    order = fusion_order(anchors, dense, window)
    assert order[0] == "a" and set(order) == set(window)
