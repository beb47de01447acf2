"""What MemCompile offers besides adding and compiling: its records read back, counted and maintained."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from .ingest.turn_input import EXPIRES_AT, expiry_text, turn_record
from .runtime import maintenance, telemetry
from .runtime.engine import Engine
from .runtime.host import Host
from .runtime.maintenance import UserProgress
from .store.protocols import StoredTurn, StoreError
from .text.terms import normalize_ids
from .users import validate_user_id

log = logging.getLogger(__name__)


class Upkeep:
    host: Host

    @property
    def engine(self) -> Engine:
        return self.host.engine

    def stats(self, user_id: str = "default") -> dict[str, Any]:
        return self.host.stats(validate_user_id(user_id))

    def usage(self, user_id: str = "default") -> dict[str, Any]:
        """LLM token ledger per stage and phase (construction / query / evaluation); empty without LLM stages."""
        return self.engine.usage(validate_user_id(user_id))

    def users(self) -> list[str]:
        return self.engine.records.users()

    def turns(
        self, user_id: str = "default", dia_ids: Iterable[str] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[StoredTurn]:
        """Stored turns in dialogue order (all, or those with the given dia_ids), with when they were stored."""
        ids = None if dia_ids is None else normalize_ids(dia_ids)
        return self.engine.records.turns(validate_user_id(user_id), ids, limit, offset)

    def export_turns(self, user_id: str, page: int = 1000) -> Iterator[dict[str, Any]]:
        """Every stored turn of the user in dialogue order, as add_turns takes it back (with `stored_at`, when it
        was stored, which add_turns ignores): adding them to another store, of either backend, gives the same memory.

        >>> mem = MemCompile(None, dense=False)
        >>> _ = mem.add_turns([{"speaker": "Ann", "text": "I adopted a beagle.", "time": "2024-03-04"}], user_id="ann")
        >>> [(t["dia_id"], t["speaker"], t["text"]) for t in mem.export_turns("ann")]
        [('D1:1', 'Ann', 'I adopted a beagle.')]
        """
        user_id = validate_user_id(user_id)
        offset = 0
        while batch := self.engine.records.turns(user_id, None, page, offset):
            # a turn stored with a time to live carries its end: an import must not keep it longer
            ends = {
                t.packet.packet_id: expiry.at
                for t, _, expiry in self.engine.records.turns_with_items(user_id, [s.packet.dia_id for s in batch])
                if expiry is not None
            }
            for stored in batch:
                at = datetime.fromtimestamp(stored.created_at, timezone.utc).isoformat(timespec="seconds")
                record = {**turn_record(stored.packet), "stored_at": at}
                if stored.packet.packet_id in ends:
                    record[EXPIRES_AT] = expiry_text(ends[stored.packet.packet_id])
                yield record
            offset += len(batch)

    def count(self, user_id: str, counts: dict[str, int]) -> None:
        """Adds to the user's counters (what `stats` shows), e.g. input lines a loader skipped."""
        self.engine.records.add_counts(validate_user_id(user_id), counts)

    def forget(self, user_id: str) -> dict[str, int]:
        """Remove every record, vector, snapshot file, cached LLM reply and ledger row of the user (idempotent:
        re-run after a crash); returns {"forgot_turns": how many turns were stored}, as MCP's forget does."""
        user_id = validate_user_id(user_id)
        with telemetry.delete_memory_store(user_id):
            return {"forgot_turns": maintenance.forget(self.host, user_id)}

    def finish_removals(self) -> None:
        """Finishes the forgets, deletes and replaces that a crash or a kill interrupted, and sweeps what a moved
        store left under its earlier id (run when the memory opens)."""
        try:
            maintenance.finish_forgets(self.host)
            maintenance.finish_deletes(self.host)
            maintenance.sweep_moved(self.host)
        except StoreError as exc:  # e.g. a read-only copy of the store: its next writable open finishes them
            log.warning("could not finish removals here (%s); the next open of the store does", exc)

    def delete_turns(self, user_id: str, dia_ids: Iterable[str]) -> int:
        """Remove single turns with their descriptors and Cell memberships; returns how many were removed."""
        user_id, ids = validate_user_id(user_id), normalize_ids(dia_ids)
        with telemetry.delete_memory(user_id, ids) as span:
            removed = maintenance.delete_turns(self.host, user_id, ids)
            span.counts("delete_turns", {"removed": removed})
        return removed

    def sweep_expired(self) -> int:
        """Remove every turn whose time to live has passed (add_turns' `ttl`, a store item's), as delete_turns
        removes; returns how many."""
        return maintenance.delete_expired(self.host, time.time())

    def reembed(self, user_id: str = "default") -> int:
        """Embed every packet of the user again with this memory's model, which it makes the store's (switch_model);
        returns how many packets were embedded."""
        user_id = validate_user_id(user_id)
        return maintenance.reembed_user(self.host, user_id) if self.engine.embeddings is not None else 0

    def switch_model(self, now: bool = False, progress: UserProgress | None = None) -> dict[str, int]:
        """Makes this memory's embedding model the store's. A store has one model at a time: workers on it make
        vectors and re-embed each user made by another as they write to it (in the background); workers on any other
        model answer from the lexical channels and store turns without vectors, said once. now: every user
        re-embedded here, as `repair` does (progress as there). Returns the vectors made per user (none without
        now). `memcompile reembed` runs it with now."""
        if self.engine.embedding_id is None:
            raise ValueError("this memory has no embedding model to make the store's (dense=False)")
        self.engine.check_store()
        self.engine.records.set_store_model(self.engine.embedding_id)
        return maintenance.repair(self.host, None, progress)["made"] if now else {}

    def repair(self, user_id: str | None = None, progress: UserProgress | None = None) -> dict[str, Any]:
        """Rebuild vectors from the records: a damaged local vector store is moved aside and every user re-embedded;
        else the user (or every user) gets orphans removed and every vector that is not current made again (missing,
        made by another model, from other content, or before vectors carried digests). progress(user, made, to
        make) is called as vectors are stored; "made" in the result counts them per user."""
        user = None if user_id is None else validate_user_id(user_id)
        return maintenance.repair(self.host, user, progress)
