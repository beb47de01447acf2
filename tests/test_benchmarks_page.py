"""docs/benchmarks.md is generated from the result files in docs/results: it never drifts from them."""

import subprocess
import sys

from support.paths import ROOT


def test_the_benchmarks_page_is_what_its_result_files_give():
    render = ROOT / "docs" / "results" / "render.py"
    proc = subprocess.run([sys.executable, str(render), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _render_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("render", ROOT / "docs" / "results" / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_bench_measured_under_load_is_marked_so(tmp_path):
    import json

    bench = json.loads((ROOT / "docs" / "results" / "bench-1000.json").read_text())
    entry = {"file": "bench.json", "kind": "bench", "title": "Speed", "date": "d", "machine": "m", "command": "c"}
    (tmp_path / "results.json").write_text(json.dumps([entry]))
    pages = {}
    for load in (1.5, 9.0):  # on 2 cores: quiet, then loaded
        for phase in bench["sizes"][-1]["load"].values():
            phase.update(load_before=load, load_after=load)
        (tmp_path / "bench.json").write_text(json.dumps(bench))
        pages[load] = _render_module().render(tmp_path)
    assert "Measured under load" not in pages[1.5]
    assert "Measured under load**: a 1-minute load of 9.0 to 9.0 on 2 cores" in pages[9.0]
    assert "performance.md#figures-on-a-2-core-machine" in pages[9.0]
