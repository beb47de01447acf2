"""A local Chroma directory shared safely by several processes.

Chroma's PersistentClient is not process-safe: each process keeps its own in-memory HNSW index and persists it
over the other's, so two writers on one directory lose vectors (measured here: 40 of 2,020 gone from query
results even with the writes serialized, while `get` still listed them). So every write runs under an
exclusive file lock and first bumps a generation token; a process whose token is stale reopens its client
(which reloads the persisted index and replays Chroma's write log) before it reads or writes again.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # chromadb is imported by whoever makes the client
    from chromadb.api import ClientAPI

log = logging.getLogger(__name__)
_SHARED: dict[str, LocalChroma] = {}
_SHARED_LOCK = threading.Lock()


class LocalChroma:
    """The one client of this process for a Chroma directory; `epoch` changes on every reopen and drop."""

    scrubs = True

    def __init__(self, chroma_dir: Path, lock_dir: Path, make_client: Callable[[], ClientAPI]):
        lock_dir.mkdir(parents=True, exist_ok=True)
        self.chroma_dir = chroma_dir
        self._lock_path = lock_dir / "chroma.lock"
        self._gen_path = lock_dir / "chroma.generation"
        self._make = make_client
        self._mutex = threading.RLock()  # a reopen must never run under another thread's operation
        self._depth = 0
        self.epoch = 0
        with self._file_lock(fcntl.LOCK_EX):  # a new directory gets Chroma's schema written once
            self.generation = self._read_generation()
            self.client = make_client()

    @classmethod
    def shared(cls, chroma_dir: Path, lock_dir: Path, make_client: Callable[[Path], ClientAPI]) -> LocalChroma:
        """One instance per directory and process: Chroma itself caches one system per path."""
        key = str(chroma_dir.resolve())
        with _SHARED_LOCK:
            local = _SHARED.get(key)
            if local is None:
                local = _SHARED[key] = cls(chroma_dir, lock_dir, lambda: make_client(chroma_dir))
            return local

    def damaged(self) -> bool:
        try:
            conn = sqlite3.connect(self.chroma_dir / "chroma.sqlite3", timeout=30)
            try:
                result: str = conn.execute("PRAGMA quick_check").fetchone()[0]
                return result != "ok"
            finally:
                conn.close()
        except sqlite3.Error:
            return True

    def quarantine(self) -> str:
        with self._mutex, self._file_lock(fcntl.LOCK_EX):
            with contextlib.suppress(Exception):  # a damaged client may fail to close cleanly
                self.client.close()  # type: ignore[attr-defined]  # typed ClientAPI, which lacks its Client's close()
            aside = self.chroma_dir.with_name(f"{self.chroma_dir.name}.damaged-{uuid.uuid4().hex[:8]}")
            os.replace(self.chroma_dir, aside)
            forget_chroma_system(self.chroma_dir)
            self.client = self._make()
            self._bump_generation()  # every other process reopens on the new directory
            self.epoch += 1
            return str(aside)

    def _read_generation(self) -> str:
        try:
            return self._gen_path.read_text()
        except FileNotFoundError:
            return ""

    def _bump_generation(self) -> None:
        token = uuid.uuid4().hex
        tmp = self._gen_path.with_name(f"{self._gen_path.name}.{os.getpid()}.tmp")
        tmp.write_text(token)
        os.replace(tmp, self._gen_path)  # readers see the old or the new token, never half of one
        self.generation = token

    def dropped(self) -> None:
        """A collection was deleted: handles cached by every ChromaVectors of this process are re-fetched."""
        self.epoch += 1

    @contextlib.contextmanager
    def _file_lock(self, mode: int) -> Iterator[None]:
        with open(self._lock_path, "a+") as fh:
            fcntl.flock(fh, mode)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _refresh(self) -> None:
        if self._read_generation() != self.generation:
            self.client.close()  # type: ignore[attr-defined]  # typed ClientAPI, which lacks its Client's close()
            self.client = self._make()
            self.generation = self._read_generation()
            self.epoch += 1

    def scrub(self) -> None:
        """Remove what Chroma leaves on disk of dropped collections: their index directories and the freed pages
        of its SQLite file, which still hold the vectors. Call inside `access(write=True)`."""
        try:
            conn = sqlite3.connect(self.chroma_dir / "chroma.sqlite3", timeout=30)
            try:
                live = {r[0] for r in conn.execute("SELECT id FROM segments")}
                for d in self.chroma_dir.iterdir():
                    if d.is_dir() and _is_uuid(d.name) and d.name not in live:
                        shutil.rmtree(d, ignore_errors=True)
                conn.execute("VACUUM")
            finally:
                conn.close()
        except sqlite3.Error as exc:  # e.g. another Chroma schema: the vectors are deleted, only not scrubbed
            log.warning("could not scrub the Chroma directory (%s); deleted vectors may remain on disk", exc)

    @contextlib.contextmanager
    def access(self, write: bool) -> Iterator[ClientAPI]:
        """The client, current with every other process; a write holds the directory's lock throughout."""
        with self._mutex:
            if self._depth:  # nested in an operation of this thread that already holds what it needs
                yield self.client
                return
            self._depth += 1
            try:
                with self._file_lock(fcntl.LOCK_EX if write else fcntl.LOCK_SH):
                    self._refresh()
                    if write:
                        self._bump_generation()  # before the write: a crash mid-write still marks others stale
                    yield self.client
            finally:
                self._depth -= 1


def _is_uuid(name: str) -> bool:
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True


class DirectChroma:
    """An in-memory client or a Chroma server: one owner or the server's own locking, nothing to coordinate."""

    epoch = 0
    scrubs = False  # a server's disk is out of reach; memory goes with the process

    def scrub(self) -> None:
        pass

    def damaged(self) -> bool:
        return False

    def quarantine(self) -> None:
        return None

    def dropped(self) -> None:
        self.epoch += 1

    def __init__(self, client: ClientAPI):
        self.client = client

    @contextlib.contextmanager
    def access(self, write: bool) -> Iterator[ClientAPI]:
        yield self.client


class UnavailableChroma:
    """A local Chroma directory that could not even be opened: every access fails with the reason (callers turn it
    into VectorStoreError), and `memcompile repair` can move it aside."""

    epoch = 0
    scrubs = False

    def __init__(self, chroma_dir: Path, error: BaseException):
        self.chroma_dir = chroma_dir
        self.error = error

    @contextlib.contextmanager
    def access(self, write: bool) -> Iterator[ClientAPI]:
        raise self.error
        yield  # a generator, as the other access() methods

    def damaged(self) -> bool:
        return True

    def quarantine(self) -> str:
        aside = self.chroma_dir.with_name(f"{self.chroma_dir.name}.damaged-{uuid.uuid4().hex[:8]}")
        os.replace(self.chroma_dir, aside)
        forget_chroma_system(self.chroma_dir)
        return str(aside)

    def dropped(self) -> None:
        pass

    def scrub(self) -> None:
        pass


def forget_chroma_system(chroma_dir: Path) -> None:
    """Chroma caches one system per directory for the whole process, a broken one included (a client that failed
    to open leaves it half started): a directory made anew must get a new one."""
    from chromadb.api.shared_system_client import SharedSystemClient

    system = SharedSystemClient._identifier_to_system.pop(str(chroma_dir), None)
    SharedSystemClient._identifier_to_refcount.pop(str(chroma_dir), None)
    if system is not None:
        with contextlib.suppress(Exception):
            system.stop()
