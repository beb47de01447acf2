"""Every lock of the runtime, in one place.

Lock order: a thread holding a lock may only take locks listed below it, never one above.
0. Re-embed lock of a user (runtime/upgrade.py): held by the one job that makes the user's vectors again, across
   processes, while it takes the writer lock below for each batch it stores (and the load lock, to list them).
   Stripe files of their own for SQLite (locks/reembed-N.lock), an advisory lock of its own for PostgreSQL; only
   ever tried, so a job never waits on another.
1. Writer lock of a user — `UserLocks` (per-process, re-entrant per thread) then the store's cross-process lock
   (for SQLite a `FileLock` on one of a fixed set of stripe files in <store>/locks/, chosen by a keyed hash of the
   user id, so users may share one across processes; within one store object `StripeLocks` shares a stripe's file
   lock among its users; a PostgreSQL advisory lock for PostgreSQL). Held by one unit of work: add_turns, an
   ingest-graph commit, delete_turns, forget, reembed, repair. A thread never holds two users' writer locks.
2. Load lock of a user (its UserState, runtime/user_state.py): held while that user's index is read from a snapshot file or rebuilt
   from the records. Never held across another user's work.
3. The cache map lock (runtime/cache.py): guards the LRU map of UserStates; held for map reads and updates
   only, never across I/O or embedding.
4. Store-internal locks, held for one statement or one Chroma operation: the SQLite connection mutex, the Chroma
   directory lock (store/chroma_dir.py: `FileLock` on chroma.lock), the LLM store mutex, the setup lock taken
   once while a store is created.
A lock may be *tried* out of order (blocking=False, giving up when busy): a reader holding a load lock tries the
writer lock to repair vectors or save a snapshot file; a try never waits, so it cannot deadlock. The cache's sweep
lock (runtime/cache.py) is only ever tried: one caller runs the periodic sweep, the others go on without it.
Waits between threads: a writer's embedding job (runtime/unit_of_work.py, on the host's background threads) waits
for its writer to decide whether its batch was committed; the writer always decides before it waits for the job,
and takes no lock the job holds (the job takes only store-internal locks).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path


class FileLock:
    """An fcntl lock on one file: shared or exclusive, blocking or not; released when its process dies."""

    def __init__(self, path: Path):
        self.path = path

    @contextlib.contextmanager
    def hold(self, exclusive: bool = True, blocking: bool = True) -> Iterator[bool]:
        """Yields whether the lock is held (False only when blocking=False and another process has it)."""
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        with open(self._open(), "rb") as fh:
            try:
                fcntl.flock(fh, mode if blocking else mode | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _open(self) -> int:
        try:  # 0600 whatever the umask: nobody else needs to open a lock of this store
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            if not self.path.exists():
                raise
            # a read-only volume (or folder): flock takes a descriptor opened for reading; its readers still exclude
            # each other's setup, and nothing there can write
            return os.open(self.path, os.O_RDONLY)


class StripeLocks:
    """Writer-lock stripe files of one records store object: a stripe's cross-process lock is taken once for all the
    users of this object that hash to it, and released by the last of them.

    Two users on one stripe exclude each other across processes (and across store objects), never within one: here
    `UserLocks` already keeps each user's writers apart, and a thread that held one user's stripe would otherwise
    make another thread's writer of an unrelated user wait (or, trying, give up)."""

    def __init__(self) -> None:
        self._stripes: dict[Path, _Stripe] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(self, path: Path, blocking: bool = True) -> Iterator[bool]:
        with self._guard:
            stripe = self._stripes.setdefault(path, _Stripe(path))
        # the stripe's mutex is held only while its file lock is taken or let go, never while a writer works
        if not stripe.mutex.acquire(blocking=blocking):
            yield False
            return
        try:
            if not stripe.users:
                stripe.holding = FileLock(path).hold(blocking=blocking)
                if not stripe.holding.__enter__():
                    stripe.holding.__exit__(None, None, None)
                    stripe.holding = None
                    yield False
                    return
            stripe.users += 1
        finally:
            stripe.mutex.release()
        try:
            yield True
        finally:
            with stripe.mutex:
                stripe.users -= 1
                if not stripe.users and stripe.holding is not None:
                    holding, stripe.holding = stripe.holding, None
                    holding.__exit__(None, None, None)


class _Stripe:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.mutex = threading.Lock()
        self.users = 0  # writers of this store object inside the stripe's file lock (under mutex)
        self.holding: AbstractContextManager[bool] | None = None


class UserLocks:
    """One re-entrant lock per user for the threads of this process, in front of a cross-process lock.

    Re-entrant within a thread: a unit of work that holds a user's writer lock may call code that takes it again
    (the cross-process lock is taken by the outermost holder only)."""

    def __init__(self) -> None:
        self._locks: dict[str, _Entry] = {}  # an entry lives only while someone holds or waits for it
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.contextmanager
    def hold(
        self, key: str, outer: Callable[[bool], AbstractContextManager[bool]], blocking: bool = True
    ) -> Iterator[bool]:
        """`outer(blocking)`: a context manager yielding whether the cross-process lock was taken."""
        with self._guard:
            entry = self._locks.setdefault(key, _Entry())
            entry.holders += 1
        try:
            if not entry.lock.acquire(blocking=blocking):
                yield False
                return
            depth = entry.depth  # touched only by the thread holding the RLock
            entry.depth = depth + 1
            try:
                if depth:
                    yield True
                    return
                with outer(blocking) as held:
                    yield held
            finally:
                entry.depth = depth
                entry.lock.release()
        finally:
            with self._guard:
                entry.holders -= 1
                if not entry.holders:
                    del self._locks[key]


class _Entry:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.holders = 0  # threads holding or waiting for it (under UserLocks._guard)
        self.depth = 0
