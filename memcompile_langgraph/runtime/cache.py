"""Published index snapshots, one per user, in a bounded LRU map.

A published snapshot is immutable (readers may be inside it at any time). `snapshot(user)` checks the records'
head (version, epoch and digest chain: store/protocols.py) with one indexed read and, when the store moved on,
builds the next snapshot under that user's load lock only: from the cached one plus the newer records when the
records still hold exactly its packets (same epoch, same digest at its newest packet), else from the persisted
snapshot file plus the newer records (checked the same way), else from all records. A user the records no longer
hold leaves nothing behind in this process: its cached snapshot and its files here go, at its next touch or at the
periodic sweep (a user forgotten on another machine and never asked for here again). Lock order: store/locks.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext

import numpy as np

from ..index.user import UserIndex
from ..process import gc_paused, release_free_memory
from ..store.protocols import Head, VectorStoreError
from .consistency import BUSY, FOR_WRITER, reconcile
from .engine import Engine
from .snapshot_file import SnapshotFiles

log = logging.getLogger(__name__)
PERSIST_EVERY = 2048  # records a persisted snapshot may lag behind before a writer saves a new one
# seconds between sweeps of a running worker (one at open): how long a user forgotten on another machine may stay in
# this worker's files and cache when nobody asks for it here. A sweep reads each file's header and its user's head
# in the records, on the thread of the call that runs it: rare enough that a folder of many users costs that call
# alone, every quarter of an hour.
SWEEP_EVERY = 15 * 60


class _LoadLock:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0  # threads holding or waiting for it (under the map lock)


class IndexCache:
    def __init__(
        self,
        engine: Engine,
        files: SnapshotFiles | None,
        capacity: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.engine = engine
        self.files = files
        self.capacity = max(1, capacity)
        self._published: OrderedDict[str, UserIndex] = OrderedDict()
        self._persisted: dict[str, int] = {}  # packets in the newest snapshot file written or read, per user
        self._map_lock = threading.Lock()
        self._load_locks: dict[str, _LoadLock] = {}
        self.repair_pending: set[str] = set()  # users whose vectors a reader could not repair: their next writer does
        self._retry: set[str] = set()  # users whose repair met a busy writer: the next read tries again
        self.clock = clock
        self._swept = clock()  # build_engine swept when the store opened
        self._sweeping = threading.Lock()

    def __len__(self) -> int:
        return len(self._published)

    def _cached(self, user_id: str) -> UserIndex | None:
        with self._map_lock:
            index = self._published.get(user_id)
            if index is not None:
                self._published.move_to_end(user_id)
            return index

    def snapshot(self, user_id: str) -> UserIndex:
        """The newest published snapshot of the user's records (loaded or brought up to date when needed)."""
        self.sweep_when_due()
        head = self.engine.records.head(user_id)
        index = self._cached(user_id)
        if index is not None and head_of(index) == head and user_id not in self._retry:
            return index
        with self._load_lock(user_id):
            head = self.engine.records.head(user_id)
            index = self._cached(user_id)  # another thread may have loaded it meanwhile
            if index is None or head_of(index) != head:
                index = self._load(user_id, index, head)
            elif user_id in self._retry:
                index = index.fork()  # a published snapshot is never changed: the repair gets its own version
                self._repair(index)
            else:
                return index
            if index.packets or index.version:  # ids nobody stored anything for are not kept around
                self.publish(index)
            return index

    @contextmanager
    def _load_lock(self, user_id: str) -> Iterator[None]:
        """The user's load lock; an entry lives only while someone waits for or holds it (ids callers invent do not
        accumulate)."""
        with self._map_lock:
            entry = self._load_locks.setdefault(user_id, _LoadLock())
            entry.holders += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._map_lock:
                entry.holders -= 1
                if not entry.holders:
                    del self._load_locks[user_id]

    def _repair(self, index: UserIndex, read: dict[str, str | None] | None = None) -> None:
        outcome = reconcile(self.engine, index, writer=self.engine.vectors_per_process, read=read)
        self._retry.discard(index.user_id)
        if outcome == BUSY:
            self._retry.add(index.user_id)
        elif outcome == FOR_WRITER:
            self.repair_pending.add(index.user_id)

    def sweep_when_due(self) -> None:
        """The periodic sweep, run by the first ordinary call (a query, a write) once SWEEP_EVERY has passed; other
        callers meanwhile go on without it. No thread of its own: a worker nobody calls holds nothing it did not
        hold at its last call, and its next call sweeps first."""
        if self.clock() - self._swept < SWEEP_EVERY or not self._sweeping.acquire(blocking=False):
            return
        try:
            if self.clock() - self._swept >= SWEEP_EVERY:  # not swept by the caller that just let go of the lock
                self._swept = self.clock()  # before the sweep: one that fails is not retried by every call
                self.sweep()
        finally:
            self._sweeping.release()

    def sweep(self) -> int:
        """Drops cached snapshots of users the records no longer hold and removes the snapshot files they no longer
        back (a forget, a restore elsewhere); returns how many files were removed."""
        with self._map_lock:
            cached = list(self._published)
        for user_id in cached:
            if not self.engine.records.head(user_id).version:
                self._drop(user_id)
        return self.files.sweep(self.engine.records.head) if self.files is not None else 0

    def publish(self, index: UserIndex) -> None:
        """Makes `index` the user's snapshot unless a newer one is published already (versions only grow)."""
        with self._map_lock:
            current = self._published.get(index.user_id)
            if current is None or current.version <= index.version:
                self._published[index.user_id] = index
                self._published.move_to_end(index.user_id)
            while len(self._published) > self.capacity:
                self._published.popitem(last=False)

    def invalidate(self, user_id: str) -> None:
        self._drop(user_id)
        if self.files is not None:
            self.files.remove(user_id)

    def _drop(self, user_id: str) -> None:
        with self._map_lock:
            self._published.pop(user_id, None)
        self._persisted.pop(user_id, None)
        self._retry.discard(user_id)
        self.repair_pending.discard(user_id)

    def _extends(self, index: UserIndex, head: Head) -> bool:
        """The records hold exactly `index`'s packets and more: same epoch, an older version, and the records' digest
        at its newest packet is its own (a restore or a clone that went past it has another)."""
        return (
            index.epoch == head.epoch
            and index.version < head.version
            and self.engine.records.digest_at(index.user_id, index.last_seqs[0]) == index.digest
        )

    def _load(self, user_id: str, cached: UserIndex | None, head: Head) -> UserIndex:
        version, epoch, _ = head
        if not version:  # the user is gone from the records (a forget, maybe on another machine): so is all here
            self._drop(user_id)
            if self.files is not None:
                self.files.discard(user_id)
            cached = None
        base, tail, forked = None, {}, False
        if cached is not None and self._extends(cached, head):
            base, forked = cached.fork(), True  # published: readers may be inside it
        else:
            if cached is not None and cached.version >= version:
                with self._map_lock:  # the records went back (a restore): publish() would keep the "newer" one
                    self._published.pop(user_id, None)
            if self.files is not None and version:
                template = UserIndex(user_id, self.engine.config)
                base = self.files.read(user_id, head, template)
                if base is not None:
                    self._persisted[user_id] = len(base.packets)
                    if base.version < version:
                        tail = self.files.read_tail(user_id, head, template)
        try:
            return self._fill(user_id, base, epoch, tail)
        finally:
            if not forked:  # what the file's read or the replay freed goes back now: a single write never trims
                release_free_memory()

    def _fill(self, user_id: str, base: UserIndex | None, epoch: int, tail: dict[str, np.ndarray]) -> UserIndex:
        """`base` (a fork, a snapshot file's index, or None: a rebuild) extended by the records after it, with its
        vectors read and checked; a rebuild is saved to its snapshot file."""
        index = base if base is not None else UserIndex(user_id, self.engine.config)
        with gc_paused() if base is None else nullcontext():  # a rebuild: ~50 objects per turn
            loaded = self.engine.records.load(user_id, after=index.last_seqs)
            index.extend(loaded.packets, loaded.descriptors)
        index.version, index.epoch, index.digest = loaded.version, epoch, loaded.digest
        try:
            read = self._read_vectors(index, [p.packet_id for p in loaded.packets], tail)
            # a full load checks the vectors (also of a user with no records: a forget interrupted); a load from a
            # snapshot repairs the ones its newer records lack (a crash before they were stored)
            if base is None or self._lacks_vectors(index):
                self._repair(index, read)
        except VectorStoreError as exc:  # the lexical channels still answer; the dense one sits out (dense_node)
            self.engine.warn_once(f"vectors:{user_id}", f"dense channel off for user {user_id!r}: {exc}")
            return index  # not saved: a snapshot file without its vectors would hide them once repaired
        if base is None and index.packets:
            self.persist(index)
        return index

    def _lacks_vectors(self, index: UserIndex) -> bool:
        engine = self.engine
        return (
            engine.embeddings is not None
            and len(index.vectors) < len(index.packets)
            and not engine.foreign_vectors(index.user_id)
        )

    def _read_vectors(
        self, index: UserIndex, packet_ids: list[str], tail: dict[str, np.ndarray] | None = None
    ) -> dict[str, str | None] | None:
        """Vectors of newly loaded packets: from the snapshot's tail file where it has them, else the vector store.
        Returns the sources of all the user's vectors when it read them all (an index with none yet), else None."""
        engine = self.engine
        if engine.embeddings is None or not packet_ids or engine.foreign_vectors(index.user_id):
            return None
        if tail:
            found = [p for p in packet_ids if p in tail]
            index.vectors.set(found, [tail[p] for p in found])
            packet_ids = [p for p in packet_ids if p not in tail]
            if not packet_ids:
                return None
        whole = not index.vectors
        ids, vectors, sources = engine.vectors.vectors(index.user_id, None if whole else packet_ids, sources=True)
        known = [k for k, i in enumerate(ids) if i in index.packets]
        # a vector built from other content than its packet's document (a row edited by hand) is left out: the
        # full load's reconcile makes it again
        ok = engine.built_from_current(index, [ids[k] for k in known], [sources[k] for k in known])
        known = [k for k, good in zip(known, ok) if good]
        index.vectors.set([ids[k] for k in known], [vectors[k] for k in known])
        return dict(zip(ids, sources)) if whole else None

    def persist_all(self) -> None:
        """Saves every cached snapshot whose file lags behind by 1/64 of its packets or more (at close: the next
        process starts warm). For a smaller lag only its vectors are saved, beside the file: the next process
        replays its records instead of this one writing the whole file again (one turn added to 100k: 350 MB, ~20 s)."""
        with self._map_lock:
            cached = list(self._published.values())
        for index in cached:
            saved = self._persisted.get(index.user_id, 0)
            if len(index.packets) - saved >= max(1, len(index.packets) // 64):
                self.persist(index, force=True)
            elif len(index.packets) > saved:
                self.persist_tail(index, index.packet_order[saved:])

    def persist(self, index: UserIndex, force: bool = False) -> None:
        """Saves the snapshot file when it lags by PERSIST_EVERY records (or with force)."""
        if self.files is None or not index.packets:
            return
        if force or len(index.packets) - self._persisted.get(index.user_id, 0) >= PERSIST_EVERY:
            if self._while_current(index, self.files.write):
                self._persisted[index.user_id] = len(index.packets)

    def persist_tail(self, index: UserIndex, packet_ids: Sequence[str]) -> None:
        """Saves the vectors of those packets beside the snapshot file (the ones it lacks)."""
        files = self.files
        if files is not None and self.engine.embeddings is not None:
            self._while_current(index, lambda current: files.write_tail(current, packet_ids))

    def _while_current(self, index: UserIndex, write: Callable[[UserIndex], None]) -> bool:
        """write(index) under the user's writer lock (tried, never waited for: see locks.py) and only while the
        records are still the ones the snapshot shows, so no file can outlive a forget or a delete that ran
        meanwhile. Best effort: a failure is logged, and the next cold start rebuilds from the records (or reads the
        vectors from the vector store)."""
        records = self.engine.records
        with records.write_lock(index.user_id, blocking=False) as held:
            if not held or records.head(index.user_id) != head_of(index):
                return False
            try:
                write(index)
                return True
            except OSError as exc:
                log.warning("could not save the index snapshot of %r: %s", index.user_id, exc)
                return False


def head_of(index: UserIndex) -> Head:
    """The records' head `index` was built at."""
    return Head(index.version, index.epoch, index.digest)
