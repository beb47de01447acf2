"""Every lock of the runtime, in one place.

Lock order: a thread holding a lock may only take locks listed below it, never one above.
1. Writer lock of a user — `UserLocks` (per-process, re-entrant per thread) then the store's cross-process lock
   (a `FileLock` in <store>/locks/ for SQLite; a PostgreSQL advisory lock for PostgreSQL). Held by one unit of
   work: add_turns, an ingest-graph commit, delete_turns, forget, reembed, repair.
2. Load lock of a user (runtime/cache.py): held while that user's index is read from a snapshot file or rebuilt
   from the records. Never held across another user's work.
3. The cache map lock (runtime/cache.py): guards the dict of published snapshots; held for dict reads and
   replacements only, never across I/O or embedding.
4. Store-internal locks, held for one statement or one Chroma operation: the SQLite connection mutex, the Chroma
   directory lock (store/chroma_local.py: `FileLock` on chroma.lock), the LLM store mutex, the setup lock taken
   once while a store is created.
A lock may be *tried* out of order (blocking=False, giving up when busy): a reader holding a load lock tries the
writer lock to repair vectors or save a snapshot file; a try never waits, so it cannot deadlock.
Waits between threads: a writer's embedding job (runtime/unit_of_work.py, on the engine's background threads) waits
for its writer to decide whether its batch was committed; the writer always decides before it waits for the job,
and takes no lock the job holds (the job takes only store-internal locks).
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from pathlib import Path


class FileLock:
    """An fcntl lock on one file: shared or exclusive, blocking or not; released when its process dies."""

    def __init__(self, path: Path):
        self.path = path

    @contextlib.contextmanager
    def hold(self, exclusive: bool = True, blocking: bool = True) -> Iterator[bool]:
        """Yields whether the lock is held (False only when blocking=False and another process has it)."""
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        with open(self.path, "a+") as fh:
            try:
                fcntl.flock(fh, mode if blocking else mode | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


class UserLocks:
    """One re-entrant lock per user for the threads of this process, in front of a cross-process lock.

    Re-entrant within a thread: a unit of work that holds a user's writer lock may call code that takes it again
    (the cross-process lock is taken by the outermost holder only)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.RLock] = {}
        self._depth: dict[str, int] = {}  # per user, touched only by the thread holding its RLock
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(self, key: str, outer, blocking: bool = True) -> Iterator[bool]:
        """`outer(blocking)`: a context manager yielding whether the cross-process lock was taken."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.RLock())
        if not lock.acquire(blocking=blocking):
            yield False
            return
        depth = self._depth.get(key, 0)
        self._depth[key] = depth + 1
        try:
            if depth:
                yield True
                return
            with outer(blocking) as held:
                yield held
        finally:
            self._depth[key] = depth
            lock.release()
