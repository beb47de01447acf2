"""One resolution of the store settings on every surface: the Python API, the CLI and the served graphs' memory each
honour MEMCOMPILE_STORE, MEMCOMPILE_RECORDS_URL and MEMCOMPILE_CHROMA_URL the same way, and a flag or argument
given wins over the environment. Checked where the data lands: the real SQLite file, PostgreSQL schema, Chroma
server."""

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli import main
from memcompile_langgraph.served import served_memory
from memcompile_langgraph.store.open import open_records

TURNS = [
    {"speaker": "Ann", "text": "I adopted a grey cat named Miso.", "session": 1},
    {"speaker": "Bo", "text": "Miso sounds lovely.", "session": 1},
]
SURFACES = ("api", "cli", "mcp", "served")
pytestmark = pytest.mark.slow  # real servers, the model


def _store_through(surface: str, tmp_path: Path, cli_flags: list[str], api_kwargs: dict) -> None:
    """User 'u' stores TURNS through one surface; only what the test names is given, the rest comes from the
    environment."""
    if surface == "cli":
        turns = tmp_path / "turns.jsonl"
        turns.write_text("".join(json.dumps(t) + "\n" for t in TURNS))
        assert main(["ingest", str(turns), "--user", "u", "--quiet", *cli_flags]) == 0
        return
    if surface == "mcp":
        asyncio.run(_remember_over_mcp(tmp_path, cli_flags))
        return
    if surface == "served":
        served_memory.cache_clear()
        mem = served_memory()
    else:
        mem = MemCompile(**api_kwargs)
    try:
        assert mem.add_turns(TURNS, user_id="u")["stored"] == 2
    finally:
        mem.close()
        served_memory.cache_clear()


async def _remember_over_mcp(tmp_path: Path, cli_flags: list[str]) -> None:
    """`memcompile mcp` over stdio, in a process of its own that inherits the test's environment."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memcompile_langgraph", "mcp", *cli_flags],
        env=dict(os.environ),
        cwd=str(tmp_path),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("remember", {"turns": TURNS, "user_id": "u"})
        assert not result.isError, result.content


def _users(path: Path | None = None, url: str = "") -> list[str]:
    records = open_records(path, url, create=False)
    try:
        return records.users()
    finally:
        records.close()


def _collections(chroma_url: str) -> set[str]:
    import chromadb

    client = chromadb.HttpClient(host=chroma_url.split("//")[1].split(":")[0], port=int(chroma_url.rsplit(":", 1)[1]))
    return {c.name for c in client.list_collections()}


@pytest.mark.parametrize("surface", SURFACES)
def test_memcompile_store_is_read_by_every_surface(surface, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the served default (./.memcompile) must not be where the data lands
    monkeypatch.delenv("MEMCOMPILE_RECORDS_URL", raising=False)
    monkeypatch.delenv("MEMCOMPILE_CHROMA_URL", raising=False)
    monkeypatch.setenv("MEMCOMPILE_STORE", str(tmp_path / "from-env"))
    _store_through(surface, tmp_path, [], {})
    assert _users(tmp_path / "from-env") == ["u"]
    assert not (tmp_path / ".memcompile").exists()


@pytest.mark.parametrize("surface", SURFACES)
def test_memcompile_records_url_is_read_by_every_surface(surface, tmp_path, monkeypatch, postgres_url):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMCOMPILE_CHROMA_URL", raising=False)
    url = f"{postgres_url}?schema=s_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("MEMCOMPILE_RECORDS_URL", url)
    monkeypatch.setenv("MEMCOMPILE_STORE", str(tmp_path / "s"))
    _store_through(surface, tmp_path, [], {})
    assert _users(url=url) == ["u"]
    assert not (tmp_path / "s" / "memcompile.sqlite3").exists()


@pytest.mark.parametrize("surface", SURFACES)
def test_memcompile_chroma_url_is_read_by_every_surface(surface, tmp_path, monkeypatch, chroma_url, model_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMCOMPILE_RECORDS_URL", raising=False)
    monkeypatch.setenv("MEMCOMPILE_CHROMA_URL", chroma_url)
    monkeypatch.setenv("MEMCOMPILE_STORE", str(tmp_path / "s"))
    before = _collections(chroma_url)
    _store_through(surface, tmp_path, [], {})
    records = open_records(tmp_path / "s", "", create=False)
    store_id = records.store_id()
    records.close()
    assert any(name.startswith(f"mc{store_id[:12]}") for name in _collections(chroma_url) - before)
    assert not (tmp_path / "s" / "chroma").exists()  # no local vectors


@pytest.mark.parametrize("surface", ("api", "cli", "mcp"))
def test_a_flag_or_argument_given_wins_over_the_environment(surface, tmp_path, monkeypatch, model_dir):
    monkeypatch.setenv("MEMCOMPILE_STORE", str(tmp_path / "wrong"))
    monkeypatch.setenv("MEMCOMPILE_RECORDS_URL", "postgresql://nobody@127.0.0.1:1/none?schema=wrong")
    monkeypatch.setenv("MEMCOMPILE_CHROMA_URL", "http://127.0.0.1:1")
    right = tmp_path / "right"
    flags = ["--store", str(right), "--records-url", "", "--chroma-url", ""]
    _store_through(surface, tmp_path, flags, {"path": right, "records_url": "", "chroma_url": ""})
    assert _users(right) == ["u"]
    assert (right / "chroma").is_dir()  # the vectors in the store's own Chroma folder, not on the server
    assert not (tmp_path / "wrong").exists()


def test_an_unreachable_chroma_server_is_one_warning_where_a_query_still_answers(
    tmp_path, monkeypatch, chroma_url, model_dir
):
    """A query answered from the snapshot file while the Chroma server is gone says so, once (a process of its
    own: the warning's line as a user sees it on stderr)."""
    monkeypatch.delenv("MEMCOMPILE_CHROMA_URL", raising=False)
    store = tmp_path / "s"
    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps(t) + "\n" for t in TURNS))
    assert (
        main(["ingest", str(turns), "--store", str(store), "--user", "u", "--quiet", "--chroma-url", chroma_url]) == 0
    )
    assert (
        main(["query", "What is the cat called?", "--store", str(store), "--user", "u", "--chroma-url", chroma_url])
        == 0
    )
    from support.servers import free_port

    gone = f"http://127.0.0.1:{free_port()}"  # the server moved away: nothing answers there
    proc = subprocess.run(
        [sys.executable, "-m", "memcompile_langgraph", "query", "What is the cat called?", "--store", str(store)]
        + ["--user", "u"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MEMCOMPILE_CHROMA_URL": gone},
    )
    assert proc.returncode == 0 and "Miso" in proc.stdout, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and gone in lines[0] and "unreachable" in lines[0], proc.stderr


def test_an_ingest_to_an_unreachable_chroma_server_is_one_line_and_stores_nothing(tmp_path, capsys):
    from support.servers import free_port

    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps(t) + "\n" for t in TURNS))
    gone = f"http://127.0.0.1:{free_port()}"
    argv = ["ingest", str(turns), "--store", str(tmp_path / "s"), "--records-url", "", "--chroma-url", gone]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and gone in err[0] and "nothing stored" in err[0], err
    assert not (tmp_path / "s").exists()


def test_the_settings_page_lists_every_variable_with_its_flag():
    from support.paths import ROOT

    from memcompile_langgraph.settings import SETTINGS

    rows = [line for line in (ROOT / "docs" / "configuration.md").read_text().splitlines() if line.startswith("| `")]
    for setting in SETTINGS:
        row = next((r for r in rows if r.startswith(f"| `{setting.env}`")), None)
        assert row is not None and f"`{setting.flag}`" in row, setting.env
