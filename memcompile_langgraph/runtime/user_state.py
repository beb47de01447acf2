"""What this process derives from one user's records, owned in one place: the published snapshot and its stamp, the
load lock, how many packets its snapshot file holds, where its vector repair stands, and the vectors a writer left
to store after its unit. Dropping a user drops its UserState, and with it all of this.

The records are the truth, and `Stamp` is the one way anything derived is checked against them: `same(head)` (it
shows exactly the records' head) or `extends(head, digest_at)` (the records hold exactly its packets and maybe
more, so replaying the newer ones brings it up to date).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from enum import Enum

from ..index.user import UserIndex
from ..store.protocols import Head

DigestAt = Callable[[int], "str | None"]  # the records' digest chain at a packet seq, for one user


@dataclass(frozen=True, slots=True)
class Stamp:
    """The records' state something derived (a published snapshot, a snapshot file) was built at: their version,
    epoch and digest chain at its newest packet, whose seq is `seq`."""

    version: int
    epoch: int
    digest: str
    seq: int

    @classmethod
    def of(cls, index: UserIndex) -> Stamp:
        return cls(index.version, index.epoch, index.digest, index.last_seqs[0])

    def same(self, head: Head) -> bool:
        """The records are exactly what it shows (nothing added, removed, restored or re-embedded since)."""
        return self.version == head.version and self.epoch == head.epoch and self.digest == head.digest

    def extends(self, head: Head, digest_at: DigestAt) -> bool:
        """The records hold exactly its packets, maybe more after them: the same epoch (nothing deleted or
        re-embedded since), a version not newer than theirs, and their digest at its newest packet is its own (a
        restore or a clone that went past it has another). One indexed read, none when the head already differs."""
        return (
            head.version > 0
            and self.epoch == head.epoch
            and self.version <= head.version
            and digest_at(self.seq) == self.digest
        )


class Repair(Enum):
    """What the last check of the user's vectors against its records (consistency.reconcile) came to."""

    DONE = "done"  # in line (or nothing to check)
    BUSY = "busy"  # another writer held the user: the next read tries again
    STALE = "stale"  # the records moved on since the snapshot checked was loaded: nothing touched
    FOR_JOB = "for_job"  # more vectors to make than a reader makes: the re-embed job makes them (upgrade.py)


class UserState:
    """One user's derived state in this process (runtime/cache.py keeps them, most recently used last)."""

    __slots__ = ("user_id", "published", "load_lock", "holders", "persisted", "repair", "pending")

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        # the published snapshot (readers may be inside it: never changed) with its stamp, taken at its publish; one
        # attribute, so a reader never pairs one snapshot with another's stamp
        self.published: tuple[UserIndex, Stamp] | None = None
        self.load_lock = threading.Lock()  # one thread brings the snapshot up to date, the others wait for it
        self.holders = 0  # threads holding or waiting for load_lock (counted under the cache's map lock)
        self.persisted = 0  # packets in the newest snapshot file written or read
        self.repair = Repair.DONE
        # the vectors a unit of work published before the vector store had them (runtime/unit_of_work.py): stored
        # by a background job under the user's writer lock
        self.pending: Future[None] | None = None

    @property
    def index(self) -> UserIndex | None:
        published = self.published
        return None if published is None else published[0]

    def publish(self, index: UserIndex) -> None:
        self.published = (index, Stamp.of(index))

    def fresh(self, head: Head) -> UserIndex | None:
        """The published snapshot when it shows the records' `head` and no repair waits for a reader."""
        published = self.published
        if published is not None and published[1].same(head) and self.repair is not Repair.BUSY:
            return published[0]
        return None

    def busy(self) -> bool:
        """Someone is loading it or vectors are still to be stored for it: not evicted meanwhile."""
        return self.holders > 0 or (self.pending is not None and not self.pending.done())

    def leave_pending(self, job: Future[None]) -> None:
        """A unit published before its last vectors reached the vector store: `job` stores them."""
        self.pending = job

    def settle(self) -> None:
        """Waits until vectors a unit left pending are stored (their error is the job's: logged there). Never call it
        holding the user's writer lock: the job takes it."""
        job = self.pending
        if job is not None and not job.done():
            job.result()
