"""Who may reach which memory over MCP's streamable HTTP (issue 26): real `memcompile mcp --http` processes and real
MCP client sessions, with and without a tokens file, and raw requests as an attacker would send them."""

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from support.servers import free_port, running

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from memcompile_langgraph.cli import main; sys.exit(main())"]
ENV = {"PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"}
TOM, ANN, ADMIN = "tom-token-0123456789abcdef", "ann-token-0123456789abcdef", "admin-token-0123456789abcdef"
BEAGLE = {"speaker": "Tom", "text": "I adopted a beagle named Biscuit.", "time": "4 March 2024"}
MARATHON = {"speaker": "Ann", "text": "I am training for the Boston marathon.", "time": "4 March 2024"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def serve(tmp_path, host: str, *extra: str):
    port = free_port()
    cmd = [*CLI, "mcp", "--store", str(tmp_path / "store"), "--http", f"{host}:{port}", *extra]
    log = tmp_path / f"mcp-{port}.log"
    return running(cmd, f"http://{host}:{port}/health", log, env=ENV), f"http://{host}:{port}/mcp", log


def result(call) -> tuple[bool, dict | str]:
    text = call.content[0].text
    return call.isError, (text if call.isError else json.loads(text))


async def session_calls(url: str, token: str | None, calls: list[tuple[str, dict]]) -> list[tuple[bool, dict | str]]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with streamablehttp_client(url, headers=headers) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        return [result(await session.call_tool(name, args)) for name, args in calls]


async def test_tokens_bind_each_caller_to_its_user(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# who may use which memory\n{TOM} tom\n{ANN} ann\n{ADMIN} *\n")
    tokens.chmod(0o600)
    server, url, log = serve(tmp_path, "127.0.0.1", "--tokens", str(tokens))
    with server:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": f"Basic {TOM}"}):
            assert httpx.post(url, json=INIT, headers={**MCP_HEADERS, **headers}).status_code == 401
        tom = await session_calls(
            url,
            TOM,
            [
                ("remember", {"turns": [BEAGLE], "user_id": "tom"}),
                ("remember", {"turns": [BEAGLE], "user_id": "ann"}),  # a write to a user it was not given
                ("recall", {"query": "What is the beagle called?", "user_id": "tom"}),
            ],
        )
        assert not tom[0][0] and tom[0][1]["stored"] == 1
        assert tom[1][0] and "may not use user_id 'ann'" in tom[1][1] and "Biscuit" in tom[2][1]["context"]
        ann = await session_calls(
            url,
            ANN,
            [
                ("remember", {"turns": [MARATHON], "user_id": "ann"}),
                ("recall", {"query": "What is the beagle called?", "user_id": "tom"}),
                ("stats", {"user_id": "tom"}),
                ("forget", {"user_id": "tom"}),
                ("forget", {"user_id": "tom", "dia_ids": ["D1:1"]}),
            ],
        )
        assert ann[0][1]["stored"] == 1 and all(error and "may not use user_id 'tom'" in why for error, why in ann[1:])
        admin = await session_calls(
            url, ADMIN, [("stats", {"user_id": "tom"}), ("stats", {"user_id": "ann"}), ("stats", {"user_id": "x"})]
        )
        assert [packets for _, packets in ((e, r["packets"]) for e, r in admin)] == [1, 1, 0]  # nothing lost
    assert "Traceback" not in log.read_text()  # sessions that ended normally leave no traceback


async def test_loopback_alias_without_tokens_refuses_a_rebinding_host(tmp_path):
    server, url, log = serve(tmp_path, "127.0.0.2")
    with server:
        rebound = httpx.post(url, json=INIT, headers={**MCP_HEADERS, "Host": "attacker.example"})
        assert rebound.status_code == 421
        origin = httpx.post(url, json=INIT, headers={**MCP_HEADERS, "Origin": "http://attacker.example"})
        assert origin.status_code == 403
        (stored,) = await session_calls(url, None, [("remember", {"turns": [BEAGLE], "user_id": "tom"})])
        assert stored[1]["stored"] == 1  # the address itself is served
    lines = log.read_text().splitlines()
    assert sum("MCP server at http://127.0.0.2:" in line for line in lines) == 1
    assert not [line for line in lines if "Traceback" in line or "ERROR" in line], lines


async def test_allowed_hosts_can_be_given(tmp_path):
    server, url, _ = serve(tmp_path, "127.0.0.2", "--allowed-hosts", "mcp.example.org:*")
    with server:
        assert httpx.post(url, json=INIT, headers={**MCP_HEADERS, "Host": "mcp.example.org:443"}).status_code == 200
        assert httpx.post(url, json=INIT, headers={**MCP_HEADERS, "Host": "attacker.example"}).status_code == 421


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**ENV, "PATH": "/usr/bin:/bin"}  # a server that starts instead of refusing fails by the timeout
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ([], "without authentication"),
        (["--tokens", "missing-file"], "cannot read"),
        (["--tokens", "short"], "printable ASCII"),
        (["--tokens", "noid"], "expected 'TOKEN USER_ID'"),
        (["--tokens", "short", "--no-auth"], "contradict"),
        (["--tokens", "open"], "is open to other users (mode 0644): chmod 600"),  # as ssh refuses such a key
        (["--tokens", "group"], "is open to other users (mode 0640)"),
    ],
)
def test_non_loopback_needs_tokens_and_bad_tokens_files_are_one_line(tmp_path, extra, fragment):
    files = {"short": ("abc tom\n", 0o600), "noid": ("0123456789abcdef0123\n", 0o600)}
    files |= {"open": (f"{TOM} tom\n", 0o644), "group": (f"{TOM} tom\n", 0o640)}
    for name, (text, mode) in files.items():
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(mode)
    args = [a if not a.endswith(("file", *files)) else str(tmp_path / a) for a in extra]
    run = run_cli("mcp", "--store", str(tmp_path / "s"), "--http", f"0.0.0.0:{free_port()}", *args)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and fragment in run.stderr, run.stderr
    assert not (tmp_path / "s").exists()


def serving_tokens(tmp_path, lines: str):
    """A server over a private tokens file of these lines: the file, the server, a probe (a token -> the status of an
    initialize request with it) and the server's log."""
    tokens = tmp_path / "tokens"
    tokens.write_text(lines)
    tokens.chmod(0o600)
    server, url, log = serve(tmp_path, "127.0.0.1", "--tokens", str(tokens))

    def status(token: str) -> int:
        return httpx.post(url, json=INIT, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}).status_code

    return tokens, server, status, log


async def test_the_tokens_file_is_read_again_when_it_changes(tmp_path):
    """Revoking is an edit of the file: a removed token gets 401 at its next request, an added one works, and a
    changed file that cannot be used lets nobody in (it is not the old file that stays in force)."""
    tokens, server, status, log = serving_tokens(tmp_path, f"{TOM} tom\n{ANN} ann\n")
    with server:
        assert status(TOM) == 200 and status(ANN) == 200
        replaced = tmp_path / "tokens.new"
        replaced.write_text(f"{ANN} ann\n{ADMIN} *\n")
        replaced.chmod(0o600)
        replaced.replace(tokens)  # as an editor saves: a new file in the old one's place
        assert status(TOM) == 401 and status(ANN) == 200 and status(ADMIN) == 200
        with tokens.open("a") as f:  # an edit in place that breaks the file
            f.write("not-a-valid-line\n")
        assert status(ANN) == 401 and status(ADMIN) == 401
        tokens.write_text(f"{TOM} tom\n")
        assert status(TOM) == 200 and status(ANN) == 401
    assert "no token is accepted until it is fixed" in log.read_text()


async def test_a_tokens_file_opened_to_other_users_while_serving_lets_nobody_in(tmp_path):
    """The start refuses a tokens file other users may read; one opened to them later (a chmod, or a file saved anew
    with the umask's mode) must not stay in force either: anyone who reads it could act as every user it names."""
    tokens, server, status, log = serving_tokens(tmp_path, f"{TOM} tom\n")
    with server:
        assert status(TOM) == 200
        tokens.chmod(0o644)
        assert status(TOM) == 401
        tokens.chmod(0o600)
        assert status(TOM) == 200
        replaced = tmp_path / "tokens.new"
        replaced.write_text(f"{TOM} tom\n{ANN} ann\n")
        replaced.chmod(0o640)
        replaced.replace(tokens)
        assert status(TOM) == 401 and status(ANN) == 401
    assert "is open to other users" in log.read_text()
