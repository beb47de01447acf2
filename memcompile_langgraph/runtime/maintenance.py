"""Writes that are not ingest: forget a user, delete turns, re-embed, repair. Each holds the user's writer lock
(repair: while it checks; its re-embed job takes it per chunk) and leaves the cache and snapshot files with nothing
of what it removed."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from ..store.open import namespace_of
from ..store.protocols import VectorStoreError
from ..store.rows import REEMBEDDING
from . import upgrade
from .consistency import reconcile, reembed
from .host import Host

UserProgress = Callable[[str, int, int], None]  # (user, vectors made so far, vectors to make)


def forget(host: Host, user_id: str) -> int:
    """Forgets the user; returns how many turns were stored."""
    engine = host.engine
    with engine.records.write_lock(user_id):
        engine.check_store()
        turns = engine.records.counts(user_id)["packets"]
        engine.records.forget(user_id)  # recorded as pending in the same transaction
        _forget_derived(host, user_id)
    return turns


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
        removed += files.drop_all()  # the store directory's own folder: every file in it came with the move
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
    host.cache.drop(user_id)
    engine.records.forget_done(user_id)


def delete_turns(host: Host, user_id: str, dia_ids: list[str]) -> int:
    engine = host.engine
    with engine.records.write_lock(user_id):
        engine.check_store()
        index = host.cache.snapshot(user_id)
        pids = [index.by_dia[d] for d in dict.fromkeys(dia_ids) if d in index.by_dia]
        if pids:
            _remove(host, user_id, pids)
        return len(pids)


def delete_expired(host: Host, now: float) -> int:
    """Removes every packet whose expiry passed, as delete_turns removes; returns how many. Each user's are checked
    again under its writer lock (a read may have refreshed them meanwhile)."""
    engine = host.engine
    by_user: dict[str, list[str]] = {}
    for user_id, packet_id in engine.records.expired(now):
        by_user.setdefault(user_id, []).append(packet_id)
    removed = 0
    for user_id, packet_ids in by_user.items():
        with engine.records.write_lock(user_id):
            engine.check_store()
            expiries = engine.records.expiries(user_id, packet_ids)
            pids = [p for p in packet_ids if p in expiries and expiries[p].at <= now]
            if pids:
                _remove(host, user_id, pids)
                removed += len(pids)
    return removed


def _remove(host: Host, user_id: str, packet_ids: list[str]) -> None:
    """The packets' records, vectors and the LLM replies that may quote them (the caller holds the writer lock)."""
    engine = host.engine
    engine.records.delete_packets(user_id, packet_ids)  # recorded as pending in the same transaction
    engine.drop_removed(user_id, packet_ids)
    host.cache.drop(user_id)


def finish_deletes(host: Host) -> list[str]:
    """Finishes the deletes and replaces a crash or a kill interrupted after their records went: the removed packets'
    vectors and cached LLM replies go (by the first process that gets the user's writer lock). A packet stored again
    since keeps its vector. Returns the users finished."""
    engine = host.engine
    done = []
    for user_id in engine.records.pending_removals():
        with engine.records.write_lock(user_id, blocking=False) as held:
            removed = engine.records.pending_removals().get(user_id) if held else None
            if removed is not None:
                stored = host.cache.snapshot(user_id).packets
                engine.drop_removed(user_id, [p for p in removed if p not in stored])
                done.append(user_id)
    return done


def reembed_user(host: Host, user_id: str) -> int:
    engine = host.engine
    with engine.records.write_lock(user_id):
        engine.check_store()
        made_by = engine.records.embedding(user_id) or ""
        engine.records.set_store_model(str(engine.embedding_id))  # an explicit re-embed switches the store's model
        # marked first: the load then neither repairs nor reads the vectors that are about to be replaced
        engine.records.set_embedding(user_id, REEMBEDDING)
        index = host.cache.snapshot(user_id).fork()
        reembed(engine, index, made_by)
        host.cache.drop(user_id)
        host.cache.publish(index)
    return len(index.packets)


def repair(host: Host, user_id: str | None, progress: UserProgress | None = None) -> dict[str, Any]:
    """Per user: every vector that is not current made by the re-embed job, here (progress(user, made, to make) as
    it goes; the user's writers go on meanwhile), then orphans removed."""
    engine = host.engine
    engine.check_store()
    aside = engine.vectors.quarantine() if engine.vectors.damaged() else None
    users = engine.records.users() if aside or user_id is None else [user_id]
    made = {}
    for user in users:
        step = None if progress is None else functools.partial(progress, user)
        try:
            made[user] = _reembed_here(host, user, step)
        except VectorStoreError:
            with engine.records.write_lock(user):
                engine.records.set_embedding(user, REEMBEDDING)  # the job drops the user's vectors, then makes all
            made[user] = _reembed_here(host, user, step)
        with engine.records.write_lock(user):
            index = host.cache.snapshot(user).fork()
            reconcile(engine, index)  # what a read does: orphans go
            host.cache.drop(user)
            host.cache.publish(index)
    return {"moved_aside": aside, "users": {u: engine.records.counts(u)["packets"] for u in users}, "made": made}


def _reembed_here(host: Host, user_id: str, progress: upgrade.Progress | None) -> int:
    """The re-embed job in this thread, once another's (a process's, or this memory's own thread) has ended."""
    while (count := upgrade.run(host.cache, user_id, progress)) < 0:
        time.sleep(upgrade.RETRY_EVERY)
    return count
