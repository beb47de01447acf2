"""`memcompile mcp` arguments: one-line errors, loopback by default, mcp imported only when serving."""

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.cli import main
from memcompile_langgraph.cli.mcp_cmd import UsageError, is_loopback, parse_http


@pytest.mark.parametrize(
    "text, address",
    [
        ("8123", ("127.0.0.1", 8123)),
        ("localhost:9000", ("localhost", 9000)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:8000", ("::1", 8000)),
    ],
)
def test_http_address(text, address):
    assert parse_http(text) == address


@given(st.text(max_size=30))
def test_any_http_argument_is_an_address_or_a_usage_error(text):
    try:
        host, port = parse_http(text)
    except UsageError:
        return
    assert host and 0 < port < 65536


def test_loopback_hosts():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_bad_http_argument_is_one_line_and_creates_no_store(tmp_path, capsys):
    assert main(["mcp", "--store", str(tmp_path / "s"), "--http", "99999"]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "s").exists()


def test_cli_start_up_does_not_import_mcp():
    code = "import sys; from memcompile_langgraph.cli import build_parser; build_parser(); print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
