"""A real PostgreSQL 15 for the tests: a fresh cluster in a temporary folder on a free loopback port, always stopped.

PostgreSQL refuses to run as root: as root the cluster belongs to the `postgres` user and its commands run through
`runuser`. Where the binaries (or that user) are missing, `missing()` says why and the tests skip with it."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from support.servers import free_port

BINDIR = Path(os.environ.get("MEMCOMPILE_PG_BINDIR", "/usr/lib/postgresql/15/bin"))
USER = "memcompile"  # the cluster's superuser, trusted on loopback only


def missing() -> str | None:
    """Why no server can be started here (None: it can)."""
    if not (BINDIR / "initdb").is_file() or not (BINDIR / "pg_ctl").is_file():
        return f"PostgreSQL server binaries not found in {BINDIR} (set MEMCOMPILE_PG_BINDIR)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """Yields the URL of a new cluster's `postgres` database."""
    root = Path(tempfile.mkdtemp(prefix="memcompile-pg-"))  # under /tmp: the postgres user can reach it
    data, log, port = root / "data", root / "server.log", free_port()
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
    try:
        subprocess.run(
            _as_owner([str(BINDIR / "initdb"), "-D", str(data), "-A", "trust", "-U", USER, "-E", "UTF8", "--no-sync"]),
            check=True,
            capture_output=True,
            timeout=120,
        )
        opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        subprocess.run(
            _as_owner([str(BINDIR / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "start"]),
            check=True,
            capture_output=True,
            timeout=120,
        )
        url = f"postgresql://{USER}@127.0.0.1:{port}/postgres"
        _wait(url, log)
        try:
            yield url
        finally:
            subprocess.run(
                _as_owner([str(BINDIR / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                check=False,
                capture_output=True,
                timeout=120,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _wait(url: str, log: Path, timeout: float = 60) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start:\n{log.read_text(errors='replace')[-3000:]}") from None
            time.sleep(0.2)
