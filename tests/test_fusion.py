from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.address.dense import similarities, top
from memcompile_langgraph.config import DEFAULT_CONFIG, MemCompileConfig
from memcompile_langgraph.evidence.frontier import admit, complement_order
from memcompile_langgraph.evidence.fusion import fused_pool, neighbor_support, zscore
from memcompile_langgraph.index.user import UserIndex, packet_lexical_document
from memcompile_langgraph.index.vectors import PacketVectors
from memcompile_langgraph.model import DenseHit, Descriptor, Intent, PacketScore, SourcePacket
from memcompile_langgraph.text.terms import terms


def make_packet(text, speaker, dia_id, session, packet_id, seq):
    return SourcePacket(
        packet_id, "u", dia_id, speaker, session, f"session_{session}", None, "", text, seq, content_hash=packet_id
    )


def claim_of(p):
    return Descriptor(
        f"{p.packet_id}:0",
        p.packet_id,
        p.text,
        p.dia_id,
        p.speaker,
        p.session,
        None,
        (p.speaker,),
        (),
        "",
        "",
        5,
        p.seq,
    )


def test_zscore_and_constant_input():
    z = zscore(np.array([1.0, 2.0, 3.0]))
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    assert not zscore(np.array([2.0, 2.0])).any()


def test_neighbor_support_stays_inside_a_session_and_ignores_negatives():
    x = np.array([1.0, -2.0, 3.0, 4.0])
    sessions = np.array([1, 1, 1, 2])
    out = neighbor_support(x, sessions, prev_w=0.2, next_w=0.1)
    assert out.tolist() == pytest.approx([1.0, -2.0 + 0.2 * 1.0 + 0.1 * 3.0, 3.0, 4.0])


def test_packet_vectors_grow_overwrite_and_rank():
    pv = PacketVectors(dim=2)
    pv.set(["a", "b"], [[1, 0], [0, 1]])
    pv.set([], [])
    for i in range(300):  # growth keeps earlier rows
        pv.set([f"x{i}"], [[0.1, 0.1]])
    pv.set(["b"], [[0.6, 0.8]])
    hits = top(pv, np.array([0.0, 1.0]), 2)
    assert hits[0].packet_id == "b" and hits[0].similarity == pytest.approx(0.8)
    assert similarities(pv, np.array([0.0, 1.0]))[pv.row["a"]] == 0
    assert len(pv) == 302


def test_complement_order_puts_what_anchors_miss_first():
    order = complement_order(
        ["a1", "a2"], ["a1", "a2", "d1", "d2", "d3"], {"a1": 9, "a2": 8, "d1": 1, "d2": 5, "d3": 3}
    )
    assert order == ["d2", "d3", "d1", "a1", "a2"]
    assert admit(["a1", "a2"], order, 5, 2) == ["a1", "a2", "d2", "d3"]


def _index(packets):
    index = UserIndex("u", MemCompileConfig())
    for p in packets:
        index.add_packet(p)
        d = claim_of(p)
        index.layout.place(d)
        index.register([d])
        index.index_packet_text([p.packet_id])
    return index


def test_packet_documents_carry_adjacent_turns_incrementally():
    ps = [
        make_packet("Where did you move from?", speaker="Mel", dia_id="D1:1", session=1, packet_id="p1", seq=0),
        make_packet("Sweden, four years ago.", speaker="Caro", dia_id="D1:2", session=1, packet_id="p2", seq=1),
        make_packet("New session here.", speaker="Mel", dia_id="D2:1", session=2, packet_id="p3", seq=2),
    ] + [
        make_packet(f"filler {i}", speaker="X", dia_id=f"D{i}:1", session=i, packet_id=f"f{i}", seq=i)
        for i in range(3, 9)
    ]
    index = _index(ps)
    scores = index.packet_bm25.scores(terms("Sweden"))
    assert scores[0] > 0 and scores[1] > 0 and scores[2] == 0  # the question turn now holds its answer's words
    assert index.packet_bm25.scores(terms("move"))[1] > 0  # the reply holds the question's words
    rebuilt = [packet_lexical_document(ps[0], index.by_packet["p1"], None, ps[1])]
    assert set(terms("Sweden four years")) <= set(rebuilt[0])


def test_fused_pool_keeps_budget_address_fields_and_distinct_packets():
    cfg = MemCompileConfig(pool_budget=3, pool_proposals=2)
    ps = [
        make_packet(f"turn {i}", speaker="A", dia_id=f"D1:{i}", session=1, packet_id=f"p{i}", seq=i) for i in range(6)
    ]
    index = _index(ps)
    address = [PacketScore("p0", 1.0, "p0:0", 0, 2.0, ("c1",))]
    fused = np.array([0.1, 0.9, 0.2, 0.8, 0.0, 0.5])
    pool = fused_pool(address, [DenseHit("p5", 0.7), DenseHit("missing", 0.9)], fused, index, cfg)
    assert [p.packet_id for p in pool] == ["p1", "p3", "p5"]
    full = fused_pool(address, [], fused, index, MemCompileConfig(pool_budget=10, pool_proposals=10))
    p0 = next(p for p in full if p.packet_id == "p0")
    assert p0.support == 2.0 and p0.cells == ("c1",) and p0.score == pytest.approx(0.1)
    assert len({p.packet_id for p in full}) == len(full) == 6


def test_top_positions_equals_a_stable_full_sort():
    from memcompile_langgraph.evidence.fusion import top_positions

    rng = np.random.default_rng(3)
    for n, k in [(1000, 60), (50, 60), (10, 0), (200, 200)]:
        x = rng.integers(0, 20, n).astype(float)  # many ties
        assert top_positions(x, k).tolist() == np.argsort(-x, kind="stable")[:k].tolist()


@given(
    st.lists(st.sampled_from(["Ann", "Bo", "assistant", "Zoë"]), max_size=30),
    st.lists(st.sampled_from(["Ann", "Bo", "Zed", "Zoë"]), max_size=3),
)
def test_speaker_mask_marks_exactly_the_packets_of_the_named_speakers(speakers, names):
    index = UserIndex("u", DEFAULT_CONFIG)
    for i, s in enumerate(speakers):
        index.add_packet(make_packet("hi", s, f"D1:{i}", 1, f"p{i}", i))
    assert index.speaker_mask(names).tolist() == [float(s in names) for s in speakers]
    fork = index.fork()
    fork.add_packet(make_packet("hi", "Zed", "D2:1", 2, "pz", 99))  # the codes follow new packets
    assert fork.speaker_mask(names)[-1] == float("Zed" in names)
    assert index.speaker_mask(names).tolist() == [float(s in names) for s in speakers]  # a code it never holds


def _claim(p, k, text):
    return replace(claim_of(p), descriptor_id=f"{p.packet_id}:{k}", claim=text)


def _feedback_index():
    texts = [
        ("c1", ["We went camping by the lake and sat at the campfire.", "My python script needs a decorator."]),
        ("c2", ["Camping again this summer, marshmallows over the campfire.", "The decorator pattern in python."]),
        ("c3", ["Nothing beats a campfire on a cold night."]),  # holds the term but no query term: no evidence
        ("c4", ["Our camping gear is in the garage."]),
    ] + [(f"f{i}", [f"filler talk number {i} about the weather."]) for i in range(8)]
    index = UserIndex("u", MemCompileConfig())
    for seq, (pid, claims) in enumerate(texts):
        p = make_packet(" ".join(claims), speaker="A", dia_id=f"D{seq}:1", session=seq, packet_id=pid, seq=seq)
        index.add_packet(p)
        ds = [_claim(p, k, c) for k, c in enumerate(claims)]
        for d in ds:
            index.layout.place(d)
        index.register(ds)
        index.index_packet_text([pid])
    return index


def test_feedback_terms_come_from_query_matching_claims_shared_by_two_best_packets():
    from memcompile_langgraph.evidence.fusion import feedback_terms

    index = _feedback_index()
    top = np.array([index.packet_position[p] for p in ("c1", "c2", "c3")])
    got = feedback_terms(index, top, set(terms("camping")), 5)
    assert got[0] == terms("campfire")[0]  # in the matching claims of c1 and c2
    assert not set(got) & set(terms("python decorator"))  # the packets' other claims bring nothing
    assert terms("lake")[0] not in got and terms("camping")[0] not in got  # one packet only; the query's own term
    assert feedback_terms(index, top, set(terms("camping")), 0) == []
    assert feedback_terms(index, top[:1], set(terms("camping")), 5) == []  # one packet shares nothing


def test_feedback_raises_a_packet_that_holds_the_shared_term_but_not_the_query():
    from memcompile_langgraph.evidence.fusion import fused_scores

    index = _feedback_index()
    intent = Intent(query="camping", terms=tuple(terms("camping")))
    cfg = MemCompileConfig(feedback_min_packets=1)
    with_fb = fused_scores(index, intent, [], [], cfg)
    without = fused_scores(index, intent, [], [], cfg.with_overrides(fusion_feedback=0.0))
    c3, c4 = index.packet_position["c3"], index.packet_position["c4"]
    assert with_fb[c3] > without[c3] and with_fb[c3] - without[c3] > with_fb[c4] - without[c4]
    assert with_fb[c3] == pytest.approx(
        without[c3] + cfg.fusion_feedback * zscore(index.packet_bm25.scores(terms("campfire")))[c3]
    )
    none = Intent(query="marshmallows", terms=tuple(terms("marshmallows")))  # one packet matches: nothing shared
    assert (
        fused_scores(index, none, [], [], cfg).tolist()
        == fused_scores(index, none, [], [], cfg.with_overrides(fusion_feedback=0.0)).tolist()
    )


def test_a_memory_smaller_than_feedback_min_packets_gets_no_feedback():
    from memcompile_langgraph.evidence.fusion import fused_scores

    index = _feedback_index()
    intent = Intent(query="camping", terms=tuple(terms("camping")))
    small = MemCompileConfig(feedback_min_packets=len(index.packet_order) + 1)
    assert (
        fused_scores(index, intent, [], [], small).tolist()
        == fused_scores(index, intent, [], [], small.with_overrides(fusion_feedback=0.0)).tolist()
        != fused_scores(
            index, intent, [], [], small.with_overrides(feedback_min_packets=len(index.packet_order))
        ).tolist()
    )


def test_feedback_terms_of_equal_weight_come_in_term_order():
    from memcompile_langgraph.evidence.fusion import feedback_terms

    index = UserIndex("u", MemCompileConfig())
    for seq, text in enumerate(["camping with a tent and a stove", "camping: stove and tent packed", "other words"]):
        p = make_packet(text, speaker="A", dia_id=f"D{seq}:1", session=seq, packet_id=f"p{seq}", seq=seq)
        index.add_packet(p)
        d = claim_of(p)
        index.layout.place(d)
        index.register([d])
        index.index_packet_text([p.packet_id])
    got = feedback_terms(index, np.array([0, 1, 2]), set(terms("camping")), 5)
    assert got == sorted(terms("tent stove"))  # same packets, same idf: the order cannot depend on set iteration


@pytest.mark.parametrize(
    "text, asks",
    [
        ("What is the name of my dog?", True),
        ("Hey Mel! How was the trip? Did you swim?", True),
        ("My dog is called Rex. What is yours called?", False),  # it states something too
        ("Can you fix this? Here is the code: x = 1", False),
        ("So, what is your dog called?", True),
        # states first, asks at the end: the statement is evidence
        ("I've completed 10 problems and scored 8 of 10, can you help me with harder ones?", False),
        # a long question sets out a problem of its own
        (
            "Can you help me with this: if a triangle has sides 5, 5 and 7 and one angle of 90 degrees, is it isosceles?",
            False,
        ),
        ("Great, thanks.", False),
        ("", False),
    ],
)
def test_only_asks_is_a_turn_whose_sentences_are_questions(text, asks):
    from memcompile_langgraph.text.terms import only_asks

    assert only_asks(text) is asks


def _dog_index():
    texts = [
        ("User", "What is the name of my dog?"),
        ("Assistant", "I do not know yet."),
        ("User", "My dog is called Rex and his name came from a film."),
        ("Assistant", "Rex is a good name."),
        *(("User", f"Filler turn number {i} about the weather.") for i in range(6)),
    ]
    return _index(  # one session per turn: no turn gains its neighbour's words
        [
            make_packet(t, speaker=s, dia_id=f"D{i}:1", session=i, packet_id=f"p{i}", seq=i)
            for i, (s, t) in enumerate(texts)
        ]
    )


def test_a_turn_that_only_asks_loses_fusion_asking_and_is_no_longer_first():
    from memcompile_langgraph.evidence.fusion import fused_scores

    index = _dog_index()
    assert index.asking_array().tolist() == [1.0] + [0.0] * 9
    intent = Intent(query="What is the name of my dog?", terms=tuple(terms("What is the name of my dog?")))
    cfg = MemCompileConfig(fusion_addressed=0.0, fusion_asking=0.0)
    off = fused_scores(index, intent, [], [], cfg)
    on = fused_scores(index, intent, [], [], cfg.with_overrides(fusion_asking=2.0))
    assert int(np.argmax(off)) == 0  # the earlier question shares every word of the new one
    assert on - off == pytest.approx([-2.0] + [0.0] * 9)
    assert int(np.argmax(on)) == 2  # the turn that states the name


def test_asking_array_grows_with_new_packets_and_a_fork_keeps_its_own():
    index = _dog_index()
    before = index.asking_array()
    fork = index.fork()
    p = make_packet("Where does Rex sleep?", speaker="User", dia_id="D99:1", session=99, packet_id="p99", seq=99)
    fork.add_packet(p)
    assert fork.asking_array().tolist() == [1.0] + [0.0] * 9 + [1.0]
    assert index.asking_array().tolist() == before.tolist() == [1.0] + [0.0] * 9


def test_recency_raises_later_turns_linearly():
    from memcompile_langgraph.evidence.fusion import fused_scores

    index = _dog_index()
    intent = Intent(query="dog", terms=tuple(terms("dog")))
    off = fused_scores(index, intent, [], [], MemCompileConfig())
    on = fused_scores(index, intent, [], [], MemCompileConfig(fusion_recency=0.6))
    assert on - off == pytest.approx([0.6 * i / 9 for i in range(10)])
