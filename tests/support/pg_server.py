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
import uuid
from collections.abc import Iterator
from pathlib import Path

from support.servers import free_port, shared

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
def shared_postgres(state_dir: Path) -> Iterator[str]:
    """One cluster for every process of a test run (support.servers.shared); each test keeps to a schema or
    database of its own."""
    with shared(state_dir, "postgres", start_cluster, stop_cluster) as cluster:
        yield cluster["url"]


def new_database(server_url: str) -> str:
    """The URL of a new empty database on the server (for code that uses a database's default schema)."""
    import psycopg

    name = f"d_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server_url.rsplit('/', 1)[0]}/{name}"


def start_cluster() -> dict[str, str]:
    """A new cluster in a temporary folder on a free loopback port: {"url": its `postgres` database, "root"}."""
    return _cluster("memcompile-pg-", ["initdb", "-A", "trust", "-U", USER, "-E", "UTF8", "--no-sync"])


def copy_cluster(cluster: dict[str, str]) -> dict[str, str]:
    """A physical copy of a running cluster (pg_basebackup, as a standby or a staging copy is made), started on a
    port of its own: same system identifier, databases and oids. {"url", "root"} as start_cluster gives."""
    return _cluster("memcompile-pg-copy-", ["pg_basebackup", "-d", cluster["url"], "-X", "stream"])


def _cluster(prefix: str, make: list[str]) -> dict[str, str]:
    """A cluster's data folder made by `make` (a command of BINDIR, given -D), then started on a free port."""
    root = Path(tempfile.mkdtemp(prefix=prefix))  # under /tmp: the postgres user can reach it
    data, log, port = root / "data", root / "server.log", free_port()
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
    try:
        subprocess.run(
            _as_owner([str(BINDIR / make[0]), "-D", str(data), *make[1:]]), check=True, capture_output=True, timeout=120
        )
        opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
        subprocess.run(
            _as_owner([str(BINDIR / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "start"]),
            check=True,
            capture_output=True,
            timeout=120,
        )
        url = f"postgresql://{USER}@127.0.0.1:{port}/postgres"
        _wait(url, log)
    except BaseException:
        stop_cluster({"root": str(root)})
        raise
    return {"url": url, "root": str(root)}


def stop_cluster(cluster: dict[str, str]) -> None:
    root = Path(cluster["root"])
    if (root / "data" / "postmaster.pid").exists():
        subprocess.run(
            _as_owner([str(BINDIR / "pg_ctl"), "-D", str(root / "data"), "-m", "fast", "-w", "stop"]),
            check=False,
            capture_output=True,
            timeout=120,
        )
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
