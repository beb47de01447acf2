"""Records and vectors agree: missing vectors re-made, orphans removed, another model's vectors replaced whole, and
vectors built from other content than their packet's document now (a row edited by hand) made again.

Every vector is stored with a digest of the document it embedded (Engine.sources). A full load of a user (the one
kind of load that reads all its vectors) checks them: one whose digest is not its packet's is neither put in the
index nor left in the vector store for the query fallback, but re-embedded like a missing one. A vector written
before digests were has none: it is served as before and made again once (a reader does it for a small user,
else the re-embed job once it runs for the user, or `memcompile repair`, which a load of such a user asks for in a
warning), so that a hand edit after an upgrade is caught as well; trusting such vectors for good would leave every
packet stored before the upgrade open to the stale-vector case. A writer never makes them: for a large user that
would hold the first add for a long time.

The records are the truth. A reader repairs only small gaps, and only while it can take the user's writer lock
at once; more is left to the re-embed job (runtime/upgrade.py), off the read and write paths.
"""

from __future__ import annotations

import logging

from ..index.persistent import Rows
from ..index.user import UserIndex
from . import upgrade
from .engine import Engine, bundles
from .user_state import Repair, Stamp

log = logging.getLogger(__name__)
READER_REPAIR_LIMIT = 256  # vectors a read (or a writer) makes on the spot; more: the job


def reconcile(engine: Engine, index: UserIndex, read: dict[str, str | None] | None = None) -> Repair:
    """Brings the vector store in line with `index` (the records at index.version), whose matrix gains the vectors
    it makes. BUSY: another writer holds the user (try again later); STALE: the records moved on since `index`
    was loaded (nothing touched); FOR_JOB: more vectors to make than a reader repairs, left to the re-embed job
    (runtime/upgrade.py). read: the sources of all the user's vectors as the load of `index` read them
    (vectors.vectors with sources)."""
    user = index.user_id
    if engine.embeddings is None or (not index.packets and not engine.vectors.ids(user)):
        return Repair.DONE  # nothing to repair (e.g. an unknown user): no lock taken, no lock file made
    with engine.records.write_lock(user, blocking=False) as held:
        if not held:
            return Repair.BUSY
        # a reader comparing an older load with the vectors would delete the ones a live writer just added
        if not Stamp.of(index).same(engine.records.head(user)):
            return Repair.STALE
        # packet id -> digest of what its vector was built from. What the load read is still all there is when it
        # covers every packet: at one version, vectors are only ever added for packets that lack one (a writer's,
        # stored after its unit), else they are read again
        stored = read if read is not None and all(p in read for p in index.packets) else engine.vectors.sources(user)
        if stored and not index.packets:
            engine.vectors.drop(user)  # a forget interrupted between records and vectors
            return Repair.DONE
        if engine.foreign_vectors(user):
            return Repair.DONE  # another model's vectors are replaced whole (reembed, the re-embed job), not patched
        orphans = [pid for pid in stored if pid not in index.packets]
        kept = [pid for pid in index.packet_order if pid in stored]
        current = dict(zip(kept, engine.sources(bundles(index, kept))))
        other = [pid for pid in kept if stored[pid] is not None and stored[pid] != current[pid]]
        unstamped = [pid for pid in kept if stored[pid] is None]  # written before digests: made again once
        missing = [pid for pid in index.packet_order if pid not in stored]
        # vectors the index has and the vector store lacks (kept from a snapshot file or an earlier snapshot, made
        # by this model from the same document) are stored as they are, not made again
        have = [pid for pid in missing if pid in index.vectors.row]
        if have:
            rows = index.vectors.matrix()[[index.vectors.row[pid] for pid in have]]
            dia_ids = [index.packets[pid].dia_id for pid in have]
            engine.vectors.upsert(user, have, rows.tolist(), dia_ids, engine.sources(bundles(index, have)))
            missing = [pid for pid in missing if pid not in index.vectors.row]
        needed = missing + other
        redo = needed + unstamped if len(needed) + len(unstamped) <= READER_REPAIR_LIMIT else needed
        if len(redo) > READER_REPAIR_LIMIT:
            # left for the job, but a vector of other content goes now: the query fallback would serve it
            engine.vectors.delete(user, orphans + other)
            return Repair.FOR_JOB
        if len(redo) < len(needed) + len(unstamped):
            engine.warn_once(
                f"unstamped:{user}",
                f"{len(unstamped)} vectors of user {user!r} were stored before vectors carried the digest of their "
                "document; they are served as they are until `memcompile repair` makes them again",
            )
        engine.vectors.delete(user, orphans)
        if redo:
            log.info("re-embedding %d packets whose vectors are missing or not built from their documents", len(redo))
            embed(engine, index, redo)
        remade = set(redo)
        # stored after `index` read its vectors (a writer stores its last ones after its unit): read now
        unread = [pid for pid in kept if pid not in index.vectors.row and pid not in remade]
        if unread:
            ids, vectors = engine.vectors.vectors(user, unread)
            index.set_vectors(ids, vectors)
        return Repair.DONE


def reembed(engine: Engine, index: UserIndex, made_by: str | None = None) -> None:
    """As the user's writer: every packet embedded again with this memory's model, here. A crash leaves the packets
    it did not get to without vectors, for the next load's repair or the re-embed job.
    made_by: what the old vectors were recorded as, when the caller already replaced it by the marker."""
    user = index.user_id
    if engine.embedding_id is None:
        raise ValueError("a memory without an embedder cannot re-embed")
    if made_by is None:
        made_by = engine.records.embedding(user)
    upgrade.replace(engine, index)
    if index.packets:
        log.warning(
            "re-embedding %d packets of user %r: its vectors were made by %s",
            len(index.packets),
            user,
            made_by or "an unrecorded model",
        )
        embed(engine, index, index.packet_order)
        # a new version again: every cached index and snapshot file of this user (other processes too) reloads
        index.version = engine.records.set_embedding(user, engine.embedding_id, bump=True)
        index.epoch = engine.records.head(user)[1]


def embed(engine: Engine, index: UserIndex, packet_ids: Rows[str]) -> None:
    """Embeds and stores those packets of `index` (its matrix gains them), a chunk at a time as the re-embed job
    does: bounded memory for a large user."""
    for start in range(0, len(packet_ids), upgrade.CHUNK):
        engine.embed_packets(index.user_id, bundles(index, packet_ids[start : start + upgrade.CHUNK]), index)


def prepare_writer(snapshots: upgrade.Snapshots, index: UserIndex, repair: bool) -> None:
    """What a writer does before adding vectors of its model: replace foreign vectors (a small user's now, else by the
    re-embed job, off the write path) when its model is the store's, else nothing (the unit then stores no vectors);
    with repair, hand what a reader left to the job (Repair.FOR_JOB)."""
    engine = snapshots.engine
    if engine.embeddings is None:
        return
    if engine.foreign_vectors(index.user_id):
        if not engine.makes_vectors(claim=True):  # another model is the store's: its vectors are kept as they are
            engine.warn_other_model()
            return
        if len(index.packets) <= READER_REPAIR_LIMIT:
            reembed(engine, index)
        else:
            upgrade.hand_over(snapshots, index)
    elif repair:
        snapshots.reembeds.start(index.user_id)
