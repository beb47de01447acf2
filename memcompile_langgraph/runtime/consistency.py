"""Records and vectors agree: missing vectors re-made, orphans removed, another model's vectors replaced whole.

The records are the truth. A reader repairs only small gaps, and only while it can take the user's writer lock
at once; everything else is left to the user's next writer (a unit of work), which calls `prepare_writer`.
"""

from __future__ import annotations

import logging

from ..address.dense import PacketVectors
from ..index import UserIndex
from ..store.records import REEMBEDDING
from .engine import Engine

log = logging.getLogger(__name__)
READER_REPAIR_LIMIT = 256  # missing vectors a read repairs on the spot (~1.4 s of embedding); more wait for a writer
REEMBED_CHUNK = 2048  # packets embedded and stored at a time when a user's vectors are made again


DONE, BUSY, STALE, FOR_WRITER = "done", "busy", "stale", "for_writer"  # what reconcile could do


def reconcile(engine: Engine, index: UserIndex, writer: bool) -> str:
    """Brings the vector store in line with `index` (the records at index.version), whose matrix gains the vectors
    it makes. BUSY: another writer holds the user (try again later); STALE: the records moved on since `index`
    was loaded (nothing touched); FOR_WRITER: a reader met more missing vectors than it repairs."""
    user = index.user_id
    if engine.embeddings is None or (not index.packets and not engine.vectors.ids(user)):
        return DONE  # nothing to repair (e.g. an unknown user): no lock taken, no lock file made
    with engine.records.write_lock(user, blocking=False) as held:
        if not held:
            return BUSY
        # a reader comparing an older load with the vectors would delete the ones a live writer just added
        if engine.records.version(user) != index.version:
            return STALE
        stored = engine.vectors.ids(user)
        if stored and not index.packets:
            engine.vectors.drop(user)  # a forget interrupted between records and vectors
            return DONE
        if engine.foreign_vectors(user):
            return DONE  # another model's vectors are replaced whole by the next writer (reembed), not patched
        missing = [pid for pid in index.packet_order if pid not in stored]
        orphans = [pid for pid in stored if pid not in index.packets]
        if orphans:
            engine.vectors.delete(user, orphans)
        if len(missing) > READER_REPAIR_LIMIT and not writer:
            return FOR_WRITER
        if missing:
            log.info("re-embedding %d packets missing from the vector store", len(missing))
            engine.embed_packets(user, [(index.packets[p], index.by_packet[p]) for p in missing], index)
        return DONE


def reembed(engine: Engine, index: UserIndex, made_by: str | None = None) -> None:
    """As the user's writer: every packet embedded again with this memory's model. Until it is recorded as done,
    readers treat the vectors as foreign (a crash leaves them so, and the next writer starts over).
    made_by: what the old vectors were recorded as, when the caller already replaced it by the marker."""
    user = index.user_id
    if engine.embedding_id is None:
        raise ValueError("a memory without an embedder cannot re-embed")
    if made_by is None:
        made_by = engine.records.embedding(user)
    engine.records.set_embedding(user, REEMBEDDING)
    engine.vectors.drop(user)  # also whatever a forget interrupted before its vectors left behind
    index.vectors = PacketVectors()
    if index.packets:
        log.warning(
            "re-embedding %d packets of user %r: its vectors were made by %s",
            len(index.packets),
            user,
            made_by or "an unrecorded model",
        )
        order = index.packet_order
        for start in range(0, len(order), REEMBED_CHUNK):  # bounded memory for a large user
            chunk = order[start : start + REEMBED_CHUNK]
            engine.embed_packets(user, [(index.packets[p], index.by_packet[p]) for p in chunk], index)
    # a new version and epoch: every cached index and snapshot file of this user (other processes too) is dropped
    index.version = engine.records.set_embedding(user, engine.embedding_id, bump=True)
    index.epoch = engine.records.head(user)[1]


def prepare_writer(engine: Engine, index: UserIndex, repair: bool) -> None:
    """What a writer does before adding vectors of its model: replace foreign vectors; with repair, finish what a
    reader left (see IndexCache.repair_pending)."""
    if engine.embeddings is None:
        return
    if engine.foreign_vectors(index.user_id):
        reembed(engine, index)
    elif repair:
        reconcile(engine, index, writer=True)
