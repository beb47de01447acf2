"""The cyclic garbage collector paused while a user's index is built from many small objects.

A 20k-turn snapshot is ~1M objects (records, term sets, postings). With the collector on, every allocation burst
triggers collections that walk the ever-growing young heap again: half of the load time. The objects are records
and containers without reference cycles, so deferring collection loses nothing; the collector resumes when the
last concurrent load ends.

They are long-lived, too: left in the youngest generation, the first collections after the load would walk all
of them once per generation (a pause in each of the first queries after a large load). So the last load to end moves every
tracked object to the oldest generation (gc.freeze() then gc.unfreeze(), as documented), which only full
collections visit, unless the host process keeps objects frozen itself (then it is left as it is)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
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
