"""The users' states (runtime/user_state.py: a published snapshot each, with its stamp), in a bounded LRU map.

A published snapshot is immutable (readers may be inside it at any time). `snapshot(user)` reads the records'
head (version, epoch and digest chain: store/protocols.py) with one indexed read; when its stamp is not the same,
it builds the next snapshot under that user's load lock only: from the cached one plus the newer records when the
records extend its stamp (they hold exactly its packets), else from the persisted snapshot file plus the newer
records (checked the same way), else from all records. A user the records no longer hold leaves nothing behind in
this process: its state and its files here go, at its next touch or at the
periodic sweep (a user forgotten on another machine and never asked for here again). Lock order: store/locks.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from functools import partial

import numpy as np

from ..index.user import UserIndex
from ..process import gc_paused, release_free_memory
from ..store.protocols import Head, VectorStoreError
from . import upgrade
from .consistency import reconcile
from .engine import Engine, bundles
from .snapshot_file import SnapshotFiles
from .user_state import Repair, Stamp, UserState

log = logging.getLogger(__name__)
PERSIST_EVERY = 2048  # records a persisted snapshot may lag behind before a writer saves a new one
# seconds between sweeps of a running worker (one at open): how long a user forgotten on another machine may stay in
# this worker's files and cache when nobody asks for it here. A sweep reads each file's header and its user's head
# in the records, on the thread of the call that runs it: rare enough that a folder of many users costs that call
# alone, every quarter of an hour.
SWEEP_EVERY = 15 * 60


class IndexCache:
    """An LRU map of UserStates, most recently used last: at most `capacity` of them (one a thread is loading, or
    whose vectors are still being stored, is kept until it is done)."""

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
        self.reembeds = upgrade.Jobs(self)  # the users whose vectors are being made again, off the write path
        self._states: OrderedDict[str, UserState] = OrderedDict()
        self._map_lock = threading.Lock()
        self.clock = clock
        self._swept = clock()  # the host swept when the store opened
        self._sweeping = threading.Lock()

    def __len__(self) -> int:
        with self._map_lock:
            return sum(state.published is not None for state in self._states.values())

    def state(self, user_id: str) -> UserState | None:
        """The user's state, when this process holds any (one dict read: atomic, no lock on a writer's path)."""
        return self._states.get(user_id)

    def _used(self, user_id: str) -> UserState | None:
        with self._map_lock:
            state = self._states.get(user_id)
            if state is not None:
                self._states.move_to_end(user_id)
            return state

    def snapshot(self, user_id: str) -> UserIndex:
        """The newest published snapshot of the user's records (loaded or brought up to date when needed)."""
        self.sweep_when_due()
        head = self.engine.records.head(user_id)
        state = self._used(user_id)
        index = state.fresh(head) if state is not None else None
        if index is not None:
            return index
        with self._loading(user_id) as state:
            head = self.engine.records.head(user_id)
            published = state.published  # another thread may have loaded it meanwhile
            if published is None or not published[1].same(head):
                index = self._load(state, published, head)
            elif state.repair is Repair.BUSY:
                index = published[0].fork()  # a published snapshot is never changed: the repair gets its own version
                self._repair(state, index)
            else:
                return published[0]
            if index.packets or index.version:  # ids nobody stored anything for are not kept around
                self.publish(index)
            return index

    @contextmanager
    def _loading(self, user_id: str) -> Iterator[UserState]:
        """The user's state with its load lock held; a state nobody published for lives only while someone waits for
        or holds its lock (ids callers invent do not accumulate)."""
        with self._map_lock:
            state = self._states.get(user_id)
            if state is None:
                state = self._states[user_id] = UserState(user_id)
            state.holders += 1
        try:
            with state.load_lock:
                yield state
        finally:
            with self._map_lock:
                state.holders -= 1
                if not state.busy() and state.published is None and self._states.get(user_id) is state:
                    del self._states[user_id]
                self._trim()

    def _repair(self, state: UserState, index: UserIndex, read: dict[str, str | None] | None = None) -> None:
        outcome = reconcile(self.engine, index, read=read)
        if outcome is Repair.FOR_JOB:
            self.reembeds.start(index.user_id)  # off the read and write paths, and resumed
        if state.repair is not Repair.FOR_JOB or outcome is Repair.DONE:  # the job still owes it otherwise
            state.repair = Repair.DONE if outcome is Repair.STALE else outcome  # stale: the next read loads anew

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
        """Drops the states of users the records no longer hold and removes the snapshot files they no longer back (a
        forget, a restore elsewhere); returns how many files were removed."""
        with self._map_lock:
            cached = list(self._states)
        for user_id in cached:
            if not self.engine.records.head(user_id).version:
                self._drop_state(user_id)
        return self.files.sweep(self.engine.records.head) if self.files is not None else 0

    def publish(self, index: UserIndex) -> UserState:
        """Makes `index` the user's snapshot unless a newer one is published already (versions only grow); returns the
        user's state."""
        with self._map_lock:
            state = self._states.get(index.user_id)
            if state is None:
                state = self._states[index.user_id] = UserState(index.user_id)
            current = state.index
            if current is None or current.version <= index.version:
                state.publish(index)
            self._states.move_to_end(index.user_id)
            self._trim()
            return state

    def _trim(self) -> None:
        """Evicts the least recently used published states beyond capacity, and states that hold nothing, but none
        still busy (under the map lock; one comparison while within capacity)."""
        if len(self._states) <= self.capacity:
            return
        idle = [(u, state) for u, state in self._states.items() if not state.busy()]
        for user_id, state in idle:
            if state.published is None:
                del self._states[user_id]
        published = sum(state.published is not None for state in self._states.values())
        for user_id, state in idle:
            if published <= self.capacity:
                return
            if state.published is not None:
                del self._states[user_id]
                published -= 1

    def drop(self, user_id: str) -> None:
        """Nothing derived of the user is kept, in memory or in snapshot files (the records make it again)."""
        self._drop_state(user_id)
        if self.files is not None:
            self.files.drop(user_id)

    def _drop_state(self, user_id: str) -> None:
        """Nothing derived of the user is kept: its state goes (one still busy keeps only its load lock and its
        pending vectors, whose job checks the records before it stores them)."""
        with self._map_lock:
            state = self._states.get(user_id)
            if state is not None and state.busy():
                state.published, state.persisted, state.repair = None, 0, Repair.DONE
            elif state is not None:
                del self._states[user_id]

    def _load(self, state: UserState, published: tuple[UserIndex, Stamp] | None, head: Head) -> UserIndex:
        user_id, version, epoch = state.user_id, head.version, head.epoch
        if not version:  # the user is gone from the records (a forget, maybe on another machine): so is all here
            self._drop_state(user_id)
            if self.files is not None:
                self.files.drop_build(user_id)
            published = None
        base, tail, forked, previous = None, {}, False, None
        if published is not None and published[1].extends(head, partial(self.engine.records.digest_at, user_id)):
            base, forked = published[0].fork(), True  # published: readers may be inside it
        else:
            if published is not None:  # the records do not back it (a restore went back past it): it goes, also
                with self._map_lock:  # when its version is newer, which publish() would otherwise keep
                    state.published = None
                previous = published[0]
            if self.files is not None and version:
                template = UserIndex(user_id, self.engine.config)
                base = self.files.read(user_id, head, template)
                if base is not None:
                    state.persisted = len(base.packets)
                    if base.version < version:
                        tail = self.files.read_tail(user_id, head, template)
        try:
            return self._fill(state, base, epoch, tail, previous)
        finally:
            if not forked:  # what the file's read or the replay freed goes back now: a single write never trims
                release_free_memory()

    def _fill(
        self,
        state: UserState,
        base: UserIndex | None,
        epoch: int,
        tail: dict[str, np.ndarray],
        previous: UserIndex | None = None,
    ) -> UserIndex:
        """`base` (a fork, a snapshot file's index, or None: a rebuild) extended by the records after it, with its
        vectors read and checked; a rebuild is saved to its snapshot file. previous: the snapshot this process
        served before the records changed under it (a delete), whose vectors it keeps where the vector store lacks
        them."""
        user_id = state.user_id
        index = base if base is not None else UserIndex(user_id, self.engine.config)
        with gc_paused() if base is None else nullcontext():  # a rebuild makes many objects per turn
            loaded = self.engine.records.load(user_id, after=index.last_seqs)
            index.extend(loaded.packets, loaded.descriptors)
        index.version, index.epoch, index.digest = loaded.version, epoch, loaded.digest
        try:
            read = self._read_vectors(index, [p.packet_id for p in loaded.packets], tail)
            if previous is not None:
                self._keep_vectors(index, previous)
            # a full load checks the vectors (also of a user with no records: a forget interrupted); a load from a
            # snapshot repairs the ones its newer records lack (a crash before they were stored)
            if base is None or self._lacks_vectors(index):
                self._repair(state, index, read)
        except VectorStoreError as exc:  # the lexical channels still answer; the dense one sits out (dense_node)
            self.engine.warn_once(f"vectors:{user_id}", f"dense channel off for user {user_id!r}: {exc}")
            return index  # not saved: a snapshot file without its vectors would hide them once repaired
        if base is None and index.packets:
            self.persist(state, index)
        return index

    def _keep_vectors(self, index: UserIndex, previous: UserIndex) -> None:
        """The vectors `previous` served for packets `index` has none for, where the packet's document is unchanged:
        a worker whose own vector store lacks them (records in PostgreSQL, a Chroma per process: it had them from a
        snapshot file) would otherwise lose its dense channel at every delete another worker makes, until the
        re-embed job made them all again. The reconcile that follows stores them in its vector store."""
        engine = self.engine
        if engine.embeddings is None or engine.foreign_vectors(index.user_id) or not len(previous.vectors):
            return
        lacking = [p for p in index.packet_order if p not in index.vectors.row and p in previous.vectors.row]
        if not lacking:
            return
        same = [
            p
            for p, now, then in zip(
                lacking, engine.sources(bundles(index, lacking)), engine.sources(bundles(previous, lacking))
            )
            if now == then
        ]
        matrix = previous.vectors.matrix()
        index.set_vectors(same, matrix[[previous.vectors.row[p] for p in same]])

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
            index.set_vectors(found, [tail[p] for p in found])
            packet_ids = [p for p in packet_ids if p not in tail]
            if not packet_ids:
                return None
        whole = not index.vectors
        ids, vectors, sources = engine.vectors.vectors(index.user_id, None if whole else packet_ids, sources=True)
        known = [k for k, i in enumerate(ids) if i in index.packets]
        # a vector built from other content than its packet's document (a row edited by hand) is left out: the
        # full load's reconcile makes it again
        ok = engine.sources_match(index, [ids[k] for k in known], [sources[k] for k in known])
        known = [k for k, good in zip(known, ok) if good]
        index.set_vectors([ids[k] for k in known], [vectors[k] for k in known])
        return dict(zip(ids, sources)) if whole else None

    def persist_all(self) -> None:
        """Saves every cached snapshot whose file lags behind by 1/64 of its packets or more (at close: the next
        process starts warm). For a smaller lag only its vectors are saved, beside the file: the next process
        replays its records instead of this one writing the whole file again for a few turns."""
        with self._map_lock:
            cached = [(state, state.index) for state in self._states.values()]
        for state, index in cached:
            if index is None:
                continue
            saved = state.persisted
            if len(index.packets) - saved >= max(1, len(index.packets) // 64):
                self.persist(state, index, force=True)
            elif len(index.packets) > saved:
                self.persist_tail(index, index.packet_order[saved:])

    def persist(self, state: UserState, index: UserIndex, force: bool = False) -> None:
        """Saves the user's snapshot file when it lags by PERSIST_EVERY records (or with force)."""
        if self.files is None or not index.packets:
            return
        if force or len(index.packets) - state.persisted >= PERSIST_EVERY:
            if self._while_current(index, self.files.write):
                state.persisted = len(index.packets)

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
            if not held or not Stamp.of(index).same(records.head(index.user_id)):
                return False
            try:
                write(index)
                return True
            except OSError as exc:
                log.warning("could not save the index snapshot of %r: %s", index.user_id, exc)
                return False
