"""Writes that are not ingest: forget a user, delete turns, re-embed, repair. Each holds the user's writer lock
and leaves the cache and snapshot files with nothing of what it removed."""

from __future__ import annotations

from typing import Any

from ..store.open import namespace_of
from ..store.protocols import VectorStoreError
from ..store.rows import REEMBEDDING
from .consistency import reconcile, reembed
from .host import Host
from .user_state import Repair


def forget(host: Host, user_id: str) -> None:
    engine = host.engine
    with engine.records.write_lock(user_id):
        engine.check_store()
        engine.records.forget(user_id)  # recorded as pending in the same transaction
        _forget_derived(host, user_id)


def finish_forgets(host: Host) -> list[str]:
    """Finishes the forgets a crash or a kill interrupted after their records went (each by the first process that
    gets the user's writer lock; a writer that holds it is finishing it); returns the users finished."""
    engine = host.engine
    done = []
    for user_id in engine.records.pending_forgets():
        with engine.records.write_lock(user_id, blocking=False) as held:
            if held and user_id in engine.records.pending_forgets():
                _forget_derived(host, user_id)
                done.append(user_id)
    return done


def sweep_moved(host: Host) -> int:
    """Removes what was derived under the store ids the records had before they were moved here, once the records
    those ids were bound to are gone (a move, not a copy): collections on a Chroma server and snapshot files; and
    this machine's snapshot folders of other stores moved away. Returns how many folders, files and collections."""
    engine = host.engine
    removed = 0
    files = host.cache.files
    if files is not None:
        removed += files.sweep_moved(engine.records.holds)
    earlier = engine.records.moved()
    if earlier and files is not None and engine.path is not None:
        removed += files.clear()  # the store directory's own folder: every file in it came with the move
    for moved in earlier:
        if moved.held is False:
            removed += engine.vectors.drop_namespace(namespace_of(moved.store_id))
        if moved.held is not None:  # a copy's original keeps its own; a moved store's leftovers are gone now
            engine.records.moved_swept(moved.store_id)
    return removed


def _forget_derived(host: Host, user_id: str) -> None:
    """What is derived from a forgotten user's records, in any order a crash can repeat: the pending mark goes last."""
    engine = host.engine
    engine.vectors.drop(user_id, scrub=True)  # also when a crash left no collection to drop, only its files
    if engine.llm_store is not None:
        engine.llm_store.delete_user(user_id, whole_user=True)
    host.cache.invalidate(user_id)
    engine.records.forget_done(user_id)


def delete_turns(host: Host, user_id: str, dia_ids: list[str]) -> int:
    engine = host.engine
    with engine.records.write_lock(user_id):
        engine.check_store()
        index = host.cache.snapshot(user_id)
        pids = [index.by_dia[d] for d in dict.fromkeys(dia_ids) if d in index.by_dia]
        if pids:
            engine.records.delete_packets(user_id, pids)
            engine.vectors.delete(user_id, pids)
            if engine.llm_store is not None:  # cached replies may quote the deleted turns
                engine.llm_store.delete_user(user_id, whole_user=False)
            host.cache.invalidate(user_id)
        return len(pids)


def reembed_user(host: Host, user_id: str) -> int:
    engine = host.engine
    with engine.records.write_lock(user_id):
        engine.check_store()
        made_by = engine.records.embedding(user_id) or ""
        # marked first: the load then neither repairs nor reads the vectors that are about to be replaced
        engine.records.set_embedding(user_id, REEMBEDDING)
        index = host.cache.snapshot(user_id).fork()
        reembed(engine, index, made_by)
        host.cache.invalidate(user_id)
        host.cache.publish(index)
    return len(index.packets)


def repair(host: Host, user_id: str | None) -> dict[str, Any]:
    engine = host.engine
    engine.check_store()
    aside = engine.vectors.quarantine() if engine.vectors.damaged() else None
    users = engine.records.users() if aside or user_id is None else [user_id]
    for user in users:
        with engine.records.write_lock(user):
            index = host.cache.snapshot(user).fork()
            try:
                whole = (
                    aside is not None
                    or engine.foreign_vectors(user)
                    or reconcile(engine, index, writer=True, restamp=True) is not Repair.DONE
                )
            except VectorStoreError:
                whole = True
            if whole:
                reembed(engine, index)
            host.cache.invalidate(user)
            host.cache.publish(index)
    return {"moved_aside": aside, "users": {u: engine.records.counts(u)["packets"] for u in users}}
