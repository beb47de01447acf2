"""The HNSW index files of a live Chroma collection keep no byte of a deleted vector nor of freed memory once scrubbed
(store/chroma_dir.py): the vectors of slots marked deleted and the capacity past the element count are zeroed, in
place, and the index still answers for every vector it holds."""

from __future__ import annotations

import numpy as np
import pytest

from memcompile_langgraph.store.chroma_dir import scrub_unused


def test_deleted_slots_and_unused_capacity_are_zeroed_and_the_index_still_answers(tmp_path):
    chromadb = pytest.importorskip("chromadb")
    from chromadb.config import Settings

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((60, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    settings = Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(str(tmp_path / "chroma"), settings=settings)
    # saved every 10 writes, so the deletes reach the files as marks on slots that keep their vectors
    meta = {"hnsw:space": "cosine", "hnsw:sync_threshold": 10, "hnsw:batch_size": 10}
    col = client.get_or_create_collection("scrub-test", metadata=meta, embedding_function=None)
    col.add(ids=[f"v{i}" for i in range(50)], embeddings=vectors[:50])
    col.delete(ids=[f"v{i}" for i in range(5)])
    col.add(ids=[f"v{i}" for i in range(50, 60)], embeddings=vectors[50:])
    folder = next(p for p in (tmp_path / "chroma").iterdir() if p.is_dir())
    data = folder / "data_level0.bin"
    # the 60 elements' slots: 384 floats and their links and label
    slots = np.frombuffer(data.read_bytes(), np.uint8).reshape(-1, 1676)[:60]
    marked = np.flatnonzero(slots[:, 2] & 1)  # the deletion mark of each slot
    assert len(marked) == 5
    gone = [slots[i, 132:1668].tobytes() for i in marked]
    live = [slots[i, 132:1668].tobytes() for i in range(len(slots)) if i not in marked]
    with open(data, "r+b") as fh:  # what malloc may have left in the unused capacity: a deleted vector
        fh.seek(0, 2)
        fh.write(gone[0] * 3)

    scrub_unused(folder)

    saved = data.read_bytes()
    assert not [v for v in gone if v[:64] in saved or v[-64:] in saved]
    assert all(saved.count(v) == 1 for v in live)  # every live vector kept, once
    client.close()
    from memcompile_langgraph.store.chroma_dir import forget_chroma_system

    forget_chroma_system(tmp_path / "chroma")
    again = chromadb.PersistentClient(str(tmp_path / "chroma"), settings=settings).get_collection("scrub-test")
    assert again.count() == 55
    for i in (5, 30, 59):
        assert again.query(query_embeddings=[vectors[i]], n_results=1)["ids"][0] == [f"v{i}"]
