"""Packet vectors in Chroma: one cosine collection per user, local (persistent or in memory) or a Chroma server."""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, Literal, ParamSpec, TypedDict, TypeVar, Union, cast, overload

import chromadb
import httpx
from chromadb.api import ServerAPI
from chromadb.config import Settings
from chromadb.errors import ChromaError, NotFoundError
from chromadb.telemetry.product import ProductTelemetryClient, ProductTelemetryEvent
from typing_extensions import override

from .chroma_dir import DirectChroma, LocalChroma, UnavailableChroma
from .chroma_server import TIMEOUT_ENV, Deadline, heartbeat, server_address, server_timeout
from .layout import user_key
from .protocols import VectorStoreError

if TYPE_CHECKING:
    from typing import TypeAlias

    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Embedding, GetResult, Include, Metadata, PyEmbedding

    # one vector as Chroma takes and returns it: an array (what `get` returns) or a sequence of floats
    Vector: TypeAlias = Union[Embedding, PyEmbedding]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")

OPEN_INDEXES = 64  # user indexes a local Chroma keeps loaded when the memory names no bound (its cache_size's default)
SOURCE = "source"  # metadata key of what a vector was built from: a digest of the packet document it embedded
log = logging.getLogger(__name__)


def _guarded(method: Callable[Concatenate[ChromaVectors, _P], _R]) -> Callable[Concatenate[ChromaVectors, _P], _R]:
    """Chroma's own errors, whatever their kind, become one VectorStoreError saying where and what to do. On a
    server, the whole operation (all the requests chromadb makes for it) has one deadline, and a server that let
    it pass is not asked again for as long: the next calls fail at once with the same line instead of each waiting."""

    @functools.wraps(method)
    def run(self: ChromaVectors, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        outermost = getattr(_DEADLINE, "at", None) is None
        deadline: AbstractContextManager[Deadline | None] = contextlib.nullcontext(None)
        if outermost and self._url:
            if time.monotonic() < self._silent_until:
                raise VectorStoreError(self._silent_line)
            _DEADLINE.at = time.monotonic() + server_timeout()
            session = _session(self.chroma)
            if session is not None:  # a server answering a byte at a time passes every per-request timeout
                deadline = Deadline([session], server_timeout())
        try:
            with deadline as watch:
                return method(self, *args, **kwargs)
        except Exception as exc:
            if not _failed_store(exc):
                raise
            ended = watch is not None and watch.fired
            reason = f"{_no_answer()}, only part of one" if ended else _reason(exc)
            line = (
                f"vector store {self.where} failed ({reason}); the records are intact: "
                f"`memcompile repair` rebuilds the vectors from them"
            )
            if outermost and self._url and (ended or _timed_out(exc)):
                self._silent_until, self._silent_line = time.monotonic() + server_timeout(), line
            raise VectorStoreError(line) from exc
        finally:
            if outermost:
                _DEADLINE.at = None

    return run


# `at`: when the current operation on a Chroma server must be done (monotonic); `sessions`: the HTTP sessions a
# client being constructed has made so far (its deadline ends their connections)
_DEADLINE = threading.local()


def _bounded(request: httpx.Request) -> None:
    """An httpx request hook: each request of an operation waits at most what is left of the operation's deadline."""
    at = getattr(_DEADLINE, "at", None)
    if at is None:
        return
    left = at - time.monotonic()
    if left <= 0:
        raise httpx.ReadTimeout("the operation's deadline passed", request=request)
    request.extensions["timeout"] = httpx.Timeout(left).as_dict()


def _session(chroma: object) -> httpx.Client | None:
    """The HTTP session of a Chroma server's client (None for a local one, or a chromadb that keeps it elsewhere)."""
    session = getattr(getattr(getattr(chroma, "client", None), "_server", None), "_session", None)
    return session if isinstance(session, httpx.Client) else None


def _timed_out(exc: BaseException) -> bool:
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, httpx.TimeoutException):
        cause = cause.__cause__ or cause.__context__
    return cause is not None


class _Settings(TypedDict):
    anonymized_telemetry: bool
    allow_reset: bool


_SETTINGS: _Settings = {"anonymized_telemetry": False, "allow_reset": False}


def make_client(path: str | Path | None, url: str | None = None, open_indexes: int = OPEN_INDEXES) -> ClientAPI:
    """A client of the server at url, else of the directory's Chroma (keeping at most `open_indexes` user indexes
    loaded, each with its four open files), else in memory."""
    if url:
        host, port, ssl = server_address(url)
        timeout = server_timeout()
        # chromadb's HTTP client waits forever for every answer (1.5 sets no timeout and has no setting for one),
        # its constructor's own requests included: ask the server first, bounded, then construct the client within
        # one deadline, its sessions bounded as they are made (_SessionBounds)
        heartbeat(url, timeout)
        settings = Settings(**_SETTINGS, chroma_product_telemetry_impl=f"{__name__}.{_SessionBounds.__name__}")
        sessions: list[httpx.Client] = []
        _DEADLINE.at, _DEADLINE.sessions = time.monotonic() + timeout, sessions
        deadline = Deadline(sessions, timeout)
        try:
            with deadline:
                return chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        except Exception as exc:
            if deadline.fired:
                raise httpx.ReadTimeout(_no_answer()) from exc
            raise
        finally:
            _DEADLINE.at = _DEADLINE.sessions = None
    if path is not None:
        directory = str(Path(path) / "chroma")
        _bounded_system(Settings(**_SETTINGS, is_persistent=True, persist_directory=directory), open_indexes)
        return chromadb.PersistentClient(path=directory, settings=Settings(**_SETTINGS))
    return chromadb.EphemeralClient(settings=Settings(**_SETTINGS))


class _SessionBounds(ProductTelemetryClient):
    """Bounds the HTTP session of each chromadb server client as its system starts, before the client's first
    request: chromadb makes the session and asks the server (identity, tenant, database) inside its constructor, and
    the product telemetry client is the one component it lets a setting replace that starts in between. Sends
    nothing, as telemetry is off anyway (_SETTINGS)."""

    @override  # chromadb's components insist on the marker
    def capture(self, event: ProductTelemetryEvent) -> None:
        pass

    @override
    def start(self) -> None:
        super().start()
        server = self._system.instance(ServerAPI)  # type: ignore[type-abstract]  # as chromadb asks for it
        session = getattr(server, "_session", None)
        if not isinstance(session, httpx.Client):
            where = f"{self._system.settings.chroma_server_host}:{self._system.settings.chroma_server_http_port}"
            log.warning("cannot give this chromadb's HTTP client a timeout: calls to %s may wait forever", where)
            return
        session.timeout = httpx.Timeout(server_timeout())
        session.event_hooks["request"] = [*session.event_hooks["request"], _bounded]
        constructing = getattr(_DEADLINE, "sessions", None)
        if constructing is not None:
            constructing.append(session)


def _bounded_system(settings: Settings, open_indexes: int) -> None:
    """Starts Chroma's system for a directory as its PersistentClient would, but with its cache of loaded indexes
    bounded by `open_indexes`: chromadb sizes it by the open-files limit alone (a fifth of it), so a process serving
    many users would keep every index it touched, memory and files, until that limit stopped it. Chroma holds at least
    one index per shard of that cache (about 64) whatever the bound. A system already started is left as it is."""
    from chromadb.api import ServerAPI
    from chromadb.api.shared_system_client import SharedSystemClient
    from chromadb.config import System
    from chromadb.telemetry.product import ProductTelemetryClient

    identifier = SharedSystemClient._get_identifier_from_settings(settings)
    if identifier in SharedSystemClient._identifier_to_system:
        return
    system = System(settings)
    SharedSystemClient._identifier_to_system[identifier] = system
    system.instance(ProductTelemetryClient)  # type: ignore[type-abstract]  # as chromadb asks for its components
    api = system.instance(ServerAPI)  # type: ignore[type-abstract]
    if hasattr(api, "hnsw_cache_size"):  # the Rust core's API, which reads it when the system starts
        api.hnsw_cache_size = max(1, open_indexes)
    system.start()


def open_chroma(
    path: str | Path | None, url: str | None = None, open_indexes: int = OPEN_INDEXES
) -> DirectChroma | LocalChroma:
    """A local directory is shared across processes through LocalChroma (its first opener in this process sets
    `open_indexes`); a server or memory client is used as is."""
    if path is not None and not url:
        return LocalChroma.shared(
            Path(path) / "chroma", Path(path) / "locks", lambda d: make_client(d.parent, None, open_indexes)
        )
    return DirectChroma(make_client(path, url))


class ChromaVectors:
    def __init__(
        self,
        path: str | Path | None = None,
        url: str | None = None,
        namespace: str | None = None,
        open_indexes: int = OPEN_INDEXES,
    ) -> None:
        self._path, self._url, self._open_indexes = path, url, open_indexes
        self._silent_until, self._silent_line = 0.0, ""  # a server that let a deadline pass: not asked till then
        self.where = url or (str(Path(path) / "chroma") if path is not None else "in memory")
        self.chroma = self._connect()
        # in-memory clients share one process-wide system: keep each MemCompile's collections apart
        self.prefix = namespace or ("mc" if (path is not None or url) else f"mc{uuid.uuid4().hex[:8]}")
        # both bounded as Chroma's loaded indexes are: a process that serves many users holds a few of them
        self._collections: OrderedDict[str, Collection] = OrderedDict()
        self._loaded: OrderedDict[str, None] = OrderedDict()  # users whose index this client has read or written
        self._epoch = self.chroma.epoch
        # a server's collections can be dropped by any other client, unseen here: fetch the handle every time
        self._cache_handles = not url

    def _connect(self) -> DirectChroma | LocalChroma | UnavailableChroma:
        try:
            return open_chroma(self._path, self._url, self._open_indexes)
        except BaseException as exc:
            # chromadb's client says ValueError for a server it could not reach or that failed as it opened; its
            # Rust core panics on some damaged files (pyo3's PanicException, a BaseException)
            failed = isinstance(exc, Exception) and (_failed_store(exc) or (self._url and isinstance(exc, ValueError)))
            if not failed and type(exc).__name__ != "PanicException":
                raise
            if self._url:
                raise VectorStoreError(
                    f"vector store {self.where} cannot be opened (Chroma server: {_reason(exc)})"
                ) from exc
            if self._path is None:
                raise VectorStoreError(f"vector store {self.where} cannot be opened: {_reason(exc)}") from exc
            return UnavailableChroma(Path(self._path) / "chroma", exc)  # the records stay usable; repair moves it aside

    @property
    def client(self) -> ClientAPI:
        if isinstance(self.chroma, UnavailableChroma):  # no client; the methods here ask inside access(), which raised
            raise AttributeError("'UnavailableChroma' object has no attribute 'client'")
        return self.chroma.client

    def name(self, user_id: str) -> str:
        return f"{self.prefix}_{user_key(user_id)}"

    @overload
    def collection(self, user_id: str, create: Literal[True] = True) -> Collection: ...
    @overload
    def collection(self, user_id: str, create: bool) -> Collection | None: ...
    def collection(self, user_id: str, create: bool = True) -> Collection | None:
        """The user's collection (None when absent and not created); call inside `self.chroma.access`."""
        if self._epoch != self.chroma.epoch:  # the client was reopened: cached handles are stale
            self._collections.clear()
            self._loaded.clear()
            self._epoch = self.chroma.epoch
        col = self._collections.get(user_id)
        if col is not None:
            self._collections.move_to_end(user_id)
        elif create:
            col = self.client.get_or_create_collection(
                self.name(user_id), metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
        else:
            try:
                col = self.client.get_collection(self.name(user_id), embedding_function=None)
            except (NotFoundError, ValueError):  # reads never create: a query for an unknown user writes nothing
                return None
        if self._cache_handles:
            _keep(self._collections, user_id, col, self._open_indexes)
        return col

    def loaded(self, user_id: str) -> bool:
        """Whether this process's client has the user's collection loaded: its first use after opening reads the
        collection's index files, holding the GIL. A server's collections and an in-memory client's count as
        loaded."""
        if self._url or self._path is None:
            return True
        return self._epoch == self.chroma.epoch and user_id in self._loaded

    @_guarded
    def upsert(
        self,
        user_id: str,
        ids: list[str],
        embeddings: Sequence[Vector],
        dia_ids: list[str],
        sources: Sequence[str | None] | None = None,
    ) -> None:
        """sources: what each vector was built from (Engine.sources), written with it; a
        vector given none keeps none (Chroma merges metadata on upsert: None removes the key)."""
        if not ids:
            return
        sources = sources if sources is not None else [None] * len(ids)
        metadatas: list[Metadata] = [{"dia_id": d, SOURCE: s} for d, s in zip(dia_ids, sources)]
        step = 2000  # below Chroma's max batch size
        with self.chroma.access(write=True):
            col = self.collection(user_id)
            for i in range(0, len(ids), step):
                # the vectors are all of one kind, the callers' lists or the arrays `get` returned (delete): Chroma
                # tells which by the first, its types name only a list of one kind or the other
                rows = cast("list[Embedding] | list[PyEmbedding]", embeddings[i : i + step])
                col.upsert(ids=ids[i : i + step], embeddings=rows, metadatas=metadatas[i : i + step])
            self.chroma.scrub_collection(str(col.id))
            _keep(self._loaded, user_id, None, self._open_indexes)

    @_guarded
    def query(
        self, user_id: str, embedding: Sequence[float], k: int, sources: bool = False
    ) -> list[tuple[str, float]] | list[tuple[str, float, str | None]]:
        """(packet id, cosine) of the k nearest, best first; with sources, (packet id, cosine, source digest)."""
        with self.chroma.access(write=False):
            col = self.collection(user_id, create=False)
            if col is None:
                return []
            n = col.count()
            self.chroma.scrub_collection(str(col.id))
            if n == 0:
                return []
            include: Include = ["distances", "metadatas"] if sources else ["distances"]
            res = col.query(query_embeddings=[embedding], n_results=min(k, n), include=include)
            self.chroma.scrub_collection(str(col.id))  # the query loads the index
            _keep(self._loaded, user_id, None, self._open_indexes)
        hits = [(pid, 1.0 - float(dist)) for pid, dist in zip(res["ids"][0], _asked(res["distances"])[0])]
        if sources:
            return [(pid, sim, _source(meta)) for (pid, sim), meta in zip(hits, _asked(res["metadatas"])[0])]
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
                for i, m in zip(got["ids"], _asked(got["metadatas"]))
            }

    @_guarded
    def vectors(
        self, user_id: str, ids: list[str] | None = None, sources: bool = False
    ) -> tuple[list[str], list[Vector]] | tuple[list[str], list[Vector], list[str | None]]:
        """Stored (ids, vectors) of the user, paged: all of them, or those of the given ids that exist; with sources,
        (ids, vectors, source digests)."""
        out_ids: list[str] = []
        vectors: list[Vector] = []
        found: list[str | None] = []
        with self.chroma.access(write=False):
            for got in self._pages(user_id, ids, ["embeddings", "metadatas"] if sources else ["embeddings"]):
                out_ids += got["ids"]
                vectors += list(_asked(got["embeddings"]))
                if sources:
                    found += [_source(m) for m in _asked(got["metadatas"])]
        return (out_ids, vectors, found) if sources else (out_ids, vectors)

    def _pages(self, user_id: str, ids: list[str] | None, include: Include) -> Iterator[GetResult]:
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
        self.chroma.scrub_collection(str(col.id))
        _keep(self._loaded, user_id, None, self._open_indexes)

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
            self.chroma.scrub_collection(str(col.id))
            if not self.chroma.scrubs:
                return
            kept: list[str] = []
            vectors: list[Vector] = []
            dia_ids: list[str] = []
            sources: list[str | None] = []
            for got in self._pages(user_id, None, ["embeddings", "metadatas"]):
                kept += got["ids"]
                vectors += list(_asked(got["embeddings"]))
                metadatas = _asked(got["metadatas"])
                dia_ids += [cast(str, m["dia_id"]) for m in metadatas]  # as upsert wrote it
                sources += [_source(m) for m in metadatas]
            self._drop(user_id, scrub=False)
            self.upsert(user_id, kept, vectors, dia_ids, sources)
            self.chroma.scrub()  # the rebuilt index included: its unused capacity may hold the deleted vectors

    @_guarded
    def drop(self, user_id: str, scrub: bool = False) -> None:
        """Drops the user's collection; scrub: also scrub the files when there is none left to drop (a forget that a
        crash stopped between the two)."""
        with self.chroma.access(write=True):
            if self.collection(user_id, create=False) is None and scrub:
                self.chroma.scrub()
            self._drop(user_id)

    @_guarded
    def drop_namespace(self, namespace: str) -> int:
        """Drops every collection of another store's namespace on a server (what a moved store left there); returns
        how many. A local directory's collections are not named per store: nothing to do there."""
        if not self._url or namespace == self.prefix:
            return 0
        with self.chroma.access(write=True):
            names = [c if isinstance(c, str) else c.name for c in self.client.list_collections()]
            gone = [n for n in names if n.startswith(f"{namespace}_")]
            for name in gone:
                try:
                    self.client.delete_collection(name)
                except (NotFoundError, ValueError):  # another worker dropped it first
                    pass
        return len(gone)

    def damaged(self) -> bool:
        """Whether the local Chroma directory's database fails its integrity check (a server is not checked)."""
        return self.chroma.damaged()

    def quarantine(self) -> str | None:
        """Moves a damaged local Chroma directory aside and starts an empty one; returns where it went."""
        aside = self.chroma.quarantine()
        if isinstance(self.chroma, UnavailableChroma):
            self.chroma = self._connect()
        self._collections.clear()
        self._loaded.clear()
        self._epoch = self.chroma.epoch
        return aside

    def _drop(self, user_id: str, scrub: bool = True) -> None:
        self._collections.pop(user_id, None)
        self._loaded.pop(user_id, None)
        try:
            self.client.delete_collection(self.name(user_id))
        except (NotFoundError, ValueError):  # absent collection: nothing to drop
            return
        self.chroma.dropped()
        if scrub:
            self.chroma.scrub()


def _keep(recent: OrderedDict[str, _T], user_id: str, value: _T, bound: int) -> None:
    """Puts the user last in `recent`, dropping the least recent beyond `bound`."""
    recent[user_id] = value
    recent.move_to_end(user_id)
    while len(recent) > max(1, bound):
        recent.popitem(last=False)


def _failed_store(exc: Exception) -> bool:
    """Whether an exception is the vector store's failure (a Chroma error, a file's, or the server's: chromadb raises
    a bare Exception for an HTTP error answer it has no type for, httpx's errors for no answer at all)."""
    return isinstance(exc, (ChromaError, sqlite3.Error, OSError, ConnectionError, httpx.HTTPError)) or (
        type(exc) is Exception
    )


def _reason(exc: BaseException) -> str:
    """Why a call failed, in a few words of one line (from the HTTP error chromadb's own errors arose from)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, httpx.HTTPError):
        cause = cause.__cause__ or cause.__context__
    exc = cause or exc
    if isinstance(exc, httpx.TimeoutException):
        return _no_answer()
    if isinstance(exc, httpx.HTTPStatusError):
        return f"it answered {exc.response.status_code} {exc.response.reason_phrase}"
    raw = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    # a dead server shows as a refused connect or, on a pooled connection, a reset or an empty answer: one message
    if isinstance(exc, (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)):
        return f"the server refused or dropped the connection: {raw}"
    return raw


def _no_answer() -> str:
    return f"no answer within {server_timeout():g} s ({TIMEOUT_ENV})"


def _source(metadata: Metadata | None) -> str | None:
    return cast("str | None", (metadata or {}).get(SOURCE))  # as upsert wrote it: a digest or nothing


def _asked(field: _T | None) -> _T:
    """A field of a Chroma result that was asked for in `include`: Chroma fills it (its types make each optional)."""
    if field is None:
        raise VectorStoreError("Chroma returned a result without a field it was asked for")
    return field
