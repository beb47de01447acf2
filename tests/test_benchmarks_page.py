"""docs/benchmarks.md is generated from the result files in docs/results: it never drifts from them."""

import subprocess
import sys

from support.paths import ROOT


def test_the_benchmarks_page_is_what_its_result_files_give():
    render = ROOT / "docs" / "results" / "render.py"
    proc = subprocess.run([sys.executable, str(render), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
