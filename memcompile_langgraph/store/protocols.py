"""The storage contracts the runtime stands on. Implementations: store/sqlite.py (SQLite, the embedded default),
store/postgres.py (PostgreSQL); store/chroma.py (Chroma: persistent directory, in memory, or a server).

tests/contracts/ holds one suite per protocol that every implementation must pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..model import Descriptor, SourcePacket


class StoreError(RuntimeError):
    """A store that cannot be used as asked (missing, damaged, of a newer schema): the message is one line."""


class VectorStoreError(StoreError):
    """The vector store cannot be read or written (a damaged Chroma file, a server that does not answer)."""


class Head(NamedTuple):
    """Where a user's records stand, in one indexed read: see RecordsStore."""

    version: int
    epoch: int
    digest: str  # the chain digest at the user's newest packet ("" with no packets)


NO_RECORDS = Head(0, 0, "")


class Expiry(NamedTuple):
    """When a packet expires (seconds since the epoch) and its time to live in minutes (None: no refresh on read)."""

    at: float
    ttl: float | None


class Moved(NamedTuple):
    """A store id the records had before they were moved or copied where they are: see RecordsStore."""

    store_id: str
    held: bool | None  # whether the records it was bound to still exist there (None: cannot tell from here)


@dataclass(frozen=True, slots=True)
class LoadedRecords:
    """One consistent read of a user's records (no writer's commit falls between its parts)."""

    version: int
    packets: list[SourcePacket]  # in dialogue order (seq)
    descriptors: list[tuple[Descriptor, str]]  # (descriptor, its Cell id) in construction order (seq)
    digest: str = ""  # the chain digest at the newest packet, read with the rows


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """A stored packet as a key-value view sees it: packets are immutable, so updated_at == created_at."""

    packet: SourcePacket
    created_at: float  # unix seconds of the commit that stored it


@runtime_checkable
class RecordsStore(Protocol):
    """Packets, descriptors with their Cells, per-user counters and versions.

    Versions: `version(user)` is 0 for a user with no records; every write that changes what a reader would load
    (commit, delete_packets, set_embedding with bump) gives the user a new version drawn from one store-wide
    generation, so a version never repeats for a user, also across forget (a cache keyed by version can never
    serve forgotten records). `head(user)` is (version, epoch): the epoch changes when records change other than by
    appending (delete_packets, a re-embed, the user made again after forget), so a cached index or snapshot file of
    the same epoch can be brought up to date with `load(user, after=(packet seq, descriptor seq))`.

    Counters alone cannot tell a restored, cloned or hand-edited database from the one an artefact was built from
    (a restore brings old versions back, and writes push them past the artefact's). So every committed packet also
    carries a digest chained over the user's packets in seq order with their descriptors and Cells
    (`digest_at(user, seq)`, one indexed read; recomputed from the first changed packet on delete), and `head(user)`
    is (version, epoch, digest at the newest packet). An artefact built up to packet seq S with digest D is extended
    only while `digest_at(user, S) == D`: it holds exactly the records' packets up to S.

    `store_id()` names the store's derived state (snapshot folder, Chroma collections). It is bound to where the
    records live (the SQLite file, or the PostgreSQL cluster, database and schema): a copy or clone opened elsewhere
    gets a new store id on open, so it never shares the original's collections or files. `moved()` lists the ids the
    records had before, and whether the records each was bound to still exist: where they do not (a store moved, not
    copied), what was derived under that id is nobody's and is swept, then `moved_swept(id)`. A physical copy of a
    PostgreSQL database is indistinguishable by its contents and keeps the store id: `apart(deployment)` tells it by
    the deployment it is reached under (the operator's name, else the server address) against the first one bound.
    Writers of one user hold `write_lock(user)` (across threads and processes); the one job that makes a user's
    vectors again holds `reembed_lock(user)` as well, apart from the writer lock, which it takes per step.

    `forget(user)` removes the user's records in one transaction and records the forget as pending, in the same
    transaction, until `forget_done(user)`: the user's vectors, files and LLM cache go after that commit, and a forget
    interrupted between the two (a crash, a kill) is listed by `pending_forgets()` for the next open to finish. A delete
    of packets (`delete_packets`, a commit's `removed`) is recorded so too, with their ids, until `removal_done(user)`:
    `pending_removals()` lists them by user for the next open to remove their vectors and cached LLM replies."""

    where: str  # where the records are, for messages (no credentials)

    def store_id(self) -> str: ...
    def secret(self) -> str: ...
    def version(self, user_id: str) -> int: ...
    def head(self, user_id: str) -> Head: ...
    def digest_at(self, user_id: str, seq: int) -> str | None: ...
    def users(self) -> list[str]: ...
    def load(self, user_id: str, after: tuple[int, int] = (-1, -1)) -> LoadedRecords: ...
    def commit(
        self,
        user_id: str,
        packets: list[SourcePacket],
        placed: list[tuple[Descriptor, str]],
        counts: dict[str, int] | None = None,
        *,
        removed: Sequence[str] = (),
        items: Mapping[str, str] | None = None,
        expiries: Mapping[str, Expiry] | None = None,
    ) -> int: ...
    def delete_packets(self, user_id: str, packet_ids: list[str]) -> int: ...
    def forget(self, user_id: str) -> None: ...
    def pending_forgets(self) -> list[str]: ...
    def moved(self) -> list[Moved]: ...
    def holds(self, store_id: str, home: str, place: str | None = None) -> bool | None: ...
    def home(self) -> str: ...
    def apart(self, deployment: str | None = None) -> tuple[str, str] | None: ...
    def moved_swept(self, store_id: str) -> None: ...
    def forget_done(self, user_id: str) -> None: ...
    def pending_removals(self) -> dict[str, list[str]]: ...
    def removal_done(self, user_id: str) -> None: ...
    def put_items(
        self, user_id: str, items: Mapping[str, str], expiries: Mapping[str, Expiry | None] | None = None
    ) -> None: ...
    def items(self, user_id: str, packet_ids: Sequence[str]) -> dict[str, str]: ...
    def expiries(self, user_id: str, packet_ids: Sequence[str]) -> dict[str, Expiry]: ...
    def turns_with_items(
        self, user_id: str, dia_ids: list[str] | None = None
    ) -> list[tuple[StoredTurn, str | None, Expiry | None]]: ...
    def expired(self, now: float) -> list[tuple[str, str]]: ...
    def turns(
        self, user_id: str, dia_ids: list[str] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[StoredTurn]: ...
    def write_lock(self, user_id: str, blocking: bool = True) -> ContextManager[bool]: ...
    def reembed_lock(self, user_id: str, blocking: bool = True) -> ContextManager[bool]: ...
    def embedding(self, user_id: str) -> str | None: ...
    def set_embedding(self, user_id: str, identity: str, bump: bool = False) -> int: ...
    def store_model(self, claim: str | None = None) -> str | None: ...
    def set_store_model(self, identity: str) -> None: ...
    def add_counts(self, user_id: str, counts: dict[str, int]) -> None: ...
    def counters(self, user_id: str) -> dict[str, int]: ...
    def counts(self, user_id: str) -> dict[str, int]: ...
    def close(self) -> None: ...


@runtime_checkable
class VectorsStore(Protocol):
    """Packet vectors, one collection per user; ids are packet ids. Reads never create anything.

    Each vector is stored with its source: a digest of the document it was embedded from (None for vectors written
    before sources were), read back with `sources=True` or `sources(user)`; the runtime serves a vector only while
    its source is its packet's document as the records hold it (runtime/consistency.py)."""

    def upsert(
        self,
        user_id: str,
        ids: list[str],
        embeddings: list[list[float]],
        dia_ids: list[str],
        sources: Sequence[str | None] | None = None,
    ) -> None: ...
    def query(
        self, user_id: str, embedding: list[float], k: int, sources: bool = False
    ) -> list[tuple[Any, ...]]: ...  # (packet id, similarity[, source])
    def ids(self, user_id: str) -> set[str]: ...
    def sources(self, user_id: str) -> dict[str, str | None]: ...
    def vectors(
        self, user_id: str, ids: list[str] | None = None, sources: bool = False
    ) -> tuple[list[Any], ...]: ...  # (ids, vectors[, sources])
    def delete(self, user_id: str, ids: list[str]) -> None: ...
    def drop(self, user_id: str, scrub: bool = False) -> None: ...
    def drop_namespace(self, namespace: str) -> int: ...  # a moved store's collections on a server
    def damaged(self) -> bool: ...  # repair: whether the store itself fails its integrity check
    def quarantine(self) -> str | None: ...  # repair: a damaged store moved aside (where to), an empty one begun
    def loaded(self, user_id: str) -> bool: ...  # whether a write of the user's vectors is as quick as the next one
