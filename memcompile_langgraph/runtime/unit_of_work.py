"""A writer of one user as one unit of work: the writer lock held throughout, a private next version of the index
(a fork of the published snapshot), records committed batch by batch with their packets embedded in the background,
and the new snapshot published only when everything succeeded. A failure publishes nothing: the records committed
so far are the truth, and the next reader loads them.

Embedding overlaps the rest of the work: a batch's packet documents are complete once its metadata is extracted,
so `embed_ahead` starts the model on a background thread while the batch is placed in Cells and committed (and
the next batch extracted); its vectors are stored only after `commit` of the same packets. At most one batch is
in flight (memory stays bounded, vectors are written in batch order), and the writer decides once where its vectors
go (`Where`): nowhere when it is never committed, into the vector store now, or after the unit. A crash between
records and vectors leaves vectors missing, which the next load of the user repairs (runtime/cache.py,
consistency.py).

The first write of a large user after opening would wait for the vector store to load the user's collection (its
time grows with the user, and it holds the GIL): there the last batch's vectors go into the published snapshot as soon
as they are embedded, and the vector store gets them after the unit, from the embedding thread, which takes the
user's writer lock for it and stores them only while the records still hold those packets (Stamp.extends: no
delete, forget or re-embed since). The snapshot file follows them. That job is the user's pending vectors
(UserState.pending): the user's next writer in this process and `stats` wait for it first, `close` for all.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import ExitStack
from enum import Enum
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING

from ..index.user import UserIndex
from ..model import Descriptor, SourcePacket
from ..store.protocols import Expiry, StoreError
from . import telemetry
from .consistency import prepare_writer
from .engine import Bundles, Embedded
from .user_state import Repair, Stamp, UserState

if TYPE_CHECKING:
    from .host import Host

log = logging.getLogger(__name__)
JOB_START_WAIT = 0.05  # seconds a writer waits for its embedding job to start
# packets from which a user's collection takes long enough to load that its first write after opening stores its
# last vectors behind it (see the module doc)
STORE_BEHIND_FROM = 2048


class WriteConflict(StoreError):
    """The snapshot an ingest run started from is no longer the newest (another writer went first)."""


class Where(Enum):
    """Where an embedded batch's vectors go, decided once by its writer."""

    DROP = "drop"  # its records were never committed: nowhere
    NOW = "now"  # into the vector store and the private index now (the unit still holds the writer lock)
    AFTER = "after"  # into the vector store after the unit, which published them in its index (see the module doc)


class _Batch:
    """A batch in flight on an embedding thread: its vectors once embedded, and the writer's one decision about
    them (the job waits for it; the first decision stands, so a later wait() cannot drop a committed batch)."""

    def __init__(self, packet_ids: list[str], committed: bool):
        self.packet_ids = packet_ids
        self.committed = committed  # embedded ahead of its commit until the writer commits it
        self.vectors: Future[Embedded] = Future()
        self.where: Future[Where] = Future()

    def decide(self, where: Where) -> None:
        if not self.where.done():
            self.where.set_result(where)


# the documents (packet id -> text) and expiries kept beside new packets, in their commit's transaction
PacketRows = Callable[[list[SourcePacket]], tuple[dict[str, str], dict[str, Expiry]]]


class UnitOfWork:
    def __init__(
        self,
        host: Host,
        user_id: str,
        on_embedded: Callable[[int], None] | None = None,
        rows: PacketRows | None = None,
    ):
        self.host, self.engine, self.cache, self.user_id = host, host.engine, host.cache, user_id
        self._rows = rows
        self._removed: list[str] = []  # packets the next commit removes in its transaction
        self._replaced = False  # the unit removed packets: the records are loaded again instead of publishing
        self._state: UserState | None = None  # the user's, once this unit published
        self.index: UserIndex  # the private next version, forked by __enter__
        self.base_version = -1
        self._on_embedded = on_embedded
        self._stack = ExitStack()
        self._pending: Future[None] | None = None  # the job of the batch in flight
        self._batch: _Batch | None = None
        self._behind = False  # the vector store has not loaded the user's collection yet: see the module doc
        self._embeds = False  # whether the unit makes its packets' vectors (set at open)

    def __enter__(self) -> UnitOfWork:
        with self.engine.clock.part("open"):
            return self._open()

    def _open(self) -> UnitOfWork:
        self.host.settle(self.user_id)  # a previous unit's vectors stored behind it: they need the writer lock
        self._stack.enter_context(self.engine.records.write_lock(self.user_id))
        try:
            self.engine.check_store()
            base = self.cache.snapshot(self.user_id)
            self.index = base.fork()
            state = self.cache.state(self.user_id)
            repair = state is not None and state.repair is Repair.FOR_JOB
            prepare_writer(self.cache, self.index, repair)
            if state is not None and repair:
                state.repair = Repair.DONE
            self.base_version = self.index.version
            # a worker whose model is not the store's stores its turns without vectors (the store's workers make them)
            self._embeds = self.engine.embeddings is not None and not self.engine.foreign_vectors(self.user_id)
            self._behind = (
                self._embeds
                and len(self.index.packets) >= STORE_BEHIND_FROM
                and not self.engine.vectors.loaded(self.user_id)
            )
        except BaseException:
            self._stack.close()
            raise
        return self

    def adopt(self, index: UserIndex) -> None:
        """Continue from a fork an optimistic run derived itself, when it started from this unit's base."""
        if index.version != self.base_version:
            raise WriteConflict(f"user {self.user_id!r} changed since this ingest run started")
        self.index = index

    def replace(self, packets: dict[str, str]) -> None:
        """The packets (dia_id -> packet id) are removed by the unit's next commit, in its transaction (a replace
        is never a moment without either); new turns may take their dia_ids meanwhile."""
        self._removed += packets.values()
        self.index.release(packets)
        self._replaced = self._replaced or bool(packets)
        self._behind = False  # the private index is not published, so vectors go in as they are embedded

    def embed_ahead(self, packets: list[SourcePacket], descriptors: list[Descriptor]) -> None:
        """Starts embedding the packet documents of a batch whose records are not committed yet."""
        if not self._embeds or not packets:
            return
        claims: dict[str, list[Descriptor]] = {p.packet_id: [] for p in packets}
        for d in descriptors:
            claims[d.packet_id].append(d)
        self._submit([(p, claims[p.packet_id]) for p in packets], committed=False)

    def commit(self, packets: list[SourcePacket], placed: list[tuple[Descriptor, str]], counts: dict[str, int]) -> int:
        """Records of one batch (descriptors already placed in self.index's Cells) in one transaction; then they are
        made searchable in the private index and their vectors stored (embedded ahead, or queued now)."""
        index = self.index
        items, expiries = self._rows(packets) if self._rows is not None else ({}, {})
        removed, self._removed = self._removed, []
        with self.engine.clock.part("commit", packets=len(packets), descriptors=len(placed)):
            self.engine.records.commit(
                self.user_id, packets, placed, counts, removed=removed, items=items, expiries=expiries
            )
        if removed:
            self.engine.drop_removed(self.user_id, removed)
        index.version, index.epoch, index.digest = self.engine.records.head(self.user_id)  # (a new user: its epoch)
        for p in packets:
            index.add_packet(p)
        index.register([d for d, _ in placed])
        index.index_packet_text([p.packet_id for p in packets])
        if self._embeds and packets:
            batch = self._batch
            if batch is not None and not batch.committed and batch.packet_ids == [p.packet_id for p in packets]:
                batch.committed = True
                if not self._behind:  # else the unit's end decides: another batch follows, or it publishes first
                    batch.decide(Where.NOW)
            else:
                self._submit([(p, index.by_packet[p.packet_id]) for p in packets], committed=True)
        return index.version

    def _submit(self, items: Bundles, committed: bool) -> None:
        self.wait()
        # before the job exists: whatever is raised from here on, wait() decides for it
        batch = self._batch = _Batch([p.packet_id for p, _ in items], committed)
        if committed and not self._behind:
            batch.decide(Where.NOW)
        started = threading.Event()
        job = telemetry.carry(self._embed)  # its spans are children of the add_turns span
        self._pending = self.host.background().submit(job, items, batch, started)
        if not committed:
            # a job needs the interpreter to start: waiting hands it over now (else it may wait out the switch
            # interval, milliseconds of a one-turn add, while this thread places Cells); bounded, as other writers'
            # jobs may hold every worker
            started.wait(JOB_START_WAIT)

    def _embed(self, items: Bundles, batch: _Batch, started: threading.Event) -> None:
        started.set()
        clock = self.engine.clock
        try:
            with clock.part("embed", packets=len(items)):
                embedded = self.engine.packet_vectors(items)
        except BaseException as exc:
            batch.vectors.set_exception(exc)
            raise
        batch.vectors.set_result(embedded)
        where = batch.where.result()
        if where is Where.DROP:
            return
        if where is Where.AFTER:
            if self._on_embedded is not None:
                self._on_embedded(len(items))  # searchable once published: the vector store follows now
            self._store_behind(items, embedded)
            return
        with clock.part("store_vectors"):
            self.engine.store_vectors(self.user_id, items, embedded, self.index)
        if self._on_embedded is not None:
            self._on_embedded(len(items))

    def _store_behind(self, items: Bundles, embedded: Embedded) -> None:
        """After the unit: the vectors it published stored under the user's writer lock while the records still hold
        their packets, then the snapshot file saved when due. A failure leaves them to the next load's repair."""
        engine, index = self.engine, self.index
        try:
            with engine.records.write_lock(self.user_id), engine.clock.part("store_vectors"):
                head = engine.records.head(self.user_id)
                if not Stamp.of(index).extends(head, partial(engine.records.digest_at, self.user_id)):
                    return  # deleted from, forgotten or re-embedded since: the load that follows repairs the vectors
                engine.store_vectors(self.user_id, items, embedded)
                if self._state is not None:
                    self.cache.persist(self._state, index)
        except Exception as exc:  # noqa: BLE001 - no caller is left to raise to; the next load repairs the vectors
            log.warning("vectors of %d packets of user %r not stored (%s)", len(items), self.user_id, exc)

    def wait(self) -> None:
        """Blocks until the batch in flight is stored (or dropped, when it was never committed); its error, if any,
        is raised here."""
        batch, self._batch = self._batch, None
        if batch is not None:  # the writer still holds the lock: a committed batch is stored now, before the next
            batch.decide(Where.NOW if batch.committed else Where.DROP)
        pending, self._pending = self._pending, None
        if pending is not None:
            with self.engine.clock.part("wait"):
                pending.result()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        batch = self._batch
        try:
            try:
                if exc_type is None and batch is not None and batch.committed and not batch.where.done():
                    self._publish_before_storing(batch)
                    return
                self.wait()  # a batch embedded ahead and never committed is dropped here
            except BaseException:
                if exc_type is None:
                    raise
            if self._replaced:
                self.cache.drop(self.user_id)  # the private index still holds the removed packets
            elif exc_type is None:
                with self.engine.clock.part("publish"):
                    state = self.cache.publish(self.index)
                    self.cache.persist(state, self.index)
        finally:
            self._stack.close()

    def _publish_before_storing(self, batch: _Batch) -> None:
        """Publishes once the last batch is embedded into the index; its job stores the vectors after the unit."""
        pending, self._pending, self._batch = self._pending, None, None
        assert pending is not None  # a batch belongs to a submitted job
        with self.engine.clock.part("wait"):
            try:
                embedded = batch.vectors.result()
            except BaseException:  # the job failed: its error is raised here, nothing is published
                batch.decide(Where.DROP)
                pending.result()
                raise
        self.index.set_vectors(batch.packet_ids, embedded.vectors)
        with self.engine.clock.part("publish"):
            self._state = self.cache.publish(self.index)
        self._state.leave_pending(pending)  # before the job may run: a settle() meanwhile waits for it
        batch.decide(Where.AFTER)
