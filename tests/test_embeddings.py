"""The local embedder (int8 model built once and cached, one text per call) and the store's embedding identity."""

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.embeddings.int8 import int8_model
from memcompile_langgraph.embeddings.minilm import MiniLMEmbeddings
from memcompile_langgraph.index.user import packet_document

TEXTS = [
    "Caroline went to the LGBTQ support group yesterday and felt welcome.",
    "Melanie painted a sunrise over the lake last summer.",
    "My parrot keeps chewing the golden biography I got for the living room.",
    "We are planning a trip to Athens in December to see the zoo.",
    "ok",
    "",
]
QUERIES = [
    "Who went to a support group?",
    "What did Melanie paint?",
    "Which pet chews books?",
    "Where is the December trip?",
]


@pytest.fixture(scope="module")
def fp32(model_dir):
    return MiniLMEmbeddings(model_dir, precision="fp32")


@pytest.mark.slow  # a subprocess or a whole store build per case
def test_int8_model_is_built_once_then_reused(model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(tmp_path))
    built = int8_model(model_dir)
    assert built is not None and built.parent == tmp_path / "models"
    stamp = built.stat().st_mtime_ns
    assert int8_model(model_dir) == built and built.stat().st_mtime_ns == stamp
    assert sorted(built.parent.iterdir()) == [built, built.with_name(built.name + ".sha256")]  # no staging files
    import onnx

    ops = {n.op_type for n in onnx.load(str(built)).graph.node}
    assert "DynamicQuantizeMatMul" in ops or "MatMulInteger" in ops or "MatMulIntegerToFloat" in ops
    assert "IsNaN" not in ops  # the softmax NaN guards are gone


def test_int8_vectors_stay_close_to_fp32_and_rank_alike(embeddings, fp32):
    assert embeddings.precision == "int8" and fp32.precision == "fp32" and embeddings.identity != fp32.identity
    a, b = embeddings.embed_array(TEXTS[:4]), fp32.embed_array(TEXTS[:4])
    assert (a * b).sum(1).min() > 0.98
    qa, qb = embeddings.embed_array(QUERIES), fp32.embed_array(QUERIES)
    assert list((qa @ a.T).argmax(1)) == list((qb @ b.T).argmax(1)) == [0, 1, 2, 3]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_texts_vector_does_not_depend_on_its_batch(model_dir, embeddings, workers):
    alone = np.vstack([embeddings.embed_query(t) for t in TEXTS])
    together = np.asarray(MiniLMEmbeddings(model_dir, workers=workers).embed_documents(TEXTS * 3))  # 3 > cores too
    assert np.array_equal(together[: len(TEXTS)], alone) and np.array_equal(
        together[len(TEXTS) :], np.vstack([alone, alone])
    )
    assert np.allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-5)


def test_int8_model_that_cannot_be_built_falls_back_to_fp32(model_dir, tmp_path, monkeypatch, caplog):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(blocked))
    emb = MiniLMEmbeddings(model_dir)
    assert emb.precision == "fp32" and emb.identity == MiniLMEmbeddings(model_dir, precision="fp32").identity
    assert "using the fp32 model" in caplog.text
    assert len(emb.embed_query("still works")) == 384


@pytest.mark.slow  # builds the int8 model three times
def test_damaged_cached_int8_model_is_rebuilt_else_fp32(model_dir, tmp_path, monkeypatch, caplog):
    from memcompile_langgraph.embeddings import int8

    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(tmp_path))
    built = int8_model(model_dir)
    whole = built.read_bytes()
    built.write_bytes(b"")  # what an un-synced rename can leave after a crash
    assert int8_model(model_dir) == built and built.read_bytes() == whole and "damaged" in caplog.text
    # a file its digest vouches for that still does not load: rebuilt when the session is opened
    built.write_bytes(b"not a model")
    built.with_name(built.name + ".sha256").write_text(int8._sha256(built))
    emb = MiniLMEmbeddings(model_dir)
    assert len(emb.embed_query("still works")) == 384 and emb.precision == "int8" and int8.cached_model_ok(built)
    # and when the rebuild fails too: the fp32 model, with one warning
    built.write_bytes(b"not a model")
    built.with_name(built.name + ".sha256").write_text(int8._sha256(built))
    monkeypatch.setattr(int8, "_build", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    caplog.clear()
    emb = MiniLMEmbeddings(model_dir)
    assert len(emb.embed_query("still works")) == 384 and emb.precision == "fp32"
    assert caplog.text.count("using the fp32 model") == 1


def test_unknown_precision_is_one_clear_error(model_dir):
    with pytest.raises(ValueError, match="precision must be"):
        MiniLMEmbeddings(model_dir, precision="int4")


def _stored_vectors(mem, user):
    ids, vectors = mem.engine.vectors.vectors(user)
    return dict(zip(ids, np.asarray(vectors)))


def test_store_made_with_another_model_is_reembedded_by_the_next_writer(tmp_path, embeddings, fp32):
    old = MemCompile(tmp_path, embeddings=fp32)
    old.add_turns(demo_turns(), "ann")
    assert old.engine.records.embedding("ann") == fp32.identity
    old.close()

    mem = MemCompile(tmp_path, embeddings=embeddings)
    ctx = mem.compile("Where does Priya work now?", "ann")  # a read never re-embeds: the dense channel sits out
    assert (
        ctx.packets and ctx.trace["dense"]["foreign_vectors"] and mem.engine.records.embedding("ann") == fp32.identity
    )
    assert mem.stats("ann")["vector_model"] == {"recorded": fp32.identity, "current": False}
    mem.switch_model()  # the explicit step: this model becomes the store's, its writers re-embed
    mem.add_turns(
        [{"speaker": "Priya", "text": "I start at the observatory next week.", "time": "2024-06-01T09:00"}], "ann"
    )
    assert mem.stats("ann")["vector_model"] == {"recorded": embeddings.identity, "current": True}
    index = mem.index("ann")
    stored = _stored_vectors(mem, "ann")
    assert set(stored) == set(index.packets) == set(index.vectors.ids)
    for pid in index.packet_order:
        doc = packet_document(index.packets[pid], index.by_packet[pid])[: mem.config.embed_max_chars]
        assert np.allclose(stored[pid], embeddings.embed_query(doc), atol=1e-6)
    assert mem.compile("Where does Priya work now?", "ann").trace["dense"]["hits"] > 0


def test_store_opened_with_an_embedder_of_another_dimension(tmp_path, embeddings):
    MemCompile(tmp_path, embeddings=embeddings).add_turns(demo_turns(), "ann")
    mem = MemCompile(tmp_path, embeddings=DeterministicFakeEmbedding(size=16))
    assert mem.compile("Where does Priya work now?", "ann").trace["dense"]["hits"] == 0  # never a shape error
    assert mem.reembed("ann") == len(mem.index("ann").packets)
    assert mem.compile("Where does Priya work now?", "ann").trace["dense"]["hits"] > 0
    assert {len(v) for v in _stored_vectors(mem, "ann").values()} == {16}
    bigger = MemCompile(tmp_path, embeddings=DeterministicFakeEmbedding(size=32))
    assert bigger.engine.embedding_id != mem.engine.embedding_id  # same class, other output size: another model
    bigger.switch_model()
    bigger.add_turns([{"speaker": "Tom", "text": "Biscuit learned to sit.", "time": "2024-06-02T10:00"}], "ann")
    assert {len(v) for v in _stored_vectors(bigger, "ann").values()} == {32}


def test_two_writers_with_different_models_never_mix_vectors(tmp_path, embeddings, fp32):
    w = MemCompile(tmp_path, embeddings=fp32)
    w.add_turns(demo_turns()[:20], "ann")  # w keeps its index cached, fp32 vectors inside
    r = MemCompile(tmp_path, embeddings=embeddings)
    r.reembed("ann")  # another process re-embeds with int8, which makes it the store's model
    # w must not append fp32 vectors to int8 ones, nor re-embed them back: it stores its turns without vectors
    w.add_turns(demo_turns()[20:], "ann")
    assert w.engine.records.embedding("ann") == embeddings.identity
    assert w.compile("Where does Priya work now?", "ann").trace["dense"]["foreign_vectors"]
    r.compile("Where does Priya work now?", "ann")  # r's load makes the vectors w's turns lack, with int8
    index = r.index("ann")
    stored = _stored_vectors(r, "ann")
    assert set(stored) == set(index.packets)
    for pid in index.packet_order:
        doc = packet_document(index.packets[pid], index.by_packet[pid])[: r.config.embed_max_chars]
        assert np.allclose(stored[pid], embeddings.embed_query(doc), atol=1e-6)
    assert r.compile("Where does Priya work now?", "ann").trace["dense"]["hits"] > 0


def test_reader_picks_up_vectors_another_process_reembedded(tmp_path, embeddings, fp32):
    MemCompile(tmp_path, embeddings=fp32).add_turns(demo_turns(), "ann")
    reader = MemCompile(tmp_path, embeddings=embeddings)
    assert reader.compile("Where does Priya work now?", "ann").trace["dense"]["foreign_vectors"]
    MemCompile(tmp_path, embeddings=embeddings).reembed("ann")
    ctx = reader.compile("Where does Priya work now?", "ann")  # the new version makes it reload, vectors included
    assert ctx.trace["dense"]["hits"] > 0 and len(reader.index("ann").vectors) == len(reader.index("ann").packets)


def test_queries_for_unknown_users_write_nothing(tmp_path, embeddings):
    mem = MemCompile(tmp_path, embeddings=embeddings)
    assert mem.compile("anything", "nobody").packets == []
    assert mem.engine.records.embedding("nobody") is None and "nobody" not in mem.users()


def test_forget_removes_the_recorded_model(tmp_path, embeddings):
    mem = MemCompile(tmp_path, embeddings=embeddings)
    mem.add_turns(demo_turns(), "ann")
    mem.forget("ann")
    assert mem.engine.records.embedding("ann") is None and not mem.engine.vectors.ids("ann")


class _FailsOnCall(DeterministicFakeEmbedding):
    """Fails on its n-th embed_documents call: an embedding service going down mid-ingest."""

    fail_on: int = 2
    calls: int = 0

    def embed_documents(self, texts):
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("embedding service unavailable")
        return super().embed_documents(texts)


def test_background_embedding_failure_surfaces_and_the_reembed_job_repairs(tmp_path, monkeypatch):
    from memcompile_langgraph.bench.synthetic import generate
    from memcompile_langgraph.runtime import consistency

    monkeypatch.setattr(consistency, "READER_REPAIR_LIMIT", 200)  # below the one batch left without vectors

    turns = generate(700).turns  # three ingest batches: the second batch's embedding fails
    flaky = _FailsOnCall(size=16)  # same identity as the repairing one below: only missing vectors are re-made
    with pytest.raises(RuntimeError, match="embedding service unavailable"):
        MemCompile(tmp_path, embeddings=flaky).add_turns(turns, "ann")
    mem = MemCompile(tmp_path, embeddings=_FailsOnCall(size=16, fail_on=0))
    # the second batch was committed before its vectors; the failure stopped the run before the third committed
    assert mem.engine.records.counts("ann")["packets"] == 512
    assert len(mem.engine.vectors.ids("ann")) == 256  # only the first batch's vectors got stored
    mem.index("ann")  # a read repairs up to READER_REPAIR_LIMIT missing vectors, not 256: the job does
    mem.host.cache.reembeds.wait()
    added = mem.add_turns(turns, "ann")
    assert added["already_stored"] == 512 and added["stored"] == 188
    index = mem.index("ann")
    assert set(mem.engine.vectors.ids("ann")) == set(index.packets) and len(index.vectors) == 700


def test_last_batch_embedding_failure_is_raised_by_add_turns(tmp_path):
    from memcompile_langgraph.bench.synthetic import generate

    with pytest.raises(RuntimeError, match="embedding service unavailable"):
        MemCompile(tmp_path, embeddings=_FailsOnCall(size=16, fail_on=3)).add_turns(generate(700).turns, "ann")


def test_ingest_embeds_in_the_background(tmp_path):
    import threading

    from memcompile_langgraph.bench.synthetic import generate

    threads = []

    class Recording(DeterministicFakeEmbedding):
        def embed_documents(self, texts):
            threads.append(threading.current_thread().name)
            return super().embed_documents(texts)

    mem = MemCompile(tmp_path, embeddings=Recording(size=8))
    mem.add_turns(generate(600).turns, "ann")
    assert len(threads) == 3 and all(t.startswith("memcompile-ingest-embed") for t in threads)
    index = mem.index("ann")
    assert len(mem.engine.vectors.ids("ann")) == len(index.vectors) == len(index.packets) == 600


@pytest.mark.slow  # a subprocess or a whole store build per case
def test_add_turns_returns_only_when_every_vector_is_stored(tmp_path, embeddings):
    from memcompile_langgraph.bench.synthetic import generate

    mem = MemCompile(tmp_path, embeddings=embeddings)
    mem.add_turns(generate(600).turns, "ann")  # three batches, the last one still in flight when the loop ends
    index = mem.index("ann")
    assert len(mem.engine.vectors.ids("ann")) == len(index.vectors) == len(index.packets) == 600


def test_reembed_without_an_embedder_does_nothing(tmp_path):
    mem = MemCompile(tmp_path, dense=False)
    mem.add_turns(demo_turns()[:3], "ann")
    assert mem.reembed("ann") == 0 and mem.engine.records.embedding("ann") is None


def test_concurrent_callers_share_the_embedder_safely(model_dir):
    from concurrent.futures import ThreadPoolExecutor

    emb = MiniLMEmbeddings(model_dir, workers=2)
    alone = emb.embed_array(TEXTS * 4)
    with ThreadPoolExecutor(4) as pool:  # four callers at once, each fanning out to the same worker pool
        results = list(pool.map(lambda _: emb.embed_array(TEXTS * 4), range(4)))
    assert all(np.array_equal(r, alone) for r in results)


def test_ingest_graph_run_directly_never_joins_another_models_vectors(tmp_path):
    a, b = DeterministicFakeEmbedding(size=8), DeterministicFakeEmbedding(size=16)
    MemCompile(tmp_path, embeddings=a).add_turns(demo_turns()[:10], "ann")
    studio = MemCompile(tmp_path, embeddings=b)  # what graphs/ingest.py serves: the graph, not add_turns
    studio.switch_model()
    studio.ingest_graph.invoke({"turns": demo_turns()[10:20]}, context=studio.context("ann"))
    assert studio.engine.records.embedding("ann") == studio.engine.embedding_id
    assert {len(v) for v in _stored_vectors(studio, "ann").values()} == {16}
    assert len(studio.engine.vectors.ids("ann")) == len(demo_turns()) == len(studio.index("ann").packets)
    fresh = MemCompile(tmp_path, embeddings=b)
    assert fresh.compile("Where does Priya work now?", "ann").trace["dense"]["hits"] > 0


def test_queries_for_unknown_users_leave_no_lock_files_or_cached_indexes(tmp_path, embeddings):
    mem = MemCompile(tmp_path, embeddings=embeddings)
    mem.add_turns(demo_turns()[:3], "ann")
    locks = set((tmp_path / "locks").iterdir())
    for n in range(5):
        assert mem.compile("anything", f"stranger-{n}").packets == []
    assert set((tmp_path / "locks").iterdir()) == locks and len(mem.host.cache) == 1


def test_a_read_repairs_a_few_missing_vectors_on_the_spot(tmp_path, embeddings):
    writer = MemCompile(tmp_path, embeddings=embeddings)
    writer.add_turns(demo_turns(), "ann")
    writer.engine.vectors.delete(
        "ann", sorted(writer.engine.vectors.ids("ann"))[:5]
    )  # lost, as in a crash before the upsert
    mem = MemCompile(tmp_path, embeddings=embeddings)
    assert mem.compile("Where does Priya work now?", "ann").trace["dense"]["hits"] > 0
    assert len(mem.engine.vectors.ids("ann")) == len(demo_turns()) == len(mem.index("ann").vectors)


def test_records_without_vectors_wait_for_a_writer(tmp_path, embeddings):
    MemCompile(tmp_path, dense=False).add_turns(demo_turns(), "ann")  # no model recorded: nothing to compare with
    mem = MemCompile(tmp_path, embeddings=embeddings)
    assert mem.compile("Where does Priya work now?", "ann").trace["dense"]["foreign_vectors"]
    assert not mem.engine.vectors.ids("ann")  # the read embedded nothing
    mem.add_turns([], "ann")
    assert len(mem.engine.vectors.ids("ann")) == len(demo_turns())


def test_reembed_embeds_each_packet_once(tmp_path):
    calls = []

    class Counting(DeterministicFakeEmbedding):
        def embed_documents(self, texts):
            calls.append(len(texts))
            return super().embed_documents(texts)

    mem = MemCompile(tmp_path, embeddings=Counting(size=8))
    mem.add_turns(demo_turns(), "ann")
    mem.engine.vectors.delete(
        "ann", sorted(mem.engine.vectors.ids("ann"))[:5]
    )  # missing ones are not repaired first, then replaced
    calls.clear()
    assert MemCompile(tmp_path, embeddings=Counting(size=8)).reembed("ann") == len(demo_turns())
    assert sum(calls) == len(demo_turns())
