"""Host: one memory in this process. It owns what changes while the memory runs (its users' states, runtime/cache.py,
and the threads writers embed on) around the engine, which is fixed at open (runtime/engine.py)."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import MemCompileConfig
from ..settings import cache_root
from ..store.llm_file import LLMStore
from ..store.protocols import RecordsStore
from .cache import IndexCache
from .engine import Engine, build_engine
from .snapshot_file import SnapshotFiles

if TYPE_CHECKING:
    from ..llm.calls import LLMClient


class Host:
    def __init__(self, engine: Engine, cache: IndexCache):
        self.engine = engine
        self.cache = cache
        self._background: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def background(self) -> ThreadPoolExecutor:
        """Threads the writers embed on (one batch in flight per writer; a job started ahead holds its thread until
        its writer commits or drops the batch): kept for the memory's life, so a one-turn add starts no thread."""
        with self._lock:
            if self._background is None:
                self._background = ThreadPoolExecutor(4, thread_name_prefix="memcompile-ingest-embed")
            return self._background

    def settle(self, user_id: str) -> None:
        """Waits until vectors the user's last unit of work left pending are stored (see UserState.settle)."""
        state = self.cache.state(user_id)
        if state is not None:
            state.settle()

    def stats(self, user_id: str) -> dict[str, Any]:
        self.settle(user_id)  # the vectors counted include the last add's
        return self.engine.stats(user_id)

    def llm_client(self, model: Any, user_id: str) -> LLMClient:
        with self._lock:
            if self.engine.llm_store is None:  # made on first use; the engine is fixed, so its successor gets it
                self.engine = replace(self.engine, llm_store=LLMStore(self.engine.path))
                self.cache.engine = self.engine
            store = self.engine.llm_store
        assert store is not None
        return store.client(model, self.engine.config, user_id)

    def close(self) -> None:
        self.cache.reembeds.close()  # a re-embed job cut short here is resumed by the next writer or repair
        if self._background is not None:
            self._background.shutdown(wait=True)
        self.cache.persist_all()  # the next process starts from the snapshot files
        self.engine.close()


def open_host(path: Path | None, config: MemCompileConfig, *, cache_size: int, **engine: Any) -> Host:
    """The memory's engine (build_engine takes the other keywords; cache_size bounds its loaded vector indexes too)
    and its cache, with the snapshot files kept in the store directory or, for records in PostgreSQL, this machine's
    cache; swept once now."""
    from ..store.open import records_url_from

    built = build_engine(path, config, open_indexes=cache_size, **engine)
    records = built.records
    files = None
    if path is not None or records_url_from(engine["records_url"]):  # in memory: nothing of it goes to disk
        # snapshot files are signed with a key derived from the store's id and a secret kept with the records
        key = hashlib.sha256(f"{records.store_id()}:{records.secret()}".encode()).digest()
        levels = 1 if path is not None else 2  # a machine's cache of stores: the folder naming them is private too
        home = records.home() if path is None else None
        files = SnapshotFiles(
            snapshot_folder(path, records), key, built.config, built.embedding_id, records.digest_at, levels, home
        )
    host = Host(built, IndexCache(built, files, cache_size))
    # files the records no longer back (a forget, a restore, elsewhere), of earlier formats, of failed writes; and
    # again while the memory runs (IndexCache.sweep_when_due)
    host.cache.sweep()
    return host


def snapshot_folder(path: Path | None, records: RecordsStore) -> Path:
    """Where index snapshot files go: in the store directory, or for a store with no directory (PostgreSQL records)
    in this machine's cache, per store."""
    if path is not None:
        return path / "snapshots"
    return cache_root() / "snapshots" / records.store_id()
