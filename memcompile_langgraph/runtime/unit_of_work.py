"""A writer of one user as one unit of work: the writer lock held throughout, a private next version of the index
(a fork of the published snapshot), records committed batch by batch with their packets embedded in the background,
and the new snapshot published only when everything succeeded. A failure publishes nothing: the records committed
so far are the truth, and the next reader loads them.

Embedding overlaps the rest of the work: a batch's packet documents are complete once its metadata is extracted,
so `embed_ahead` starts the model on a background thread while the batch is placed in Cells and committed (and
the next batch extracted); its vectors are stored only after `commit` of the same packets. At most one batch is
in flight (memory stays bounded, vectors are written in batch order). A batch that is never committed stores no
vector; a crash between records and vectors leaves vectors missing, which the next load of the user repairs
(runtime/cache.py, consistency.py).

The first write of a large user after opening would wait for the vector store to load the user's collection (a
few hundred ms at 20k turns, holding the GIL): there the last batch's vectors go into the published snapshot as soon
as they are embedded, and the vector store gets them after the unit, from the embedding thread, which takes the
user's writer lock for it and stores them only while the records still hold those packets (same epoch: no delete,
forget or re-embed since). The snapshot file follows them. The user's next writer in this process, `stats`, and
`close` wait for that write first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import ExitStack
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING

from ..index.user import UserIndex
from ..model import Descriptor, SourcePacket
from ..store.protocols import StoreError
from . import telemetry
from .consistency import prepare_writer
from .engine import Bundles, Embedded
from .user_state import Repair, Stamp, UserState

if TYPE_CHECKING:
    from .host import Host

log = logging.getLogger(__name__)
JOB_START_WAIT = 0.05  # seconds a writer waits for its embedding job to start
# packets from which a user's collection takes long enough to load (~10 ms per 1,000 vectors) that its first write
# after opening stores its last vectors behind it (see the module doc)
STORE_BEHIND_FROM = 2048


class WriteConflict(StoreError):
    """The snapshot an ingest run started from is no longer the newest (another writer went first)."""


class _Ahead:
    """A batch being embedded before its records are committed: its vectors wait for the decision to store them."""

    def __init__(self, packet_ids: list[str]):
        self.packet_ids = packet_ids
        self.store = False
        self.decided = threading.Event()

    def decide(self, store: bool) -> None:
        """The first decision stands (a later wait() must not drop a batch already committed)."""
        if not self.decided.is_set():
            self.store = store
            self.decided.set()


class _Placement:
    """Where an embedded batch of a unit that stores its last vectors behind it goes: into the vector store now (a
    later batch follows, the unit still holds the writer lock) or after the unit (it published without waiting)."""

    def __init__(self) -> None:
        self.embedded = threading.Event()  # the job got as far as it will before the decision
        self.ready = False  # its vectors are in the private index
        self.behind = False
        self.decided = threading.Event()

    def decide(self, behind: bool) -> None:
        if not self.decided.is_set():
            self.behind = behind
            self.decided.set()


class UnitOfWork:
    def __init__(self, host: Host, user_id: str, on_embedded: Callable[[int], None] | None = None):
        self.host, self.engine, self.cache, self.user_id = host, host.engine, host.cache, user_id
        self._state: UserState | None = None  # the user's, once this unit published
        self.index: UserIndex  # the private next version, forked by __enter__
        self.base_version = -1
        self._on_embedded = on_embedded
        self._stack = ExitStack()
        self._pending: Future[None] | None = None
        self._ahead: _Ahead | None = None
        self._placement: _Placement | None = None  # of the job in flight, when vectors may be stored behind
        self._behind = False  # the vector store has not loaded the user's collection yet: see the module doc

    def __enter__(self) -> UnitOfWork:
        with self.engine.clock.stage("open"):
            return self._open()

    def _open(self) -> UnitOfWork:
        self.host.settle(self.user_id)  # a previous unit's vectors stored behind it: they need the writer lock
        self._stack.enter_context(self.engine.records.write_lock(self.user_id))
        try:
            self.engine.check_store()
            base = self.cache.snapshot(self.user_id)
            self.index = base.fork()
            state = self.cache.state(self.user_id)
            repair = state is not None and state.repair is Repair.FOR_WRITER
            prepare_writer(self.engine, self.index, repair)
            if state is not None and repair:
                state.repair = Repair.DONE
            self.base_version = self.index.version
            self._behind = (
                self.engine.embeddings is not None
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

    def embed_ahead(self, packets: list[SourcePacket], descriptors: list[Descriptor]) -> None:
        """Starts embedding the packet documents of a batch whose records are not committed yet."""
        if self.engine.embeddings is None or not packets:
            return
        claims: dict[str, list[Descriptor]] = {p.packet_id: [] for p in packets}
        for d in descriptors:
            claims[d.packet_id].append(d)
        self._submit([(p, claims[p.packet_id]) for p in packets], _Ahead([p.packet_id for p in packets]))

    def commit(self, packets: list[SourcePacket], placed: list[tuple[Descriptor, str]], counts: dict[str, int]) -> int:
        """Records of one batch (descriptors already placed in self.index's Cells) in one transaction; then they are
        made searchable in the private index and their vectors stored (embedded ahead, or queued now)."""
        index = self.index
        with self.engine.clock.stage("commit", packets=len(packets), descriptors=len(placed)):
            self.engine.records.commit(self.user_id, packets, placed, counts)
        index.version, index.epoch, index.digest = self.engine.records.head(self.user_id)  # (a new user: its epoch)
        for p in packets:
            index.add_packet(p)
        index.register([d for d, _ in placed])
        index.index_packet_text([p.packet_id for p in packets])
        if self.engine.embeddings is not None and packets:
            ahead = self._ahead
            if ahead is not None and ahead.packet_ids == [p.packet_id for p in packets]:
                ahead.decide(True)
                self._ahead = None
            else:
                self._submit([(p, index.by_packet[p.packet_id]) for p in packets])
        return index.version

    def _submit(self, items: Bundles, ahead: _Ahead | None = None) -> None:
        self.wait()
        self._ahead = ahead  # before the job exists: whatever is raised from here on, wait() decides for it
        self._placement = _Placement() if self._behind else None
        started = threading.Event()
        job = telemetry.carry(self._embed)  # its spans are children of the add_turns span
        self._pending = self.host.background().submit(job, items, ahead, started, self._placement)
        if ahead is not None:
            # a job needs the interpreter to start: waiting hands it over now (else it may wait out the switch
            # interval, milliseconds of a one-turn add, while this thread places Cells); bounded, as other writers'
            # jobs may hold every worker
            started.wait(JOB_START_WAIT)

    def _embed(
        self, items: Bundles, ahead: _Ahead | None, started: threading.Event, placement: _Placement | None
    ) -> None:
        started.set()
        clock = self.engine.clock
        try:
            with clock.stage("embed", packets=len(items)):
                embedded = self.engine.packet_vectors(items)
            if ahead is not None:
                ahead.decided.wait()
                if not ahead.store:
                    return
            if placement is not None:
                self.index.vectors.set([p.packet_id for p, _ in items], embedded.vectors)
                placement.ready = True
        finally:
            if placement is not None:
                placement.embedded.set()
        if placement is not None:
            if self._on_embedded is not None:
                self._on_embedded(len(items))  # searchable once published: the vector store may follow after
            placement.decided.wait()
            if placement.behind:
                self._store_behind(items, embedded)
            else:
                with clock.stage("store_vectors"):
                    self.engine.store_vectors(self.user_id, items, embedded)
            return
        with clock.stage("store_vectors"):
            self.engine.store_vectors(self.user_id, items, embedded, self.index)
        if self._on_embedded is not None:
            self._on_embedded(len(items))

    def _store_behind(self, items: Bundles, embedded: Embedded) -> None:
        """After the unit: the vectors it published stored under the user's writer lock while the records still hold
        their packets, then the snapshot file saved when due. A failure leaves them to the next load's repair."""
        engine, index = self.engine, self.index
        try:
            with engine.records.write_lock(self.user_id), engine.clock.stage("store_vectors"):
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
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.decide(False)
        if self._placement is not None:
            self._placement.decide(False)  # the writer still holds the lock: stored now, before the next batch
            self._placement = None
        pending, self._pending = self._pending, None
        if pending is not None:
            with self.engine.clock.stage("wait"):
                pending.result()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # a batch embedded ahead and never committed is dropped by wait(): nothing is left to store behind
        placement = self._placement if exc_type is None and self._ahead is None else None
        try:
            try:
                if placement is not None:
                    self._publish_before_storing(placement)
                    return
                self.wait()
            except BaseException:
                if exc_type is None:
                    raise
            if exc_type is None:
                with self.engine.clock.stage("publish"):
                    state = self.cache.publish(self.index)
                    self.cache.persist(state, self.index)
        finally:
            self._stack.close()

    def _publish_before_storing(self, placement: _Placement) -> None:
        """Publishes once the last batch is embedded into the index; its job stores the vectors after the unit."""
        pending, self._pending, self._placement = self._pending, None, None
        assert pending is not None  # a placement belongs to a submitted job
        with self.engine.clock.stage("wait"):
            placement.embedded.wait()
        if not placement.ready:  # the job failed: its error is raised here, nothing is published
            placement.decide(False)
            pending.result()
        with self.engine.clock.stage("publish"):
            self._state = self.cache.publish(self.index)
        self._state.leave_pending(pending)  # before the job may run: a settle() meanwhile waits for it
        placement.decide(True)
