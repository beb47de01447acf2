"""Freed memory handed back to the system after work that allocates and frees a lot.

A bulk ingest allocates and frees many blocks of every size from several threads (the writer, the embedding
job, the vector store's own threads): glibc keeps the freed pages inside its arenas, so the process's resident
memory stays far above what it holds. `malloc_trim(0)` returns the free pages of every arena to the system; it
takes a few milliseconds, so it runs after batches of work, never per query or per single turn. Elsewhere than
glibc it does nothing."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable


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
