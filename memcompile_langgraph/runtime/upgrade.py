"""The re-embed job: a user's vectors made again off the write path, after the embedding model changed or when more
are missing or stale than a reader makes on the spot.

A writer that meets such a user does not embed its old packets (a large user's would hold up its add): when
the vectors are another model's, it drops them (step 2 below) and hands the user to this job, which runs on a thread
of its own; a read that finds more vectors to make than it makes on the spot starts it too, and `memcompile repair`
runs it in the caller's thread:

1. The user's re-embed lock, tried: one job per user across processes (another process's job: tried again every
   second, so a job killed there is resumed here).
2. Under the writer lock, while the records name another model or the marker: the user's vectors dropped, then this
   model recorded with a new version and epoch (every cache and snapshot file of the old vectors goes). From here on
   every stored vector is this model's: readers serve those present (the query asks the vector store while the
   index lacks some) and writers store their new packets' vectors as usual.
3. The packets whose vector is not current listed (missing, made from other content, made before digests), then
   made a chunk at a time: embedded outside the writer lock, stored under it while the records keep the epoch they
   were listed at (a delete, forget or another re-embed meanwhile: listed again).
4. Once a listing finds nothing left, a new version: every process reloads the user with its vectors complete.

The records say what is left at any point, so a crash or kill anywhere is resumed by the next job: the marker
(step 2 again), or this model with vectors missing (step 3 lists them)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from ..index.user import UserIndex
from ..store.rows import REEMBEDDING
from .engine import Engine, bundles

log = logging.getLogger(__name__)
CHUNK = 256  # packets embedded then stored at a time: the writer lock is held for one chunk's upsert only
RETRY_EVERY = 1.0  # seconds between tries of a re-embed lock another process holds
ROUNDS = 8  # listings a job makes before it leaves what is left to the next one (records that keep changing)

Progress = Callable[[int, int], None]  # (vectors made so far, vectors to make)


class Snapshots(Protocol):
    """What a job reads the user's records through: the memory's cache of snapshots (runtime/cache.py)."""

    engine: Engine
    reembeds: Jobs

    def snapshot(self, user_id: str) -> UserIndex: ...


def hand_over(snapshots: Snapshots, index: UserIndex) -> None:
    """As the user's writer (lock held), for vectors another model made: they are dropped now (step 2, quick), and the
    job makes them again; `index` (the writer's private next version) follows the records."""
    engine, user_id = snapshots.engine, index.user_id
    log.warning(
        "vectors of user %r were made by %s: they are made again in the background (or by `memcompile repair`); "
        "the dense channel serves the ones made so far",
        user_id,
        engine.records.embedding(user_id) or "an unrecorded model",
    )
    replace(engine, index)
    snapshots.reembeds.start(user_id)


def replace(engine: Engine, index: UserIndex | None, user_id: str = "") -> None:
    """Step 2, as the user's writer: the vectors dropped and this model recorded, with a new version and epoch;
    `index`, when given, follows (no vectors, the new head)."""
    user_id = index.user_id if index is not None else user_id
    engine.records.set_embedding(user_id, REEMBEDDING)  # a crash from here to the last line: done again
    engine.vectors.drop(user_id)  # also whatever a forget interrupted before its vectors left behind
    engine.records.set_embedding(user_id, str(engine.embedding_id), bump=True)
    if index is not None:
        index.clear_vectors()
        index.version, index.epoch, index.digest = engine.records.head(user_id)


def run(
    snapshots: Snapshots, user_id: str, progress: Progress | None = None, stop: threading.Event | None = None
) -> int:
    """The job in the calling thread: returns how many vectors it made, -1 when another process's job holds the
    user (or `stop` was set before it finished)."""
    engine = snapshots.engine
    if engine.embeddings is None:
        return 0
    with engine.records.reembed_lock(user_id, blocking=False) as held:
        if not held:
            return -1
        made = 0
        for _ in range(ROUNDS):
            if stop is not None and stop.is_set():
                return -1
            epoch, todo = _listed(snapshots, user_id)
            if epoch is None:
                return made  # the user is gone
            if not todo:
                with engine.records.write_lock(user_id):
                    if made and engine.records.head(user_id).epoch == epoch:
                        engine.records.set_embedding(user_id, str(engine.embedding_id), bump=True)
                    elif made:
                        continue
                if made:
                    log.info("vectors of user %r made again: %d", user_id, made)
                return made
            made += _make(snapshots, user_id, epoch, todo, made, progress, stop)
        return made


def _listed(snapshots: Snapshots, user_id: str) -> tuple[int | None, list[str]]:
    """(the records' epoch, the packets whose vector is not current), after step 2 where it is due; (None, []) when
    there is nothing for this memory to do (the user is gone, or this model is no longer the store's)."""
    engine = snapshots.engine
    with engine.records.write_lock(user_id):
        if engine.foreign_vectors(user_id):
            if not engine.makes_vectors():  # the store's model changed under this job: its workers re-embed
                return None, []
            replace(engine, None, user_id)
        head = engine.records.head(user_id)
    if not head.version:
        return None, []
    index = snapshots.snapshot(user_id)
    stored = engine.vectors.sources(user_id)
    current = engine.sources(bundles(index, index.packet_order))
    return head.epoch, [p for p, c in zip(index.packet_order, current) if stored.get(p) != c]


def _make(
    snapshots: Snapshots,
    user_id: str,
    epoch: int,
    todo: list[str],
    before: int,
    progress: Progress | None,
    stop: threading.Event | None,
) -> int:
    """Embeds and stores the listed packets a chunk at a time while the epoch holds; returns how many it stored."""
    engine, index = snapshots.engine, snapshots.snapshot(user_id)
    total, made = before + len(todo), 0
    for start in range(0, len(todo), CHUNK):
        if stop is not None and stop.is_set():
            break
        items = bundles(index, [p for p in todo[start : start + CHUNK] if p in index.packets])
        embedded = engine.packet_vectors(items)
        with engine.records.write_lock(user_id):
            if engine.records.head(user_id).epoch != epoch or engine.foreign_vectors(user_id):
                break  # deleted from, forgotten or re-embedded by another model since: listed again
            engine.store_vectors(user_id, items, embedded)
        made += len(items)
        if progress is not None:
            progress(before + made, total)
    return made


class Jobs:
    """The re-embed jobs of one memory, a daemon thread per user (the records keep what a thread cut short at exit
    left to do)."""

    def __init__(self, snapshots: Snapshots) -> None:
        self._snapshots = snapshots
        self._threads: dict[str, threading.Thread] = {}
        self._guard = threading.Lock()
        self.stopping = threading.Event()

    def start(self, user_id: str) -> None:
        with self._guard:
            running = self._threads.get(user_id)
            if self.stopping.is_set() or (running is not None and running.is_alive()):
                return
            thread = threading.Thread(target=self._run, args=(user_id,), name="memcompile-reembed", daemon=True)
            self._threads[user_id] = thread
        thread.start()

    def _run(self, user_id: str) -> None:
        step = [0]

        def logged(done: int, total: int) -> None:  # a line at each quarter of the way
            if 4 * done // total > step[0]:
                step[0] = 4 * done // total
                log.info("re-embedding user %r: %d/%d vectors", user_id, done, total)

        try:
            while run(self._snapshots, user_id, logged, self.stopping) < 0 and not self.stopping.wait(RETRY_EVERY):
                pass
        except Exception as exc:  # noqa: BLE001 - nobody waits on this thread: the next writer or repair resumes
            log.warning(
                "re-embedding user %r stopped (%s); its next writer or `memcompile repair` resumes", user_id, exc
            )

    def wait(self, timeout: float | None = None) -> bool:
        """Whether every job has ended (waiting up to timeout seconds for each)."""
        with self._guard:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in threads)

    def close(self) -> None:
        """Stops the jobs after their current chunk (the next writer or repair resumes them)."""
        self.stopping.set()
        self.wait()
