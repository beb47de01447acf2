"""Ingest overlaps embedding with extraction: one batch's packet documents are embedded in the background while the
next batch is packetized, extracted, placed in Cells and committed.

At most one batch is in flight, so memory stays bounded and vectors are written in batch order. Records are
committed before their vectors exist either way; a crash in between leaves vectors missing, which the next writer's
reconcile re-embeds (as before).
"""
from __future__ import annotations

import contextlib
import contextvars
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from .index import UserIndex
    from .memory import MemCompile
    from .records import Descriptor, SourcePacket

ACTIVE: contextvars.ContextVar["EmbedQueue | None"] = contextvars.ContextVar("memcompile_embed_queue", default=None)


class EmbedQueue:
    def __init__(self, mem: "MemCompile"):
        self.mem = mem
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="memcompile-ingest-embed")
        self._pending: Future | None = None

    def submit(self, user_id: str, items: list[tuple["SourcePacket", list["Descriptor"]]], index: "UserIndex") -> None:
        self.wait()
        self._pending = self._worker.submit(self.mem.embed_packets, user_id, items, index)

    def wait(self) -> None:
        """Blocks until the batch in flight is stored; its error, if any, is raised here."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()


@contextlib.contextmanager
def embedding_in_background(mem: "MemCompile") -> Iterator[EmbedQueue]:
    """Within the block, ingest-graph runs queue their embeddings; on leaving, everything queued is stored."""
    queue = EmbedQueue(mem)
    token = ACTIVE.set(queue)
    try:
        yield queue
        queue.wait()
    finally:
        ACTIVE.reset(token)
        with contextlib.suppress(Exception):  # the block's own error is the one to report
            queue.wait()
        queue._worker.shutdown(wait=True)
