"""Per-user counts of a store, read from its records, vectors and LLM ledger without the query or build planes
(`memcompile stats` opens no graph and loads no model)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .layout import user_key

NO_USAGE: dict[str, Any] = {"stages": {}, "total_tokens": 0}


class Unreadable(Exception):
    """Chroma's file does not answer the fast count exactly: ask Chroma itself."""


# One user's vectors in Chroma's metadata segment, when that segment has applied the collection's whole write log
_COUNT = """
SELECT COUNT(e.id), (SELECT m.seq_id FROM max_seq_id m WHERE m.segment_id = s.id),
       (SELECT MAX(q.seq_id) FROM embeddings_queue q WHERE q.topic LIKE '%/' || c.id)
FROM collections c JOIN segments s ON s.collection = c.id AND s.scope = 'METADATA'
LEFT JOIN embeddings e ON e.segment_id = s.id
WHERE c.name = ? GROUP BY s.id
"""


def local_vector_count(path: str | Path, user_id: str) -> int:
    """The user's vector count in a local store, read from Chroma's SQLite file read-only: the chromadb client takes
    longer to import than the rest of `stats` takes. Raises Unreadable whenever the file cannot tell exactly
    (another Chroma schema, a write not yet applied), so the caller asks Chroma."""
    db = Path(path) / "chroma" / "chroma.sqlite3"
    if not db.is_file():
        return 0  # no vector was ever written to this store
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute(_COUNT, (f"mc_{user_key(user_id)}",)).fetchall()  # ChromaVectors.name of a local store
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise Unreadable(str(exc)) from exc
    if not rows:
        return 0  # no collection: nothing stored for the user
    count: int
    count, applied, logged = rows[0]
    if len(rows) > 1 or (logged is not None and (applied is None or applied < logged)):
        raise Unreadable("write log not yet applied")
    return count


def vector_count(path: str | Path | None, chroma_url: str | None, records: Any, user_id: str) -> int:
    if path is not None and not chroma_url:
        try:
            return local_vector_count(path, user_id)
        except Unreadable:
            pass
    from .open import open_vectors

    return len(open_vectors(path, records, chroma_url).ids(user_id))


def user_stats(
    records: Any, count_vectors: Callable[[str], int | None], llm_store: Any, user_id: str, embedding_id: str | None
) -> dict[str, Any]:
    """packets, descriptors, cells, sessions, counters, vectors, vector_model and LLM usage of one user.
    embedding_id: the identity of the embedder in use (None: no dense channel; stored vectors are counted anyway)."""
    out: dict[str, Any] = dict(records.counts(user_id))
    out["counters"] = records.counters(user_id)
    out["vectors"] = count_vectors(user_id)
    recorded = records.embedding(user_id)
    # which model made them; another model's are re-embedded at the user's next add_turns
    out["vector_model"] = {"recorded": recorded, "current": embedding_id is None or recorded == embedding_id}
    out["usage"] = llm_store.usage(user_id) if llm_store is not None else dict(NO_USAGE)
    return out
