"""What the vector paths read and build once: an ingest batch's documents serve its vectors and their sources, and a
full load hands the sources it read to the check of the vectors, which reads them again only when a writer may have
stored vectors since (some packet had none)."""

from __future__ import annotations

from reliability.harness import synthetic_turns

from memcompile_langgraph import MemCompile
from memcompile_langgraph.runtime.engine import bundles


class Calls:
    """Wraps an object's method, counting its calls."""

    def __init__(self, obj, name: str, after=None):
        self.count, self.real, self.after = 0, getattr(obj, name), after
        object.__setattr__(obj, name, self)  # also on the engine, a frozen dataclass

    def __call__(self, *args, **kwargs):
        self.count += 1
        out = self.real(*args, **kwargs)
        if self.after is not None:
            self.after()
        return out


def test_each_embedded_batch_builds_its_documents_once_and_stores_their_sources(tmp_path, embeddings):
    mem = MemCompile(tmp_path / "store", embeddings=embeddings)
    try:
        documents = Calls(mem.engine, "documents")
        embedded = Calls(mem.engine.embeddings, "embed_documents")
        mem.add_turns(synthetic_turns("doc", 40), user_id="doc")
        mem.add_turns(synthetic_turns("doc", 45)[40:], user_id="doc")
        assert embedded.count >= 2 and documents.count == embedded.count
        index = mem.index("doc")
        ids, _, sources = mem.engine.vectors.vectors("doc", sources=True)
        assert sorted(ids) == sorted(index.packet_order)
        assert dict(zip(ids, sources)) == dict(zip(ids, mem.engine.sources(bundles(index, ids))))
    finally:
        mem.close()


def test_a_full_load_reads_the_vector_sources_once(tmp_path, embeddings):
    store = tmp_path / "store"
    mem = MemCompile(store, embeddings=embeddings)
    mem.add_turns(synthetic_turns("one", 30), user_id="one")
    mem.close()
    fresh = MemCompile(store, embeddings=embeddings)
    try:
        fresh.host.cache.drop("one")  # no snapshot file: a load from every record
        reads = Calls(fresh.engine.vectors, "sources")
        embedded = Calls(fresh.engine.embeddings, "embed_documents")
        index = fresh.index("one")
        assert reads.count == 0 and embedded.count == 0
        assert len(index.vectors) == len(index.packets) == 30
    finally:
        fresh.close()


def test_a_vector_stored_after_the_load_read_them_is_seen_not_made_again(tmp_path, embeddings):
    """A packet without a vector when the load reads them (a writer stores its last vectors after its unit): the
    check reads the sources again and finds the vector stored meanwhile, instead of embedding it a second time."""
    store = tmp_path / "store"
    mem = MemCompile(store, embeddings=embeddings)
    mem.add_turns(synthetic_turns("late", 12), user_id="late")
    index = mem.index("late")
    late = index.packet_order[-1]
    kept = mem.engine.vectors.vectors("late", [late], sources=True)
    mem.engine.vectors.delete("late", [late])
    mem.close()
    fresh = MemCompile(store, embeddings=embeddings)
    try:
        fresh.host.cache.drop("late")
        vectors = fresh.engine.vectors
        upsert = vectors.upsert

        def store_behind():
            if reads.count == 1:  # right after the load's read: the writer's vector arrives
                upsert("late", kept[0], kept[1], [index.packets[late].dia_id], kept[2])

        reads = Calls(vectors, "vectors", after=store_behind)
        sources = Calls(vectors, "sources")
        embedded = Calls(fresh.engine.embeddings, "embed_documents")
        loaded = fresh.index("late")
        assert sources.count == 1 and embedded.count == 0
        assert late in loaded.vectors.row and len(loaded.vectors) == 12
        assert vectors.ids("late") == set(loaded.packet_order)
    finally:
        fresh.close()
