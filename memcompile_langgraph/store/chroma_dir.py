"""A local Chroma directory shared safely by several processes.

Chroma's PersistentClient is not process-safe: each process keeps its own in-memory HNSW index and persists it
over the other's, so two writers on one directory lose vectors: queries miss them even with the writes serialized,
while `get` still lists them. So every write runs under an exclusive file lock and first bumps a generation token;
a process whose token is stale reopens its client (which reloads the persisted index and replays Chroma's write log)
before it reads or writes again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .layout import PRIVATE_FILE, private_folder, tighten
from .locks import FileLock

if TYPE_CHECKING:  # chromadb is imported by whoever makes the client
    from chromadb.api import ClientAPI

log = logging.getLogger(__name__)
_SHARED: dict[str, LocalChroma] = {}
_SHARED_LOCK = threading.Lock()


class LocalChroma:
    """The one client of this process for a Chroma directory; `epoch` changes on every reopen and drop."""

    scrubs = True

    def __init__(self, chroma_dir: Path, lock_dir: Path, make_client: Callable[[], ClientAPI]):
        private_folder(lock_dir)
        private_folder(chroma_dir)  # what Chroma makes in it under the umask is out of others' reach from the start
        self.chroma_dir = chroma_dir
        self._lock = FileLock(lock_dir / "chroma.lock")
        self._gen_path = lock_dir / "chroma.generation"
        self._make = make_client
        self._mutex = threading.RLock()  # a reopen must never run under another thread's operation
        self._depth = 0
        self.epoch = 0
        self._seen: tuple[int, set[str]] = (-1, set())
        self._segments: dict[str, Path] = {}  # collection id -> its index folder
        self._stamps: dict[Path, tuple[int, int, int]] = {}  # index folder -> its _stamp when last scrubbed
        with self._lock.hold():  # a new directory gets Chroma's schema written once
            self.generation = self._read_generation()
            self.client = make_client()
            self._keep_private()

    @classmethod
    def shared(cls, chroma_dir: Path, lock_dir: Path, make_client: Callable[[Path], ClientAPI]) -> LocalChroma:
        """One instance per directory and process: Chroma itself caches one system per path. The path is made
        absolute first: Chroma keys its cache by the path as given, so a relative one opened again after a change of
        working directory would reach the first directory's system."""
        chroma_dir, lock_dir = chroma_dir.resolve(), lock_dir.resolve()
        key = str(chroma_dir)
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
        """Moves the directory aside (to `chroma.damaged-*`, where scrub finds it) and starts an empty one."""
        with self._mutex, self._lock.hold():
            with contextlib.suppress(Exception):  # a damaged client may fail to close cleanly
                self.client.close()  # type: ignore[attr-defined]  # typed ClientAPI, which lacks its Client's close()
            aside = self.chroma_dir.with_name(f"{self.chroma_dir.name}.damaged-{uuid.uuid4().hex[:8]}")
            os.replace(self.chroma_dir, aside)
            forget_chroma_system(self.chroma_dir)
            private_folder(self.chroma_dir)
            self._seen = (-1, set())
            self.client = self._make()
            self._keep_private()
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
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "w") as fh:
            fh.write(token)
        os.replace(tmp, self._gen_path)  # readers see the old or the new token, never half of one
        self.generation = token

    def dropped(self) -> None:
        """A collection was deleted: handles cached by every ChromaVectors of this process are re-fetched."""
        self.epoch += 1
        self._segments.clear()

    def _keep_private(self) -> None:
        """What Chroma made under the umask since the last look made private: its database, and each new index
        folder with its files (a new entry changes the folder's mtime, so a write that made none costs one stat).
        Call under the directory's exclusive lock."""
        mtime = os.stat(self.chroma_dir).st_mtime_ns
        if mtime == self._seen[0]:
            return
        known = self._seen[1]
        for entry in os.scandir(self.chroma_dir):
            if entry.name not in known:
                tighten(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    for inner in os.scandir(entry.path):
                        tighten(inner.path)
        self._seen = (mtime, {e.name for e in os.scandir(self.chroma_dir)})

    def _refresh(self) -> None:
        if self._read_generation() != self.generation:
            self.client.close()  # type: ignore[attr-defined]  # typed ClientAPI, which lacks its Client's close()
            self.client = self._make()
            self.generation = self._read_generation()
            self.epoch += 1

    def scrub(self) -> None:
        """Remove what Chroma leaves on disk of removed vectors: the index directories of dropped collections, the
        freed pages of its SQLite file, and in the live indexes, the slots of deleted vectors and the unused
        capacity (saved from uninitialized memory, which may hold any vector freed before, this process's heap
        reused); and the damaged directories `memcompile repair` moved aside. Call inside `access(write=True)`."""
        remove_damaged(self.chroma_dir)
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
            return
        for d in self.chroma_dir.iterdir():
            if d.name in live and (d / "header.bin").is_file():
                self._scrub_folder(d)

    def scrub_collection(self, collection_id: str) -> None:
        """After an operation on a collection: Chroma writes a whole index file anew from memory as malloc gave it
        when it makes the index, and also when it loads one it has not saved an element of yet (the first
        thousand are kept in its log), a read included. So a changed index file gets its unused capacity and
        deleted slots zeroed (one stat when unchanged). Call inside `access`: under a read, no writer saves meanwhile,
        and only bytes beyond the saved elements are zeroed."""
        folder = self._segments.get(collection_id)
        if folder is None:
            try:
                conn = sqlite3.connect(self.chroma_dir / "chroma.sqlite3", timeout=30)
                try:
                    row = conn.execute(
                        "SELECT id FROM segments WHERE collection=? AND scope='VECTOR'", (collection_id,)
                    ).fetchone()
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                log.warning("could not find the Chroma index of collection %s (%s)", collection_id, exc)
                return
            if row is None:
                return
            folder = self._segments[collection_id] = self.chroma_dir / row[0]
        try:
            stamp = _stamp(folder)
        except FileNotFoundError:
            return
        if self._stamps.get(folder) != stamp:
            self._scrub_folder(folder)

    def _scrub_folder(self, folder: Path) -> None:
        """Zeroes what the index files keep of removed vectors and makes the folder's files private: Chroma writes
        them under the umask whenever it saves (its id map, index_metadata.pickle, first at the thousandth vector)."""
        try:
            for entry in os.scandir(folder):
                tighten(entry.path)
            scrub_unused(folder)
            self._stamps[folder] = _stamp(folder)
        except (OSError, ValueError) as exc:
            log.warning("could not scrub the Chroma index %s (%s); deleted vectors may remain on disk", folder, exc)

    @contextlib.contextmanager
    def access(self, write: bool) -> Iterator[ClientAPI]:
        """The client, current with every other process; a write holds the directory's lock throughout."""
        with self._mutex:
            if self._depth:  # nested in an operation of this thread that already holds what it needs
                yield self.client
                return
            self._depth += 1
            try:
                with self._lock.hold(exclusive=write):
                    self._refresh()
                    if write:
                        self._bump_generation()  # before the write: a crash mid-write still marks others stale
                    yield self.client
                    if write:
                        self._keep_private()
            finally:
                self._depth -= 1


# the start of an HNSW index's header.bin (hnswlib as Chroma ships it): format version, then the level-0 offset,
# capacity, element count, bytes per element, label offset and vector offset of its data_level0.bin
_HNSW_HEADER = struct.Struct("<iQQQQQQ")
_HNSW_FORMAT = 1
_DELETED = 0x01  # in the third byte of an element's level-0 link count
_WIPE_STEP = 1 << 20


def scrub_unused(index_dir: Path) -> None:
    """Zeroes what an HNSW index's files hold beyond its vectors: the vector of every element marked deleted, and
    everything past the element count (capacity saved as malloc left it). Written in place: Chroma keeps the files
    open."""
    header = (index_dir / "header.bin").read_bytes()
    if len(header) < _HNSW_HEADER.size:
        raise ValueError("header.bin is too short")
    version, level0, _capacity, count, size, label, data = _HNSW_HEADER.unpack_from(header)
    if version != _HNSW_FORMAT or not 0 <= level0 < data <= label < size:
        raise ValueError(f"header.bin of an unknown HNSW format ({version})")
    with open(index_dir / "data_level0.bin", "r+b") as fh:
        fd = fh.fileno()
        used = min(count, os.fstat(fd).st_size // size)
        if used:
            elements = np.memmap(fh, dtype=np.uint8, mode="r", shape=(used, size))  # pages read, not copied
            deleted = np.flatnonzero(elements[:, level0 + 2] & _DELETED)
            for i in deleted[elements[deleted, data:label].any(axis=1)].tolist():
                os.pwrite(fd, bytes(label - data), i * size + data)
            del elements
        _zero_from(fd, count * size)
    with open(index_dir / "length.bin", "r+b") as fh:  # one float per element: its capacity is malloc's too
        _zero_from(fh.fileno(), count * 4)


def _zero_from(fd: int, start: int) -> None:
    """Zeroes the file from `start` to its end (writing only where a byte is not zero)."""
    end = os.fstat(fd).st_size
    for at in range(start, end, _WIPE_STEP):
        n = min(_WIPE_STEP, end - at)
        if not _zeros(os.pread(fd, n, at)):
            os.pwrite(fd, bytes(n), at)


def _zeros(block: bytes) -> bool:
    return block.count(0) == len(block)


def _stamp(folder: Path) -> tuple[int, int, int]:
    """What changes when Chroma saves an index: data_level0.bin's mtime and size, and the folder's mtime (a new
    file in it)."""
    data = os.stat(folder / "data_level0.bin")
    return data.st_mtime_ns, data.st_size, os.stat(folder).st_mtime_ns


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

    def scrub_collection(self, collection_id: str) -> None:
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

    def scrub_collection(self, collection_id: str) -> None:
        pass


def damaged_copies(chroma_dir: Path) -> list[Path]:
    """The directories `quarantine` moved a damaged Chroma directory to: the one place a copy of vectors is made."""
    return sorted(chroma_dir.parent.glob(f"{chroma_dir.name}.damaged-*"))


def remove_damaged(chroma_dir: Path) -> None:
    """Removes the damaged directories repair moved aside, whole: a damaged database cannot be trusted to take a
    delete, and the vectors in it were made again from the records by that repair. Each file is zeroed before it
    is unlinked, so its blocks do not keep the vectors either."""
    for copy in damaged_copies(chroma_dir):
        for root, _dirs, files in os.walk(copy):
            for name in files:
                with contextlib.suppress(OSError), open(os.path.join(root, name), "r+b") as fh:
                    _zero_from(fh.fileno(), 0)
        shutil.rmtree(copy, ignore_errors=True)
        if copy.exists():
            log.warning("could not remove %s (moved aside by repair); it may hold removed vectors", copy)


def forget_chroma_system(chroma_dir: Path) -> None:
    """Chroma caches one system per directory for the whole process, a broken one included (a client that failed
    to open leaves it half started): a directory made anew must get a new one."""
    from chromadb.api.shared_system_client import SharedSystemClient

    system = SharedSystemClient._identifier_to_system.pop(str(chroma_dir), None)
    SharedSystemClient._identifier_to_refcount.pop(str(chroma_dir), None)
    if system is not None:
        with contextlib.suppress(Exception):
            system.stop()
