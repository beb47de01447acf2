"""`memcompile bench --startup`: how long the CLI takes from process start to exit, per command, as a user runs it.

Each command runs as a fresh process (one warm-up first, so the figures are not the first read from disk) against a
small store of the demo conversation. Wall time depends on what else the machine runs, so CPU time (user + system
of the process) and the load average are reported beside it.

The processes cache bytecode (in a private folder the warm-up fills) as an installed package has it, whatever the
caller's PYTHONDONTWRITEBYTECODE says: else this package's modules would be compiled from source at every start,
which no installed copy does.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

QUESTION = "Where does Priya work now?"
# command -> the target it is held to, in seconds of wall time on a quiet machine
TARGETS = {"--help": 1.0, "stats": 1.0, "query": 2.0}
_CLI = "import sys; from memcompile_langgraph.cli import main; sys.exit(main())"  # what the `memcompile` script runs
# what `query` cannot go below: the query graph is a LangGraph graph, so its start includes importing LangGraph's
# graph module; timed the same way, beside the commands
FLOOR = ("import langgraph.graph", ["-c", "import langgraph.graph"])


def commands(store: Path) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "stats": ["stats", "--store", str(store)],
        "query": ["query", QUESTION, "--store", str(store), "--user", "demo"],
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_env(pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def time_command(argv: list[str], runs: int, env: dict[str, str] | None = None) -> dict[str, float]:
    """Median and best wall seconds and median CPU seconds over `runs` fresh processes (after one warm-up)."""
    return time_process(["-c", _CLI, *argv], runs, env)


def time_process(args: list[str], runs: int, env: dict[str, str] | None = None) -> dict[str, float]:
    walls, cpus = [], []
    for i in range(runs + 1):
        cpu, start = _children_cpu(), time.perf_counter()
        proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr.strip()[-500:]}")
        if i:  # the first run is the warm-up
            walls.append(wall)
            cpus.append(_children_cpu() - cpu)
    return {
        "wall_s_median": round(statistics.median(walls), 3),
        "wall_s_min": round(min(walls), 3),
        "cpu_s_median": round(statistics.median(cpus), 3),
    }


def run_startup(runs: int = 5, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    from ..cli.demo_data import demo_turns
    from ..memory import MemCompile
    from .runner import machine

    with tempfile.TemporaryDirectory(prefix="memcompile-startup-") as tmp:
        store = Path(tmp) / "store"
        mem = MemCompile(store)
        mem.add_turns(demo_turns(), user_id="demo")
        mem.close()
        load_before = os.getloadavg()[0]
        out: dict[str, Any] = {}
        env = child_env(Path(tmp) / "pycache")
        for name, argv in commands(store).items():
            log(f"startup: memcompile {name} x{runs}")
            timed = time_command(argv, runs, env)
            out[name] = {**timed, "target_s": TARGETS[name], "met": timed["wall_s_median"] <= TARGETS[name]}
        log(f"startup: python -c '{FLOOR[0]}' x{runs}")
        floor = {FLOOR[0]: time_process(FLOOR[1], runs, env)}
    return {
        "machine": machine(),
        "runs": runs,
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "commands": out,
        "floor": floor,
    }


def startup_table(report: dict[str, Any]) -> str:
    rows = [["command", "wall s median", "wall s best", "CPU s median", "target s", "met"]]
    for name, c in report["commands"].items():
        rows.append(
            [
                f"memcompile {name}",
                str(c["wall_s_median"]),
                str(c["wall_s_min"]),
                str(c["cpu_s_median"]),
                str(c["target_s"]),
                "yes" if c["met"] else "no",
            ]
        )
    for name, c in report.get("floor", {}).items():
        rows.append(
            [f"python -c '{name}'", str(c["wall_s_median"]), str(c["wall_s_min"]), str(c["cpu_s_median"]), "-", "-"]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in rows]
    lo, hi = report["load_1min"]
    return "\n".join(
        lines
        + [
            f"{report['runs']} runs each after a warm-up; 1-minute load {lo} -> {hi} on "
            f"{report['machine']['cores']} cores"
        ]
    )
