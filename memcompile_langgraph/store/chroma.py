"""Packet vectors in Chroma: one cosine collection per user, local (persistent or in memory) or a Chroma server."""

from __future__ import annotations

import functools
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict
from urllib.parse import urlparse

import chromadb
from chromadb.config import Settings
from chromadb.errors import ChromaError, NotFoundError

from .chroma_dir import DirectChroma, LocalChroma, UnavailableChroma
from .protocols import VectorStoreError
from .sqlite import user_key

SOURCE = "source"  # metadata key of what a vector was built from: a digest of the packet document it embedded


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


class ChromaVectors:
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
    def upsert(
        self,
        user_id: str,
        ids: list[str],
        embeddings: list[list[float]],
        dia_ids: list[str],
        sources: list[str | None] | None = None,
    ) -> None:
        """sources: what each vector was built from (Engine.sources), written with it; a
        vector given none keeps none (Chroma merges metadata on upsert: None removes the key)."""
        if not ids:
            return
        sources = sources if sources is not None else [None] * len(ids)
        metadatas = [{"dia_id": d, SOURCE: s} for d, s in zip(dia_ids, sources)]
        step = 2000  # below Chroma's max batch size
        with self.chroma.access(write=True):
            col = self.collection(user_id)
            for i in range(0, len(ids), step):
                col.upsert(
                    ids=ids[i : i + step], embeddings=embeddings[i : i + step], metadatas=metadatas[i : i + step]
                )

    @_guarded
    def query(self, user_id: str, embedding: list[float], k: int, sources: bool = False) -> list[tuple]:
        """(packet id, cosine) of the k nearest, best first; with sources, (packet id, cosine, source digest)."""
        with self.chroma.access(write=False):
            col = self.collection(user_id, create=False)
            n = col.count() if col is not None else 0
            if n == 0:
                return []
            include = ["distances", "metadatas"] if sources else ["distances"]
            res = col.query(query_embeddings=[embedding], n_results=min(k, n), include=include)
        hits = [(pid, 1.0 - float(dist)) for pid, dist in zip(res["ids"][0], res["distances"][0])]
        if sources:
            return [(pid, sim, _source(meta)) for (pid, sim), meta in zip(hits, res["metadatas"][0])]
        return hits

    @_guarded
    def ids(self, user_id: str) -> set[str]:
        with self.chroma.access(write=False):
            return {i for got in self._pages(user_id, None, []) for i in got["ids"]}

    @_guarded
    def sources(self, user_id: str) -> dict[str, str | None]:
        """Each stored vector's id with the digest of what it was built from (None: written before digests were)."""
        with self.chroma.access(write=False):
            return {
                i: _source(m)
                for got in self._pages(user_id, None, ["metadatas"])
                for i, m in zip(got["ids"], got["metadatas"])
            }

    @_guarded
    def vectors(self, user_id: str, ids: list[str] | None = None, sources: bool = False) -> tuple[list, ...]:
        """Stored (ids, vectors) of the user, paged: all of them, or those of the given ids that exist; with sources,
        (ids, vectors, source digests)."""
        out_ids: list[str] = []
        vectors: list = []
        found: list[str | None] = []
        with self.chroma.access(write=False):
            for got in self._pages(user_id, ids, ["embeddings", "metadatas"] if sources else ["embeddings"]):
                out_ids += got["ids"]
                vectors += list(got["embeddings"])
                if sources:
                    found += [_source(m) for m in got["metadatas"]]
        return (out_ids, vectors, found) if sources else (out_ids, vectors)

    def _pages(self, user_id: str, ids: list[str] | None, include: list[str]) -> Iterator[dict]:
        """Chroma `get` results of the user's collection (none when absent), in pages; call inside an access."""
        step = 5000
        col = self.collection(user_id, create=False)
        if col is None:
            return
        if ids is not None:
            for i in range(0, len(ids), step):
                yield col.get(ids=ids[i : i + step], include=include)
        else:
            for off in range(0, col.count(), step):
                yield col.get(limit=step, offset=off, include=include)

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
            kept, vectors, dia_ids, sources = [], [], [], []
            for got in self._pages(user_id, None, ["embeddings", "metadatas"]):
                kept += got["ids"]
                vectors += list(got["embeddings"])
                dia_ids += [m["dia_id"] for m in got["metadatas"]]
                sources += [_source(m) for m in got["metadatas"]]
            self._drop(user_id)
            self.upsert(user_id, kept, vectors, dia_ids, sources)

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


def _source(metadata: dict | None) -> str | None:
    return (metadata or {}).get(SOURCE)
