"""Where a memory keeps its data, resolved the same way on every surface (the Python API, every CLI command, the MCP
server command, the graphs `langgraph dev` serves): the value given (an argument of MemCompile, a command-line
flag), else its MEMCOMPILE_* environment variable, else the surface's default. An empty string given means "none,
whatever the environment says" (records_url="" keeps the records in SQLite). docs/configuration.md lists them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    env: str
    flag: str
    default: str  # what none given means, for the docs and --help


STORE = Setting("MEMCOMPILE_STORE", "--store", "the CLI asks for one; served graphs ./.memcompile; API in memory")
RECORDS_URL = Setting("MEMCOMPILE_RECORDS_URL", "--records-url", "SQLite in the store directory")
CHROMA_URL = Setting("MEMCOMPILE_CHROMA_URL", "--chroma-url", "Chroma in the store directory")
SETTINGS = (STORE, RECORDS_URL, CHROMA_URL)
DEPLOYMENT_ENV = "MEMCOMPILE_DEPLOYMENT"  # one name per deployment of a database (its copies take others)


def resolved(setting: Setting, given: str | Path | None) -> str | None:
    """The value given, else the environment's; None when neither names one (or the one given is empty)."""
    if given is None:
        given = os.environ.get(setting.env)
    return str(given) if given not in (None, "") else None


@dataclass(frozen=True)
class StoreSettings:
    path: str | None
    records_url: str | None
    chroma_url: str | None

    @property
    def servers_only(self) -> bool:
        """Records and vectors both on servers: no local directory is needed."""
        return bool(self.records_url and self.chroma_url)


def store_settings(
    path: str | Path | None = None, records_url: str | None = None, chroma_url: str | None = None
) -> StoreSettings:
    return StoreSettings(resolved(STORE, path), resolved(RECORDS_URL, records_url), resolved(CHROMA_URL, chroma_url))


def deployment() -> str | None:
    """$MEMCOMPILE_DEPLOYMENT: the name this process's deployment of the records goes by (RecordsStore.apart)."""
    return os.environ.get(DEPLOYMENT_ENV, "").strip() or None


def vectors_per_process(settings: StoreSettings) -> str | None:
    """The line that says so when records are shared (PostgreSQL) but the vectors are not (no Chroma server)."""
    if not settings.records_url or settings.chroma_url:
        return None
    return (
        "records in PostgreSQL but no Chroma server: each process keeps the vectors in its own Chroma and embeds "
        f"again what other workers wrote (set ${CHROMA_URL.env} or chroma_url when several workers share the records)"
    )


def cache_root() -> Path:
    """The machine-wide cache of every store: the int8 model built from the shipped one, and the snapshot files of
    stores whose records are on a server ($MEMCOMPILE_CACHE_DIR, else ~/.cache/memcompile)."""
    env = os.environ.get("MEMCOMPILE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "memcompile"


def env_help(setting: Setting) -> str:
    return f"default: ${setting.env}, else {setting.default}"


__all__ = [
    "deployment",
    "CHROMA_URL",
    "cache_root",
    "vectors_per_process",
    "RECORDS_URL",
    "SETTINGS",
    "STORE",
    "Setting",
    "StoreSettings",
    "resolved",
    "store_settings",
]
