"""Records in PostgreSQL with no Chroma server: each worker keeps the vectors in a Chroma of its own, so what another
worker wrote has no vector here. Said at open (one line) and by `stats`, and a reader embeds what it lacks instead
of answering with the dense channel empty for good (its re-embed job, off the read path). Real PostgreSQL."""

import logging
import uuid

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli import main

pytestmark = pytest.mark.slow  # a real PostgreSQL, the model, ~300 turns embedded twice

TURNS = [
    {"speaker": "Ann" if i % 2 else "Bo", "text": f"Note {i}: the {w} is kept in drawer {i}.", "dia_id": f"D1:{i + 1}"}
    for i, w in enumerate(["stapler", "ruler", "compass", "pencil", "eraser", "marker"] * 50)
]


def test_a_reader_of_another_workers_turns_embeds_them_and_the_setup_is_said(
    postgres_url, embeddings, caplog, capsys, monkeypatch, tmp_path
):
    monkeypatch.delenv("MEMCOMPILE_CHROMA_URL", raising=False)
    url = f"{postgres_url}?schema=w_{uuid.uuid4().hex[:12]}"
    with caplog.at_level(logging.WARNING):
        writer = MemCompile(None, embeddings=embeddings, records_url=url)
    said = [r.getMessage() for r in caplog.records if "Chroma" in r.getMessage()]
    assert len(said) == 1 and "own" in said[0] and "MEMCOMPILE_CHROMA_URL" in said[0], said
    reader = MemCompile(None, embeddings=embeddings, records_url=url)
    try:
        writer.add_turns(TURNS, user_id="u")  # more turns than a reader repairs on the spot otherwise
        reader.compile("Where is the compass kept?", user_id="u")  # the read starts the re-embed job, not waits
        reader.host.cache.reembeds.wait()
        ctx = reader.compile("Where is the compass kept?", user_id="u")
        assert ctx.trace["dense"]["hits"] > 0  # the reader's own Chroma now holds the vectors it lacked
        assert len(reader.index("u").vectors) == len(TURNS)

        assert writer.delete_turns("u", ["D1:1"]) == 1  # another worker's delete: the reader reloads the user
        ctx = reader.compile("Where is the ruler kept?", user_id="u")
        assert ctx.trace["dense"]["hits"] > 0 and len(reader.index("u").vectors) == len(TURNS) - 1
    finally:
        writer.close()
        reader.close()

    capsys.readouterr()
    assert main(["stats", "--records-url", url, "--store", str(tmp_path), "--user", "u"]) == 0
    out, err = capsys.readouterr()
    notes = [line for line in (out + err).splitlines() if "own Chroma" in line]
    assert len(notes) == 1, out + err
