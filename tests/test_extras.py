"""Optional dependencies: a feature whose extra is not installed says which extra to install, in one line."""

import subprocess
import sys

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.extras import MissingExtra

URL = "postgresql://nobody@127.0.0.1:9/none"  # never reached: the driver is missing before any connection
# the CLI in a process where psycopg cannot be imported, as after `pip install memcompile-langgraph` without extras
WITHOUT_PSYCOPG = (
    "import sys; sys.modules['psycopg'] = None; from memcompile_langgraph.cli import main; sys.exit(main())"
)


def test_a_postgresql_memory_without_psycopg_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "memcompile_langgraph.store.postgres", raising=False)
    with pytest.raises(MissingExtra, match=r"needs psycopg: pip install 'memcompile-langgraph\[postgres\]'"):
        MemCompile(tmp_path / "store", records_url=URL)


def test_the_cli_prints_one_line_naming_the_extra(tmp_path):
    cmd = [sys.executable, "-c", WITHOUT_PSYCOPG, "stats", "--store", str(tmp_path), "--records-url", URL]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "memcompile: error: records_url=postgresql://... needs psycopg: pip install 'memcompile-langgraph[postgres]'"
    ]


def test_an_import_error_of_another_module_is_left_as_it_is():
    from memcompile_langgraph.extras import missing_extra

    assert missing_extra(ModuleNotFoundError("No module named 'numpy'", name="numpy"), "x") is None
    found = missing_extra(ModuleNotFoundError("No module named 'rank_bm25'", name="rank_bm25"), "memcompile eval")
    assert str(found) == "memcompile eval needs rank_bm25: pip install 'memcompile-langgraph[eval]'"
