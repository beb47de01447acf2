"""Every ```python and ```bash block of README.md and of each docs/*.md page runs as written, in the page's order,
in one temporary working directory per page (what a user following that page along has): python blocks in a
subprocess each, bash blocks via bash, `memcompile` from this environment on PATH. A page's blocks stay together in
one xdist worker (the xdist_group mark; pytest runs with --dist loadgroup).

A block that needs something names it on the line before its fence, `<!-- docs-test: needs NAME[, NAME] -->`:
- openai: a loopback OpenAI-compatible server (tests/support/openai_server.py) through OPENAI_BASE_URL / OPENAI_API_KEY;
- chroma-server, langgraph-dev: the real server on a free port; the README's port (8000, 2024) is replaced by it,
  and a line of the block that starts the server itself is run as that server, until the block's other lines end;
- locomo: `locomo10.json` in the working directory (stand-in: the first two conversations of the LoCoMo dev split,
  each cut to its first sessions and the questions about them, so every block runs in seconds; two, so that a
  recipe that mixes conversations up fails here as it would on the real file);
- postgres: a database of its own on the test run's PostgreSQL; the page's `postgresql://...` URL is replaced by it;
- install: installs the package into the running environment (CI's own install step, .ci/run, runs it verbatim).
A need without a stand-in here is reported as skipped with the reason, never as passed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.paths import LOCOMO, ROOT
from support.servers import free_port, running

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
NEEDS = re.compile(r"^<!-- docs-test: needs (?P<names>[\w-]+(?:\s*,\s*[\w-]+)*) -->\s*$")
RUNNABLE = ("python", "bash")
OTHER_FENCES = ("mermaid", "text", "json")  # shown, not run
# need -> (documented port, the command that starts it, readiness path)
SERVERS = {
    "chroma-server": (8000, "chroma run", "/api/v2/heartbeat"),
    "langgraph-dev": (2024, "langgraph dev", "/ok"),
}
SKIPPED = {  # needs with no stand-in: reported as skipped with this reason
    "install": "installs the package into the environment running the tests; CI's install step runs it verbatim",
}
STAND_IN_SESSIONS = 4  # of the LoCoMo stand-in: 76 turns of conv-26
STAND_IN_SAMPLES = 2  # conversations of the locomo stand-in
STAND_INS = {"openai", "locomo", "postgres", *SERVERS}
PG_URL = re.compile(r"postgresql://[^\s\"'?]*")  # the README's example server, replaced by the stand-in's
EXPORT = re.compile(r"^export (\w+)=\"?([^\"]*)\"?$")


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    code: str
    needs: tuple[str, ...]
    page: str = "README.md"  # relative to the repository root

    @property
    def id(self) -> str:
        return f"{self.page}-L{self.line}-{self.lang}" + "".join(f"-{n}" for n in self.needs)


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced block with its language, first line number and needs."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = NEEDS.match(lines[i - 1]) if i else None
        needs = tuple(n.strip() for n in marker["names"].split(",")) if marker else ()
        blocks.append(Block(i + 1, m.group(1), "\n".join(lines[i + 1 : end]) + "\n", needs, page))
        i = end + 1
    return blocks


BLOCKS = [b for page in PAGES for b in readme_blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]


def test_docs_fences_are_all_run_or_plainly_not_code():
    assert {b.lang for b in BLOCKS} <= set(RUNNABLE) | set(OTHER_FENCES), "a fence the docs test would not run"
    runnable = [b for b in BLOCKS if b.lang in RUNNABLE]
    assert len(runnable) >= 10
    for b in runnable:  # a misspelt need would skip its block unnoticed
        assert set(b.needs) <= STAND_INS | set(SKIPPED), b.id


def test_needs_markers_parse():
    text = (
        "x\n<!-- docs-test: needs openai, locomo -->\n```bash\necho hi\n```\n"
        "```python\nprint(1)\n```\n```mermaid\ng\n```\n"
    )
    assert readme_blocks(text) == [
        Block(3, "bash", "echo hi\n", ("openai", "locomo")),
        Block(6, "python", "print(1)\n", ()),
        Block(9, "mermaid", "g\n", ()),
    ]


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory) -> dict[str, Path]:
    return {}


@pytest.fixture
def workdir(block: Block, workdirs: dict[str, Path], tmp_path_factory) -> Path:
    """The user's working directory for the block's whole page; it sees the repository's graphs/ and tests/ as a
    clone does."""
    if block.page not in workdirs:
        tmp = workdirs[block.page] = tmp_path_factory.mktemp(Path(block.page).stem)
        for folder in ("graphs", "tests"):  # what the pages' commands name by relative path
            (tmp / folder).symlink_to(ROOT / folder, target_is_directory=True)
    return workdirs[block.page]


def first_sessions(sample: dict, sessions: int = STAND_IN_SESSIONS) -> dict:
    """A LoCoMo conversation cut to its first sessions, with the questions whose evidence all lies in them."""
    kept = {f"D{n}" for n in range(1, sessions + 1)}
    conv = {
        k: v
        for k, v in sample["conversation"].items()
        if not k.startswith("session_") or int(k.split("_")[1]) <= sessions
    }
    qa = [q for q in sample["qa"] if q.get("evidence") and all(str(e).split(":")[0] in kept for e in q["evidence"])]
    return {**sample, "conversation": conv, "qa": qa}


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this environment's memcompile
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def logical_lines(code: str) -> list[str]:
    """bash lines with their backslash continuations joined."""
    return code.replace("\\\n", " ").splitlines()


def is_server_line(line: str, need: str) -> bool:
    words = [w for w in line.split() if not re.match(r"^[A-Z_]+=", w)]  # leading VAR=value assignments
    return " ".join(words).startswith(SERVERS[need][1])


@contextlib.contextmanager
def stand_ins(block: Block, workdir: Path, env: dict[str, str], request) -> Iterator[str]:
    """Start what the block needs; yields the block's code with the documented ports replaced."""
    code = block.code
    with contextlib.ExitStack() as stack:
        if "openai" in block.needs:
            from support.openai_server import FakeOpenAI

            server = stack.enter_context(FakeOpenAI())
            env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="docs-test-key")
        if "locomo" in block.needs and not (workdir / "locomo10.json").exists():
            if not LOCOMO.is_file():
                pytest.skip(f"needs locomo: the LoCoMo dev split is not at {LOCOMO}")
            samples = json.loads(LOCOMO.read_text())[:STAND_IN_SAMPLES]
            (workdir / "locomo10.json").write_text(json.dumps([first_sessions(sample) for sample in samples]))
        if "postgres" in block.needs:
            from support.pg_server import new_database

            database = new_database(request.getfixturevalue("postgres_url"))  # skips with the reason without one
            code = PG_URL.sub(database, code).replace("chroma.internal", "127.0.0.1")
        for need in (n for n in block.needs if n in SERVERS):
            documented, start, ready = SERVERS[need]
            port = free_port()
            code = re.sub(rf"\b{documented}\b", str(port), code)
            lines = logical_lines(code) if block.lang == "bash" else []
            own = [line for line in lines if is_server_line(line, need)]
            if own and own[0].rstrip().endswith("&"):  # the block starts, waits for and stops it: runs as written
                continue
            if own:  # the block starts the server itself: that line is the server
                code = "\n".join(line for line in lines if line not in own) + "\n"
                cmd = ["bash", "-c", own[0]]  # stopped with its process group
            elif need == "chroma-server":
                cmd = [
                    "chroma",
                    "run",
                    "--path",
                    str(workdir / "chroma-stand-in"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ]
            else:
                pytest.skip(f"needs {need}: the block does not start it and there is no stand-in")
            if block.lang == "bash":  # a server the block starts sees the variables it exports
                env.update(m.groups() for m in map(EXPORT.match, logical_lines(code)) if m)
            log = workdir / f"{need}-{block.line}.log"
            stack.enter_context(
                running(cmd, f"http://127.0.0.1:{port}{ready}", log, env=env, cwd=str(workdir), timeout=180)
            )
        yield code


@pytest.mark.slow
@pytest.mark.parametrize(
    "block",
    [pytest.param(b, id=b.id, marks=pytest.mark.xdist_group(b.page)) for b in BLOCKS if b.lang in RUNNABLE],
)
def test_docs_block_runs_as_written(block: Block, workdir: Path, request):
    missing = [n for n in block.needs if n not in STAND_INS]
    if missing:
        pytest.skip("; ".join(f"needs {n}: {SKIPPED.get(n, 'unknown need')}" for n in missing))
    env = base_env()
    with stand_ins(block, workdir, env, request) as code:
        script = workdir / f"block-{block.line}.{'py' if block.lang == 'python' else 'sh'}"
        script.write_text(code, encoding="utf-8")
        cmd = [sys.executable, script.name] if block.lang == "python" else ["bash", "-e", "-o", "pipefail", script.name]
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (
        f"{block.page} line {block.line}:\n{code}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
