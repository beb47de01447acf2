"""Records in PostgreSQL, each worker with a Chroma of its own: a reader that served a user's vectors (from the
snapshot file another worker saved) keeps serving them after that worker deletes a turn, instead of its dense channel
going empty until a background job made them all again. Real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest

from memcompile_langgraph import MemCompile

pytestmark = pytest.mark.slow  # a real PostgreSQL, 300 turns embedded

WORDS = ["stapler", "ruler", "compass", "pencil", "eraser", "marker"]
TURNS = [
    {"speaker": "Ann" if i % 2 else "Bo", "text": f"Note {i}: the {w} is kept in drawer {i}.", "dia_id": f"D1:{i + 1}"}
    for i, w in enumerate(WORDS * 50)
]
QUERY = "Which drawer holds the measuring stick for straight lines?"  # "ruler" only by meaning: the dense channel


def test_a_reader_keeps_its_vectors_after_another_workers_delete(postgres_url, embeddings, monkeypatch, tmp_path):
    monkeypatch.delenv("MEMCOMPILE_CHROMA_URL", raising=False)
    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(tmp_path / "cache"))  # the machine's snapshot files, shared
    url = f"{postgres_url}?schema=k_{uuid.uuid4().hex[:12]}"
    writer = MemCompile(None, embeddings=embeddings, records_url=url)
    reader = MemCompile(None, embeddings=embeddings, records_url=url)
    try:
        writer.add_turns(TURNS, user_id="u")
        writer.host.cache.persist_all()  # the snapshot file, with the vectors, that the reader starts from
        before = reader.compile(QUERY, user_id="u")
        assert before.trace["dense"]["hits"] > 0
        assert len(reader.engine.vectors.ids("u")) == 0  # its own Chroma has none: they came with the file

        assert writer.delete_turns("u", ["D1:1"]) == 1
        after = reader.compile(QUERY, user_id="u")
        assert after.trace["dense"]["hits"] > 0
        assert len(reader.index("u").vectors) == len(TURNS) - 1
        assert after.trace["dense"]["hits"] == before.trace["dense"]["hits"]
        # and they are in its own vector store now: the next worker of this process needs no re-embed either
        assert len(reader.engine.vectors.ids("u")) == len(TURNS) - 1
    finally:
        writer.close()
        reader.close()
