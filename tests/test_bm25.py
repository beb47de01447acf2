import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from memcompile_langgraph.address.bm25 import BM25Index
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.index.payload import Reader, Writer
from memcompile_langgraph.index.user import descriptor_terms
from memcompile_langgraph.model import Descriptor
from memcompile_langgraph.text.terms import terms


def _corpus(n, seed=0):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(60)]
    return [[rng.choice(vocab[: rng.randint(5, 60)]) for _ in range(rng.randint(0, 14))] for _ in range(n)]


def test_scores_equal_rank_bm25_reference():
    corpus = _corpus(300)
    ref = BM25Okapi(corpus, k1=1.5, b=0.75, epsilon=0.25)
    idx = BM25Index(1.5, 0.75, 0.25)
    for doc in corpus:
        idx.add(doc)
    rng = random.Random(1)
    for _ in range(50):
        q = [f"w{rng.randint(0, 70)}" for _ in range(rng.randint(1, 6))]
        assert np.allclose(idx.scores(q), ref.get_scores(q), rtol=1e-12, atol=1e-12)


def test_incremental_adds_match_a_rebuild():
    corpus = _corpus(120, seed=3)
    idx = BM25Index()
    for i, doc in enumerate(corpus):
        idx.add(doc)
        if i % 40 == 39:
            ref = BM25Okapi(corpus[: i + 1])
            assert np.allclose(idx.scores(["w1", "w2", "w2"]), ref.get_scores(["w1", "w2", "w2"]))


def test_negative_idf_is_floored_like_bm25okapi():
    corpus = [["common", "a"], ["common", "b"], ["common"], ["x"]]
    idx = BM25Index()
    for d in corpus:
        idx.add(d)
    assert np.allclose(idx.scores(["common"]), BM25Okapi(corpus).get_scores(["common"]))
    assert idx.scores(["common"])[0] > 0


def test_top_orders_by_score_then_corpus_order_and_skips_zero():
    idx = BM25Index()
    for d in [["a"], ["b"], ["a"], ["a", "a"], ["c"]]:
        idx.add(d)
    top = idx.top(["a"], 10)
    assert [doc for doc, _ in top] == [3, 0, 2]
    assert idx.top(["zzz"], 5) == []
    assert len(idx.top(["a"], 2)) == 2


def test_replacing_the_newest_document_equals_a_rebuild_at_every_step():
    """The newest document is open (kept beside the postings): queries between adds and replaces see every
    change, and scores equal rank-bm25 over the current corpus."""
    corpus = _corpus(150, seed=12)
    idx, current = BM25Index(), []
    rng = random.Random(4)
    for doc in corpus:
        if rng.random() < 0.2:
            idx.add_many([doc, doc[::-1]])
            current += [doc, doc[::-1]]
        else:
            idx.add(doc)
            current.append(doc)
        for _ in range(rng.randint(0, 2)):
            new = current[-1][1:] + [f"w{rng.randint(0, 90)}" for _ in range(rng.randint(0, 4))]
            idx.replace_last(new)
            current[-1] = new
        q = [f"w{rng.randint(0, 90)}" for _ in range(3)]
        ref = BM25Okapi(current)
        assert len(idx) == len(current)
        assert np.allclose(idx.scores(q), ref.get_scores(q), rtol=1e-12, atol=1e-12)


def test_a_fork_replacing_its_newest_document_leaves_the_published_one_unchanged():
    corpus = _corpus(80, seed=5)
    published = BM25Index()
    published.add_many(corpus)
    before = {t: published.scores([t]) for t in ("w1", "w7", "w40")}
    fork = published.fork()
    fork.replace_last(corpus[-1] + ["w1", "w7"])
    fork.add_many([["w40", "w1"], ["w7"]])
    for t, scores in before.items():
        assert np.array_equal(published.scores([t]), scores)
    assert len(published) == 80 and len(fork) == 82
    final = corpus[:-1] + [corpus[-1] + ["w1", "w7"], ["w40", "w1"], ["w7"]]
    assert np.allclose(fork.scores(["w1", "w7"]), BM25Okapi(final).get_scores(["w1", "w7"]))


def _file_round_trip(idx: BM25Index) -> BM25Index:
    """The index as a snapshot file holds and gives it back (BM25Index.encode and decode)."""
    writer = Writer("index")
    idx.encode(writer, "bm25")
    return BM25Index.decode(Reader(writer.payload(), "index"), "bm25", MemCompileConfig(), len(idx))


def test_every_version_of_a_fork_chain_keeps_its_scores_and_equals_rank_bm25():
    """Each version forks the one before (some through a snapshot-file round trip) and shares its vocabulary,
    frequencies and posting lists: no later write may show in an earlier version."""
    corpus, rng, q = _corpus(150, seed=21), random.Random(8), ["w1", "w7", "w40", "w55", "w70"]
    idx, current, versions = BM25Index(), [], []
    for i, doc in enumerate(corpus):
        if i % 10 == 9:
            versions.append((idx, list(current), idx.scores(q)))
            idx = (_file_round_trip(idx) if i % 30 == 29 else idx).fork()
        idx.add(doc + [f"w{60 + i % 20}"])  # new terms keep arriving
        current.append(doc + [f"w{60 + i % 20}"])
        if rng.random() < 0.3:
            current[-1] = current[-1][1:] + [f"w{rng.randint(0, 90)}"]
            idx.replace_last(current[-1])
    versions.append((idx, current, idx.scores(q)))
    for version, corpus_then, scores in versions:
        assert np.array_equal(version.scores(q), scores)
        assert np.allclose(scores, BM25Okapi(corpus_then).get_scores(q), rtol=1e-12, atol=1e-12)


def test_replace_last_on_an_empty_index_is_refused():
    with pytest.raises(IndexError):
        BM25Index().replace_last(["a"])


def test_packet_documents_indexed_in_one_call_equal_one_call_per_packet():
    from memcompile_langgraph.bench.synthetic import generate
    from memcompile_langgraph.memory import MemCompile

    turns = generate(600, seed=8).turns
    mem = MemCompile(None, dense=False)
    for start in (0, 250, 251, 400):  # batches and single turns, sessions cut at batch edges
        mem.add_turns(turns[start : {0: 250, 250: 251, 251: 400, 400: 600}[start]], user_id="u")
    built = mem.index("u")
    one_by_one = built.__class__(built.user_id, built.cfg)
    for pid in built.packet_order:
        one_by_one.add_packet(built.packets[pid])
    for d in built.descriptors:
        one_by_one.layout.place(d, built.layout.of_descriptor[d.descriptor_id])
        one_by_one.register([d])
    for pid in built.packet_order:
        one_by_one.index_packet_text([pid])
    mem.host.cache.drop("u")
    loaded = mem.index("u")  # a reload indexes every packet in one call
    rng = random.Random(2)
    vocab = sorted({t for i in range(len(built.packet_order)) for t in loaded._lexical_document(i, None)})
    for _ in range(40):
        q = rng.sample(vocab, 3) + ["ava"]
        assert np.array_equal(loaded.packet_bm25.scores(q), one_by_one.packet_bm25.scores(q))
        assert np.array_equal(built.packet_bm25.scores(q), one_by_one.packet_bm25.scores(q))
    assert loaded.packet_timed == one_by_one.packet_timed == built.packet_timed


@given(st.text(max_size=60), st.lists(st.text(max_size=15), max_size=5), st.lists(st.text(max_size=15), max_size=3))
def test_descriptor_terms_split_the_document_of_the_joined_fields(claim, keywords, people):
    d = Descriptor("d", "p", claim, "D1:1", "Ann", 1, None, tuple(people), tuple(keywords), "", "", 1, 0)
    claim_terms, key_terms, document = descriptor_terms(d)
    assert document == terms(" ".join([claim, *keywords, *people]))  # App. B.3: one document of all fields
    assert claim_terms == terms(claim) and set(key_terms) == {t for k in keywords for t in terms(k)}


@given(
    st.lists(st.lists(st.sampled_from("abcdefg"), max_size=5), min_size=1, max_size=12),
    st.lists(st.integers(1, 4), max_size=6),
    st.lists(st.sampled_from("abcdefgh"), max_size=5),
    st.booleans(),
)
def test_the_first_document_of_a_term_is_the_earliest_that_holds_it(documents, chunks, last, through_file):
    """However the documents arrive (in chunks, the newest replaced, in a fork, through a snapshot file), a term's
    first document is the earliest of the final documents that holds it, None for a term none holds."""
    idx, start = BM25Index(), 0
    for size in [*chunks, len(documents)]:
        if start < len(documents):
            idx.add_many(documents[start : start + size])
            start += size
        idx = idx.fork()
    idx.replace_last(last)
    final = [*documents[:-1], last]
    if through_file:
        idx = _file_round_trip(idx)
    for term in "abcdefghz":
        expected = next((i for i, d in enumerate(final) if term in d), None)
        assert idx.first_document(term) == expected
