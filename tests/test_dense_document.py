"""What the dense channel embeds per packet (config.dense_document), and a store re-embedding on another choice."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.cli import main
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.config import DENSE_DOCUMENTS
from memcompile_langgraph.eval.runner import builder_name
from memcompile_langgraph.index.user import packet_document
from memcompile_langgraph.runtime.engine import bundles

PHOTO = {
    "speaker": "Tom",
    "text": "Biscuit fetched the ball from the lake near Oslo yesterday.",
    "time": "2024-06-02T10:00",
    "image_caption": "a beagle carrying a red ball",
    "image_query": "dog with ball",
}


@given(st.text(max_size=30).filter(lambda s: s not in DENSE_DOCUMENTS))
def test_an_unknown_dense_document_is_refused_in_one_line(value):
    with pytest.raises(ValueError) as err:
        MemCompileConfig(dense_document=value)
    message = str(err.value)
    assert "\n" not in message.replace(repr(value), "") and "dense_document must be one of" in message


def test_every_choice_is_a_valid_config_and_the_default_is_the_papers():
    assert MemCompileConfig().dense_document == MemCompileConfig.paper().dense_document == "packet"
    for kind in DENSE_DOCUMENTS:
        assert MemCompileConfig(dense_document=kind).dense_document == kind


def test_the_cli_refuses_an_unknown_dense_document(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["query", "--store", "/nonexistent", "--user", "u", "--dense-document", "summary", "anything"])
    assert exit_.value.code == 2 and "--dense-document" in capsys.readouterr().err


@pytest.fixture(scope="module")
def photo_bundle():
    mem = MemCompile(None, dense=False)
    mem.add_turns([PHOTO], "ann")
    index = mem.index("ann")
    (item,) = bundles(index, index.packet_order)
    return item


def test_document_variants_hold_what_they_say(photo_bundle):
    packet, claims = photo_bundle
    assert claims and any(d.keywords for d in claims) and any(d.people for d in claims)
    docs = {kind: packet_document(packet, claims, kind) for kind in DENSE_DOCUMENTS}
    time_line = f"time: {packet.session_time or packet.session_time_raw}"
    for doc in docs.values():  # each keeps the speaker, the image fields and the time
        lines = doc.split("\n")
        assert lines[0].startswith("Tom: ") and lines[-1] == time_line
        assert "image: a beagle carrying a red ball dog with ball" in lines
    claim_lines = [d.claim for d in claims]
    said = f"Tom: {PHOTO['text']}"
    for kind in ("packet", "turn", "turn_terms"):
        assert docs[kind].split("\n")[0] == said
    assert said not in docs["claims"] and docs["claims"].startswith(f"Tom: {claim_lines[0]}")
    for kind in ("packet", "claims"):
        assert all(c in docs[kind] for c in claim_lines)
    assert not any(c in docs["turn"].split("\n") or c in docs["turn_terms"].split("\n") for c in claim_lines)
    assert "keywords: " in docs["packet"] and "keywords: " in docs["turn_terms"] and "keywords: " not in docs["turn"]
    assert "people: " in docs["turn_terms"] and "people: " not in docs["turn"] + docs["claims"]
    assert len(docs["turn"]) < len(docs["turn_terms"]) < len(docs["packet"])
    assert len(docs["claims"]) < len(docs["packet"])
    assert packet_document(packet, claims) == docs["packet"]  # the paper's z(p) is the default


def test_a_packet_without_claims_keeps_its_line_in_every_document(photo_bundle):
    packet, _ = photo_bundle
    for kind in DENSE_DOCUMENTS:
        assert packet_document(packet, [], kind).split("\n")[0] == f"Tom: {PHOTO['text']}"


def test_a_fallback_claim_is_not_prefixed_twice():
    mem = MemCompile(None, dense=False)
    mem.add_turns([{"speaker": "Ann", "text": "Thanks, that's sweet!", "time": "2024-06-02T10:00"}], "ann")
    index = mem.index("ann")
    ((packet, claims),) = bundles(index, index.packet_order)
    assert [d.claim for d in claims] == ["Ann: Thanks, that's sweet!"]
    assert packet_document(packet, claims, "claims").split("\n")[0] == "Ann: Thanks, that's sweet!"


def test_the_eval_keeps_stores_of_each_document_apart():
    names = {builder_name(None, MemCompileConfig(dense_document=kind)) for kind in DENSE_DOCUMENTS}
    assert len(names) == len(DENSE_DOCUMENTS) and builder_name(None, MemCompileConfig()) in names


def _check_vectors(mem, user, embeddings):
    """Every stored vector and every vector of the index is the embedding of its packet's document now."""
    index = mem.index(user)
    ids, vectors, sources = mem.engine.vectors.vectors(user, sources=True)
    stored = dict(zip(ids, np.asarray(vectors)))
    assert set(stored) == set(index.packets) == set(index.vectors.ids)
    docs = mem.engine.documents(bundles(index, index.packet_order))
    expected = embeddings.embed_array(docs)
    for pid, vector in zip(index.packet_order, expected):
        assert np.allclose(stored[pid], vector, atol=1e-6)
    assert dict(zip(ids, sources)) == dict(zip(index.packet_order, mem.engine.sources(bundles(index, ids))))


@pytest.mark.parametrize("before, after", [("packet", "turn"), ("turn", "turn_terms")])
def test_another_document_choice_re_embeds_a_store(tmp_path, embeddings, before, after):
    turns = demo_turns()
    MemCompile(tmp_path, embeddings=embeddings, config=MemCompileConfig(dense_document=before)).add_turns(turns, "ann")
    mem = MemCompile(tmp_path, embeddings=embeddings, config=MemCompileConfig(dense_document=after))
    # a reader repairs a small user on the spot: the query is served by vectors of the new documents
    ctx = mem.compile("What kind of dog did Tom adopt?", "ann")
    assert ctx.trace["dense"]["hits"] > 0
    _check_vectors(mem, "ann", embeddings)
    mem.add_turns([PHOTO], "ann")
    _check_vectors(mem, "ann", embeddings)
    # the first choice, opened again, makes its own documents' vectors again: no vector of the other is served
    back = MemCompile(tmp_path, embeddings=embeddings, config=MemCompileConfig(dense_document=before))
    back.add_turns([{**PHOTO, "text": "Biscuit slept all afternoon.", "time": "2024-06-03T10:00"}], "ann")
    _check_vectors(back, "ann", embeddings)
