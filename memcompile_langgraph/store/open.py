"""Which stores a memory uses: records in SQLite in the store directory (the default) or PostgreSQL by URL; vectors
in Chroma (the directory's own, or a server), opened at their first use."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..extras import missing_extra
from ..settings import DEPLOYMENT_ENV, RECORDS_URL, deployment, resolved
from .chroma_server import server_timeout
from .protocols import RecordsStore, VectorsStore, VectorStoreError

log = logging.getLogger(__name__)
_warned: set[tuple[str, str, str]] = set()  # (records, server, deployment) said apart in this process
_warned_lock = threading.Lock()


def records_url_from(records_url: str | None) -> str | None:
    """The URL given, else $MEMCOMPILE_RECORDS_URL (settings.py); an empty string means SQLite in the store
    directory whatever the environment says."""
    return resolved(RECORDS_URL, records_url)


def open_records(path: str | Path | None, records_url: str | None = None, create: bool = True) -> RecordsStore:
    url = records_url_from(records_url)
    if url:
        try:
            from .postgres import PostgresRecords  # psycopg is imported only by memories that use PostgreSQL
        except ImportError as exc:
            missing = missing_extra(exc, "records_url=postgresql://...")
            if missing is None:
                raise
            raise missing from None
        return PostgresRecords(url, create=create)
    from .sqlite import SqliteRecords

    return SqliteRecords(path, create=create)


def open_vectors(
    path: str | Path | None, records: RecordsStore, chroma_url: str | None = None, open_indexes: int = 64
) -> LazyVectors:
    """The store's vectors (a local Chroma keeps at most `open_indexes` users' indexes loaded); on a shared Chroma server, collections are named per store so two stores never meet, and
    per deployment where one store's records are reached under a second one (a physical copy of its database)."""
    namespace = None
    if chroma_url:
        apart = records.apart(deployment())
        namespace = namespace_of(records.store_id(), apart[0] if apart else None)
        if apart and _first_time((records.where, chroma_url, apart[0])):  # `stats` and every open would repeat it
            log.warning(
                "%s was first opened as deployment %r, now as %r: its vectors on %s are kept apart from that one's "
                "(a copy of the database; if it is the same database under a new address, set %s=%s on every "
                "worker)",
                records.where,
                apart[1],
                apart[0],
                chroma_url,
                DEPLOYMENT_ENV,
                apart[1],
            )

    def connect() -> VectorsStore:
        from .chroma import ChromaVectors

        return ChromaVectors(path, url=chroma_url, namespace=namespace, open_indexes=open_indexes)

    return LazyVectors(connect)


def _first_time(key: tuple[str, str, str]) -> bool:
    with _warned_lock:
        first = key not in _warned
        _warned.add(key)
    return first


def namespace_of(store_id: str, apart: str | None = None) -> str:
    """The prefix of a store's collection names on a shared Chroma server (apart: a later deployment's name)."""
    if apart is None:
        return f"mc{store_id[:12]}"
    return f"mc{store_id[:12]}d{hashlib.sha256(apart.encode()).hexdigest()[:8]}"


class LazyVectors:
    """A ChromaVectors opened at its first use, once, whichever thread asks first: importing chromadb and opening
    its client is slow, and a query answered from a current snapshot file (vectors included) never needs it. A
    failed open (a server that does not answer) raises to that caller, and to every caller within the
    server's deadline after it without asking again (each would wait that long); the next one tries again."""

    def __init__(self, connect: Callable[[], VectorsStore]):
        self._connect = connect
        self._store: VectorsStore | None = None
        self._lock = threading.Lock()
        self._failed: tuple[float, VectorStoreError] | None = None  # (until when, why) after a failed open

    @property
    def opened(self) -> bool:
        return self._store is not None

    def loaded(self, user_id: str) -> bool:
        """Whether the store is open and has the user's vectors loaded (asking never opens it)."""
        return self._store is not None and self._store.loaded(user_id)

    def store(self) -> VectorsStore:
        if self._store is None:
            with self._lock:
                if self._failed is not None and time.monotonic() < self._failed[0]:
                    raise self._failed[1]
                if self._store is None:
                    try:
                        self._store = self._connect()
                    except VectorStoreError as exc:
                        self._failed = (time.monotonic() + server_timeout(), exc)
                        raise
        return self._store

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_connect", "_store", "_lock", "_failed"):  # copy/pickle probes, half-made
            raise AttributeError(name)
        return getattr(self.store(), name)
