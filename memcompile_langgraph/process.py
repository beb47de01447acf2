"""Process-wide memory utilities: the cyclic collector paused while an index is built, and freed memory handed back
to the system after bulk work.

The collector: a large snapshot is millions of objects (records, term sets, postings). With the collector on, every
allocation burst triggers collections that walk the ever-growing young heap again, much of the load time. The
objects are records and containers without reference cycles, so deferring collection loses nothing; the collector
resumes when the last concurrent load ends. They are long-lived, too: left in the youngest generation, the first
collections after the load would walk all of them once per generation (a pause in each of the first queries after a
large load). So the last load to end moves every tracked object to the oldest generation (gc.freeze() then
gc.unfreeze(), as documented), which only full collections visit, unless the host process keeps objects frozen
itself (then it is left as it is).

Freed memory: a bulk ingest allocates and frees many blocks of every size from several threads (the writer, the
embedding job, the vector store's own threads): glibc keeps the freed pages inside its arenas, so the process's
resident memory stays far above what it holds. `malloc_trim(0)` returns the free pages of every arena to the
system; it is not free, so it runs after batches of work, never per query or per single turn.
Elsewhere than glibc it does nothing."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                if _was_enabled:
                    gc.enable()


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim  # the C library the interpreter runs on
    except (OSError, AttributeError):  # a C library without it (musl)
        return None
    return trim


_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Return the allocator's free pages to the system (glibc); a no-op where the C library cannot."""
    if _TRIM is not None:
        _TRIM(0)
