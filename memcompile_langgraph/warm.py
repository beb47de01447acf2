"""What the first write after opening would otherwise pay for, done when a process that writes starts.

The first add after opening a store would wait for chromadb's import and client and the ingest graph's import: a
process that writes (a server, a worker) calls `MemCompile.warm_up()` once at its start for them. The per-user
parts are not warmed: on a background thread beside the first query they would slow that query by more than they
save (both hold the GIL much of the time), and the first add does not wait for them: a fork layers the maps of an
index read from a snapshot file instead of copying them (index/persistent.py), and a large user's first add
publishes before Chroma has loaded its collection (runtime/unit_of_work.py). A command that only reads never warms
up (it would load Chroma for nothing).
"""

from __future__ import annotations

import logging

from .runtime.engine import Engine
from .store.open import LazyVectors

log = logging.getLogger(__name__)


def open_for_writes(engine: Engine) -> None:
    """The vector store opened, the ingest graph imported and the model loaded (on another thread meanwhile: its
    session is built with the GIL released). A failure is left to the first write, which meets it again."""
    preload = getattr(engine.embeddings, "preload", None)
    if preload is not None:
        preload()
    try:
        if engine.embeddings is not None and isinstance(engine.vectors, LazyVectors):
            engine.vectors.store()
        from .add_turns import ingest_turns  # noqa: F401 - the ingest graph is built at its import
    except Exception as exc:  # noqa: BLE001 - best effort: the write does the same and raises what fails
        log.debug("warm-up for writes failed: %s", exc)
