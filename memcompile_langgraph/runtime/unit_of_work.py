"""A writer of one user as one unit of work: the writer lock held throughout, a private next version of the index
(a fork of the published snapshot), records committed batch by batch with their embeddings queued, and the new
snapshot published only when everything succeeded. A failure publishes nothing: the records committed so far are
the truth, and the next reader loads them.

Embedding overlaps extraction: one batch's packet documents are embedded on a background thread while the next
batch is packetized, extracted, placed and committed. At most one batch is in flight (memory stays bounded,
vectors are written in batch order); a crash between records and vectors leaves vectors missing, which the next
writer's reconcile re-embeds.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from contextlib import ExitStack

from ..index import UserIndex
from ..records import Descriptor, SourcePacket
from ..store.protocols import StoreError
from .consistency import prepare_writer
from .engine import Engine


class WriteConflict(StoreError):
    """The snapshot an ingest run started from is no longer the newest (another writer went first)."""


class UnitOfWork:
    def __init__(self, engine: Engine, cache, user_id: str, on_embedded: Callable[[int], None] | None = None):
        self.engine, self.cache, self.user_id = engine, cache, user_id
        self.index: UserIndex | None = None  # the private next version
        self.base_version = -1
        self._on_embedded = on_embedded
        self._stack = ExitStack()
        self._pending: Future | None = None

    def __enter__(self) -> UnitOfWork:
        self._stack.enter_context(self.engine.records.write_lock(self.user_id))
        try:
            base = self.cache.snapshot(self.user_id)
            self.index = base.fork()
            repair = self.user_id in self.cache.repair_pending
            prepare_writer(self.engine, self.index, repair)
            self.cache.repair_pending.discard(self.user_id)
            self.base_version = self.index.version
        except BaseException:
            self._stack.close()
            raise
        return self

    def adopt(self, index: UserIndex) -> None:
        """Continue from a fork an optimistic run derived itself, when it started from this unit's base."""
        if index.version != self.base_version:
            raise WriteConflict(f"user {self.user_id!r} changed since this ingest run started")
        self.index = index

    def commit(self, packets: list[SourcePacket], placed: list[tuple[Descriptor, str]], counts: dict[str, int]) -> int:
        """Records of one batch (descriptors already placed in self.index's Cells) in one transaction; then they are
        made searchable in the private index and their embedding is queued."""
        index = self.index
        self.engine.records.commit(self.user_id, packets, placed, counts)
        index.version, index.epoch = self.engine.records.head(self.user_id)  # a new user's first commit sets its epoch
        for p in packets:
            index.add_packet(p)
        index.register([d for d, _ in placed])
        index.index_packet_text([p.packet_id for p in packets])
        if self.engine.embeddings is not None and packets:
            self._submit([(p, index.by_packet[p.packet_id]) for p in packets])
        return index.version

    def _submit(self, items: list[tuple[SourcePacket, list[Descriptor]]]) -> None:
        self.wait()
        self._pending = self.engine.background().submit(self._embed, items)

    def _embed(self, items: list[tuple[SourcePacket, list[Descriptor]]]) -> None:
        self.engine.embed_packets(self.user_id, items, self.index)
        if self._on_embedded is not None:
            self._on_embedded(len(items))

    def wait(self) -> None:
        """Blocks until the batch in flight is stored; its error, if any, is raised here."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            try:
                self.wait()
            except BaseException:
                if exc_type is None:
                    raise
            if exc_type is None:
                self.cache.publish(self.index)
                self.cache.persist(self.index)
        finally:
            self._stack.close()
