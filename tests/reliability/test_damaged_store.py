"""Damaged or missing store files: readers answer from what is intact, writers say what is wrong in one line,
`memcompile repair` rebuilds the vectors from the records, and nothing is ever deleted by a read."""

import logging
import os
import shutil
import sqlite3
import uuid

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli import main
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.store.protocols import StoreError

from .harness import memcompile

pytestmark = pytest.mark.slow  # subprocesses and several stores per test


def _cli(*args):
    run = memcompile(*args)
    return run.code, run.out, run.err


@pytest.fixture()
def store(tmp_path, embeddings):
    path = tmp_path / "store"
    mem = MemCompile(path, embeddings=embeddings)
    mem.add_turns(demo_turns(), user_id="u")
    mem.add_turns(demo_turns()[:5], user_id="v")
    mem.close()
    return path


@pytest.mark.parametrize("where", [0.3, 0.5, 0.8])
def test_a_damaged_vector_store_degrades_to_lexical_and_repair_rebuilds_it(store, embeddings, where, caplog):
    chroma_db = store / "chroma" / "chroma.sqlite3"
    size = chroma_db.stat().st_size
    with open(chroma_db, "r+b") as fh:
        fh.seek(int(size * where) // 4096 * 4096)
        fh.write(b"\0" * 16384)
    mem = MemCompile(store, embeddings=embeddings)
    with caplog.at_level(logging.WARNING):
        ctx = mem.compile("Where does Priya work now?", "u")
        again = mem.compile("Who is coming to Lisbon?", "u")
    assert ctx.packets and again.packets and "Northwind" in ctx.text  # the lexical channels answer
    assert caplog.text.count("dense channel off") <= 1  # said once, not per query
    assert mem.stats("u")["packets"] == len(demo_turns())
    try:
        mem.add_turns([{"speaker": "Tom", "text": "Biscuit learned to sit today.", "time": "2024-06-02"}], "u")
    except StoreError as exc:  # a writer names the problem and the way out, in one line
        assert "repair" in str(exc) and "\n" not in str(exc)
    mem.close()

    code, out, err = _cli("query", "Where does Priya work now?", "--store", store, "--user", "u")
    assert code == 0 and "Traceback" not in err and "Northwind" in out, err[-1500:]
    code, out, err = _cli("repair", "--store", store)
    assert code == 0 and "Traceback" not in err, err
    fixed = MemCompile(store, embeddings=embeddings)
    for user in ("u", "v"):
        stats = fixed.stats(user)
        assert stats["vectors"] == stats["packets"] > 0
    ctx = fixed.compile("Where does Priya work now?", "u")
    assert ctx.trace["dense"]["hits"] > 0 and "Northwind" in ctx.text


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
def test_a_missing_records_file_beside_vectors_is_an_error_and_deletes_nothing(store, embeddings, damage):
    records = store / "memcompile.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        if damage == "deleted" and os.path.exists(f"{records}{suffix}"):
            os.remove(f"{records}{suffix}")
    if damage == "emptied":
        records.write_bytes(b"")
    before = sorted(p.name for p in (store / "chroma").rglob("*"))
    turns = store.parent / "turns.json"
    turns.write_text('[{"speaker": "Ann", "text": "hello"}]')
    with pytest.raises(StoreError, match="memcompile.sqlite3"):
        MemCompile(store, embeddings=embeddings)
    for args in (
        ("stats", "--store", store),
        ("query", "hello", "--store", store),
        ("ingest", turns, "--store", store),
    ):
        code, out, err = _cli(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "memcompile.sqlite3" in err, (args, err)
    assert sorted(p.name for p in (store / "chroma").rglob("*")) == before  # nothing was deleted


def test_paths_that_are_not_store_directories_are_one_line_errors(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("not a store")
    inside_file = a_file / "store"
    records_dir = tmp_path / "weird"
    (records_dir / "memcompile.sqlite3").mkdir(parents=True)
    for store in (a_file, inside_file, records_dir):
        for args in (("stats", "--store", store), ("query", "hello", "--store", store)):
            code, out, err = _cli(*args)
            assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (store, args, err)
    assert a_file.read_text() == "not a store"
    shutil.rmtree(records_dir)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "store"
    mem = MemCompile(path, dense=False, records_url="", chroma_url="")
    mem.add_turns(demo_turns()[:2], user_id="u")
    mem.close()
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.text(max_size=6) | st.integers(-(10**20), 10**20).map(str))
def test_a_schema_version_no_memcompile_writes_is_one_line_and_left_as_it_is(small_store, tmp_path, capsys, version):
    assume(not (version.isdecimal() and 1 <= int(version) <= 5))  # the versions this memcompile reads
    store = tmp_path / uuid.uuid4().hex
    shutil.copytree(small_store, store)
    db = store / "memcompile.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (version,))
    capsys.readouterr()
    assert main(["stats", "--store", str(store), "--records-url", "", "--chroma-url", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(db) in err[0] and "schema" in err[0], err
    with sqlite3.connect(db) as conn:  # not upgraded on a guess
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (version,)
