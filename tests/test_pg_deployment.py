"""A memory kept on servers: records in a real PostgreSQL, vectors in a real `chroma run`, no local directory."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from support.paths import DATA

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli import main
from memcompile_langgraph.cli.demo_data import QUESTIONS, demo_turns
from memcompile_langgraph.store.postgres import PostgresRecords


def schema_url(server: str) -> str:
    return f"{server}?schema=t_{uuid.uuid4().hex[:12]}"


@pytest.mark.slow
def test_a_memory_on_servers_compiles_as_the_embedded_one_and_writes_nothing_locally(
    tmp_path, monkeypatch, postgres_url, chroma_url, embeddings
):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    url = schema_url(postgres_url)
    served = MemCompile(None, embeddings=embeddings, records_url=url, chroma_url=chroma_url)
    embedded = MemCompile(tmp_path / "embedded", embeddings=embeddings)
    assert isinstance(served.engine.records, PostgresRecords)
    for mem in (served, embedded):
        assert mem.add_turns(demo_turns(), user_id="demo")["stored"] == len(demo_turns())
    for q in QUESTIONS:
        a, b = served.compile(q, user_id="demo"), embedded.compile(q, user_id="demo")
        assert a.text == b.text and [p.dia_id for p in a.packets] == [p.dia_id for p in b.packets]
    assert served.stats("demo")["vectors"] == len(demo_turns())

    other = MemCompile(None, embeddings=embeddings, records_url=url, chroma_url=chroma_url)  # another worker
    assert other.users() == ["demo"] and other.compile(QUESTIONS[0], user_id="demo").text
    assert other.add_turns(demo_turns(), user_id="demo")["stored"] == 0  # already stored: not twice
    other.add_turns([{"speaker": "Tom", "text": "Biscuit learned to swim in the lake.", "time": "2024-06-01"}], "demo")
    assert "swim" in served.compile("What did Biscuit learn?", user_id="demo").text  # the next query sees it
    other.forget("demo")
    assert served.users() == [] and served.stats("demo")["packets"] == 0
    assert served.compile(QUESTIONS[0], user_id="demo").packets == []  # a forget elsewhere: gone at the next query
    assert list(work.iterdir()) == []
    for mem in (served, other, embedded):
        mem.close()


@pytest.mark.slow
def test_cli_commands_take_records_url_and_need_no_store_directory(
    tmp_path, monkeypatch, capsys, postgres_url, chroma_url
):
    monkeypatch.chdir(tmp_path)
    turns = DATA / "cat_and_cello.jsonl"
    url = schema_url(postgres_url)
    where = ["--records-url", url, "--chroma-url", chroma_url]
    assert main(["ingest", str(turns), "--user", "ann", "--quiet", *where]) == 0
    capsys.readouterr()
    assert main(["query", "What is the cat called?", "--user", "ann", "--json", *where]) == 0
    assert "Miso" in json.loads(capsys.readouterr().out)["context"]
    monkeypatch.setenv("MEMCOMPILE_RECORDS_URL", url)  # the environment names the store as well
    assert main(["stats", "--user", "ann", "--json", "--chroma-url", chroma_url]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["packets"] == stats["vectors"] == 2
    assert main(["forget", "--user", "ann", "--chroma-url", chroma_url]) == 0
    assert "forgot 2 turns" in capsys.readouterr().out
    assert os.listdir(tmp_path) == []  # nothing written where the command ran


def test_reading_commands_never_create_a_postgres_store(tmp_path, capsys, postgres_url):
    url = schema_url(postgres_url)
    for argv in (
        ["stats", "--records-url", url, "--store", str(tmp_path)],
        ["query", "anything", "--records-url", url, "--store", str(tmp_path)],
        ["forget", "--user", "u", "--records-url", url, "--store", str(tmp_path)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no store at" in err and "schema t_" in err
    with pytest.raises(Exception, match="no store"):
        PostgresRecords(url, create=False)


def test_a_store_needs_a_directory_or_both_server_urls(capsys, postgres_url):
    assert main(["stats", "--records-url", schema_url(postgres_url)]) == 2
    assert "--store" in capsys.readouterr().err


@pytest.mark.parametrize(
    "url, says",
    [
        ("mysql://h/db", "postgresql://"),
        ("postgresql://h/db?schema=Bad-Name", "schema 'Bad-Name'"),
        ("postgresql://memcompile@127.0.0.1:1/postgres", "PostgreSQL at 127.0.0.1:1/postgres"),
    ],
)
def test_unusable_records_urls_are_one_line_errors(tmp_path, capsys, url, says):
    assert main(["stats", "--records-url", url, "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


def test_the_environment_picks_postgres_unless_the_caller_says_sqlite(tmp_path, monkeypatch, postgres_url):
    from memcompile_langgraph.store.open import open_records
    from memcompile_langgraph.store.sqlite import SqliteRecords

    monkeypatch.setenv("MEMCOMPILE_RECORDS_URL", schema_url(postgres_url))
    from_env, sqlite = open_records(tmp_path / "a"), open_records(tmp_path / "b", "")
    assert isinstance(from_env, PostgresRecords) and isinstance(sqlite, SqliteRecords)
    assert not (tmp_path / "a").exists()
    from_env.close()
    sqlite.close()


@pytest.mark.slow
def test_bench_measures_the_served_store_beside_the_embedded_one(tmp_path, postgres_url, chroma_url, embeddings):
    from memcompile_langgraph.bench.runner import BenchOptions, run_bench

    url = schema_url(postgres_url)
    opts = BenchOptions(
        sizes=(60,), queries=4, add_samples=3, store=tmp_path / "b", peer=False, records_url=url, chroma_url=chroma_url
    )
    report = run_bench(opts)
    served, embedded = report["served"]["sizes"][0], report["sizes"][0]
    assert report["served"]["records"] == "postgresql" and report["served"]["vectors"] == "chroma server"
    assert served["vectors"] == embedded["vectors"] == 63 and served["descriptors"] == embedded["descriptors"]
    assert served["ingest_turns_per_s"] > 0 and served["query_ms_p50"] > 0 and served["first_query_s"] > 0
    assert PostgresRecords(url).counts("bench")["packets"] == 63
    with pytest.raises(ValueError, match="already holds a bench history"):
        run_bench(BenchOptions(sizes=(60,), queries=4, add_samples=3, peer=False, records_url=url))
