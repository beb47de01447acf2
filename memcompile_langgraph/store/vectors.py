"""Packet vectors in Chroma: one cosine collection per user, local (persistent or in memory) or a Chroma server."""

from __future__ import annotations

import functools
import sqlite3
import uuid
from pathlib import Path
from typing import TypedDict
from urllib.parse import urlparse

import chromadb
from chromadb.config import Settings
from chromadb.errors import ChromaError, NotFoundError

from .chroma_local import DirectChroma, LocalChroma, UnavailableChroma
from .protocols import VectorStoreError
from .records import user_key


def _guarded(method):
    """Chroma's own errors, whatever their kind, become one VectorStoreError saying where and what to do."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (ChromaError, sqlite3.Error, OSError, ConnectionError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise VectorStoreError(
                f"vector store {self.where} failed ({first}); the records are intact: "
                f"`memcompile repair` rebuilds the vectors from them"
            ) from exc

    return run


class _Settings(TypedDict):
    anonymized_telemetry: bool
    allow_reset: bool


_SETTINGS: _Settings = {"anonymized_telemetry": False, "allow_reset": False}


def make_client(path: str | Path | None, url: str | None = None):
    if url:
        u = urlparse(url if "://" in url else f"http://{url}")
        return chromadb.HttpClient(
            host=u.hostname or "127.0.0.1", port=u.port or 8000, ssl=u.scheme == "https", settings=Settings(**_SETTINGS)
        )
    if path is not None:
        return chromadb.PersistentClient(path=str(Path(path) / "chroma"), settings=Settings(**_SETTINGS))
    return chromadb.EphemeralClient(settings=Settings(**_SETTINGS))


def open_chroma(path: str | Path | None, url: str | None = None) -> DirectChroma | LocalChroma:
    """A local directory is shared across processes through LocalChroma; a server or memory client is used as is."""
    if path is not None and not url:
        return LocalChroma.shared(Path(path) / "chroma", Path(path) / "locks", lambda d: make_client(d.parent))
    return DirectChroma(make_client(path, url))


class VectorStore:
    def __init__(self, path: str | Path | None = None, url: str | None = None, namespace: str | None = None):
        self._path, self._url = path, url
        self.where = url or (str(Path(path) / "chroma") if path is not None else "in memory")
        self.chroma = self._connect()
        # in-memory clients share one process-wide system: keep each MemCompile's collections apart
        self.prefix = namespace or ("mc" if (path is not None or url) else f"mc{uuid.uuid4().hex[:8]}")
        self._collections: dict[str, object] = {}
        self._epoch = self.chroma.epoch
        # a server's collections can be dropped by any other client, unseen here: fetch the handle every time
        self._cache_handles = not url

    def _connect(self):
        try:
            return open_chroma(self._path, self._url)
        except (ChromaError, sqlite3.Error, OSError) as exc:
            if self._path is None or self._url:
                raise VectorStoreError(
                    f"vector store {self.where} cannot be opened: {str(exc).splitlines()[0][:200]}"
                ) from exc
            return UnavailableChroma(Path(self._path) / "chroma", exc)  # the records stay usable; repair moves it aside

    @property
    def client(self):
        return self.chroma.client

    def name(self, user_id: str) -> str:
        return f"{self.prefix}_{user_key(user_id)}"

    def collection(self, user_id: str, create: bool = True):
        """The user's collection (None when absent and not created); call inside `self.chroma.access`."""
        if self._epoch != self.chroma.epoch:  # the client was reopened: cached handles are stale
            self._collections.clear()
            self._epoch = self.chroma.epoch
        col = self._collections.get(user_id)
        if col is None and create:
            col = self.client.get_or_create_collection(
                self.name(user_id), metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
        elif col is None:
            try:
                col = self.client.get_collection(self.name(user_id), embedding_function=None)
            except (NotFoundError, ValueError):  # reads never create: a query for an unknown user writes nothing
                return None
        if self._cache_handles:
            self._collections[user_id] = col
        return col

    @_guarded
    def upsert(self, user_id: str, ids: list[str], embeddings: list[list[float]], dia_ids: list[str]) -> None:
        if not ids:
            return
        step = 2000  # below Chroma's max batch size
        with self.chroma.access(write=True):
            col = self.collection(user_id)
            for i in range(0, len(ids), step):
                col.upsert(
                    ids=ids[i : i + step],
                    embeddings=embeddings[i : i + step],
                    metadatas=[{"dia_id": d} for d in dia_ids[i : i + step]],
                )

    @_guarded
    def query(self, user_id: str, embedding: list[float], k: int) -> list[tuple[str, float]]:
        with self.chroma.access(write=False):
            col = self.collection(user_id, create=False)
            n = col.count() if col is not None else 0
            if n == 0:
                return []
            res = col.query(query_embeddings=[embedding], n_results=min(k, n), include=["distances"])
        return [(pid, 1.0 - float(dist)) for pid, dist in zip(res["ids"][0], res["distances"][0])]

    @_guarded
    def ids(self, user_id: str) -> set[str]:
        out: set[str] = set()
        with self.chroma.access(write=False):
            col = self.collection(user_id, create=False)
            n, step = (col.count() if col is not None else 0), 5000
            for off in range(0, n, step):
                out.update(col.get(limit=step, offset=off, include=[])["ids"])
        return out

    @_guarded
    def vectors(self, user_id: str, ids: list[str] | None = None) -> tuple[list[str], list[list[float]]]:
        """Stored (id, vector) pairs of the user, paged: all of them, or those of the given ids that exist."""
        out_ids: list[str] = []
        vectors: list = []
        step = 5000
        with self.chroma.access(write=False):
            col = self.collection(user_id, create=False)
            if col is None:
                return out_ids, vectors
            pages = (
                (col.get(ids=ids[i : i + step], include=["embeddings"]) for i in range(0, len(ids), step))
                if ids is not None
                else (col.get(limit=step, offset=off, include=["embeddings"]) for off in range(0, col.count(), step))
            )
            for got in pages:
                out_ids += got["ids"]
                vectors += list(got["embeddings"])
        return out_ids, vectors

    @_guarded
    def delete(self, user_id: str, ids: list[str]) -> None:
        """Remove vectors; in a local directory the collection is rebuilt without them, because Chroma's index
        files only mark deleted vectors and keep their bytes (a crash mid-rebuild is repaired by reconcile)."""
        if not ids:
            return
        with self.chroma.access(write=True):
            col = self.collection(user_id, create=False)
            if col is None:
                return
            col.delete(ids=list(ids))
            if not self.chroma.scrubs:
                return
            ids, vectors = self.vectors(user_id)
            dia_ids = [m["dia_id"] for m in self._metadatas(col, ids)]
            self._drop(user_id)
            self.upsert(user_id, ids, vectors, dia_ids)

    def _metadatas(self, col, ids: list[str]) -> list[dict]:
        step, out = 5000, []
        for i in range(0, len(ids), step):
            got = col.get(ids=ids[i : i + step], include=["metadatas"])
            by_id = dict(zip(got["ids"], got["metadatas"]))
            out += [by_id[x] for x in ids[i : i + step]]
        return out

    @_guarded
    def drop(self, user_id: str) -> None:
        with self.chroma.access(write=True):
            self._drop(user_id)

    def damaged(self) -> bool:
        """Whether the local Chroma directory's database fails its integrity check (a server is not checked)."""
        return self.chroma.damaged()

    def quarantine(self) -> str | None:
        """Moves a damaged local Chroma directory aside and starts an empty one; returns where it went."""
        aside = self.chroma.quarantine()
        if isinstance(self.chroma, UnavailableChroma):
            self.chroma = self._connect()
        self._collections.clear()
        self._epoch = self.chroma.epoch
        return aside

    def _drop(self, user_id: str) -> None:
        self._collections.pop(user_id, None)
        try:
            self.client.delete_collection(self.name(user_id))
        except (NotFoundError, ValueError):  # absent collection: nothing to forget
            return
        self.chroma.dropped()
        self.chroma.scrub()
