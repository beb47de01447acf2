"""A physical copy of a PostgreSQL store (pg_basebackup, a promoted standby) keeps the store id with everything else,
so it cannot tell itself apart by its contents: it is told apart by the deployment it is reached under. On a Chroma
server both share, the copy's forgets, deletes and writes never reach the original's vectors."""

from __future__ import annotations

import logging

import pytest
from support import pg_server

from memcompile_langgraph import MemCompile

from .harness import synthetic_turns

pytestmark = pytest.mark.slow  # two PostgreSQL clusters of its own

if pg_server.missing():
    pytest.skip(pg_server.missing(), allow_module_level=True)


@pytest.fixture
def original_and_copy():
    """(original, copy): a cluster whose `postgres` database holds a store, and a physical copy of it."""
    original = pg_server.start_cluster()
    copies: list[dict[str, str]] = []
    try:
        yield original, lambda: copies.append(pg_server.copy_cluster(original)) or copies[-1]
    finally:
        for cluster in (*copies, original):
            pg_server.stop_cluster(cluster)


def _ids(mem: MemCompile, user: str) -> set[str]:
    return set(mem.engine.vectors.ids(user))


def test_a_physical_copy_never_touches_the_originals_vectors(
    original_and_copy, chroma_url, embeddings, tmp_path, monkeypatch, caplog
):
    monkeypatch.delenv("MEMCOMPILE_DEPLOYMENT", raising=False)
    original, copy_of = original_and_copy
    url = f"{original['url']}?schema=phys"
    prod = MemCompile(records_url=url, chroma_url=chroma_url, embeddings=embeddings)
    for user in ("ann", "bob"):
        prod.add_turns(synthetic_turns(user, 6), user_id=user)
    ann, bob = _ids(prod, "ann"), _ids(prod, "bob")
    assert len(ann) == len(bob) == 6

    copied = copy_of()
    with caplog.at_level(logging.WARNING):
        clone = MemCompile(records_url=f"{copied['url']}?schema=phys", chroma_url=chroma_url, embeddings=embeddings)
        assert clone.engine.records.store_id() == prod.engine.records.store_id()  # nothing in the data differs
        clone.forget("ann")
        clone.delete_turns("bob", ["D1:1"])
        clone.add_turns(synthetic_turns("bob", 3, seed=1), user_id="bob")
    # the copy works on vectors of its own, built from its own records
    assert clone.compile("what did bob say", user_id="bob").packets
    assert len(_ids(clone, "bob")) == 6 - 1 + 3 and not _ids(clone, "ann")

    assert _ids(prod, "ann") == ann and _ids(prod, "bob") == bob  # the original's are untouched
    reopened = MemCompile(records_url=url, chroma_url=chroma_url, embeddings=embeddings)
    assert _ids(reopened, "ann") == ann and reopened.compile("what did ann say", user_id="ann").packets
    for mem in (prod, clone, reopened):
        mem.close()
    # and the copy said so, with what to do when it is the same database under a new address, once: opening it
    # again in this process (a `stats`, another memory) does not repeat it
    with caplog.at_level(logging.WARNING):
        MemCompile(records_url=f"{copied['url']}?schema=phys", chroma_url=chroma_url, embeddings=embeddings).close()
    said = [r for r in caplog.records if "MEMCOMPILE_DEPLOYMENT" in r.getMessage() and "kept apart" in r.getMessage()]
    assert len(said) == 1


def test_one_database_under_a_second_address_keeps_its_vectors_with_the_operators_name(
    original_and_copy, chroma_url, embeddings, monkeypatch
):
    """Workers that reach one database through different addresses (a proxy, a new host name after a failover)
    share its vectors when they all give the deployment's first name."""
    original, _ = original_and_copy
    monkeypatch.delenv("MEMCOMPILE_DEPLOYMENT", raising=False)
    first = MemCompile(records_url=f"{original['url']}?schema=addr", chroma_url=chroma_url, embeddings=embeddings)
    first.add_turns(synthetic_turns("ann", 4), user_id="ann")
    bound = first.engine.records.address()
    other_address = original["url"].replace("127.0.0.1", "localhost")
    apart = MemCompile(records_url=f"{other_address}?schema=addr", chroma_url=chroma_url, embeddings=embeddings)
    assert not _ids(apart, "ann")  # another deployment: vectors of its own (made again from the records)
    monkeypatch.setenv("MEMCOMPILE_DEPLOYMENT", bound)
    named = MemCompile(records_url=f"{other_address}?schema=addr", chroma_url=chroma_url, embeddings=embeddings)
    assert _ids(named, "ann") == _ids(first, "ann") and len(_ids(named, "ann")) == 4
    for mem in (first, apart, named):
        mem.close()
