"""MemCompileStore: MemCompile behind LangGraph's long-term memory API (`BaseStore`), a drop-in for InMemoryStore.

Namespace <-> user (namespace_user / user_namespace, one-to-one): the labels' parts joined with "/". A label's part
is the label with "%2E" read as "." (LangGraph forbids "." in labels; ("tom%2Esmith",) is the user "tom.smith"), and
"%", "/", characters no user id holds, every character of a label not in Unicode NFC and a blank label's spaces
written %XX (UTF-8): any label InMemoryStore accepts names a user of its own ("a%b" is "a%25b"), a prefix matches
whole labels, and a user id that is no namespace's ("50%") is hidden from the store. A server where each caller owns
one memory maps with one_label_user / one_label_namespace: the user is the namespace's only label, deeper
namespaces are refused, so no namespace lies below another user's. Change it with namespace_to_user /
user_to_namespace.

Item <-> turn (store_values.py): the value is kept as given beside one turn MemCompile indexes; the key is the
turn's dia_id. Where store semantics and MemCompile's differ (docs/integrations.md lists every difference):
- a put runs as one writer unit of work of the user (its writer lock held throughout): a put that changes the
  turn's text, speaker, time or session replaces its packet (packets are immutable) in the records transaction that
  adds the new one, with the value's document and expiry; the item keeps its place in listings.
  created_at == updated_at (the packet's).
- search with a query: one ranking over every user under the prefix: the items of each user's compiled selection
  by their similarity to the query (in [0, 1]), then every other matching item in listing order with score 0.0
  (an `index=False` item: None). A hit is a MemCompileItem whose `memcompile` attribute says where the compiled
  selection holds it; its value is the one put.
- listings: per namespace (in namespace order) the items in the order of their first put.
- TTL as LangGraph's (minutes, the store's TTLConfig, refresh on read); an expired item is hidden at once and
  removed by sweep_ttl as delete removes it.
- a batch's reads see the store before its puts, as in InMemoryStore.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, InvalidStateError, TimeoutError
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from itertools import islice
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.base.embed import ensure_embeddings

from ..evidence.repeats import asking_capped
from ..ingest.turn_input import coerce_turn, occurrences
from ..ingest_graph import ingest_graph
from ..memory import MemCompile, check_ttl
from ..model import SourcePacket
from ..runtime import telemetry
from ..runtime.context import MemoryContext
from ..runtime.unit_of_work import UnitOfWork
from ..store.protocols import Expiry, StoredTurn
from ..text.terms import clean_text, term_set
from ..users import InvalidUserId, validate_user_id
from .retriever import packet_documents
from .store_values import (
    ItemDocument,
    dia_id_key,
    item_document,
    key_dia_id,
    matches_filter,
    read_document,
    turn_value,
    value_turn,
)

log = logging.getLogger(__name__)

SEPARATOR = "/"
DOT = "%2E"  # a label's "%2E" is a "." of the user id (LangGraph forbids "." in labels)
REFUSED_IN_USER_ID = ("Cc", "Cf", "Cs")  # the Unicode categories validate_user_id refuses
IN_LABEL = {"%25": "%", "%2E": "."}  # escapes inside a label of one_label_user's namespaces


def _percent(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


def _label_part(label: str) -> str:
    """A label's part of the user id: "%2E" is ".", and "%", "/", characters no user id holds, the characters of a
    label not in Unicode NFC (NFC would merge it with another) and a blank label's spaces are written %XX (UTF-8)."""
    nfc, blank = unicodedata.normalize("NFC", label) == label, not label.strip()
    out, i = [], 0
    while i < len(label):
        if label.startswith(DOT, i):
            out.append(".")
            i += len(DOT)
            continue
        ch = label[i]
        escape = ch in "%/" or unicodedata.category(ch) in REFUSED_IN_USER_ID
        out.append(_percent(ch) if escape or (not nfc and ord(ch) > 127) or (blank and ch.isspace()) else ch)
        i += 1
    return "".join(out)


def _part_label(part: str) -> str | None:
    """_label_part's inverse; None when the text is no label's part."""
    out, i = [], 0
    while i < len(part):
        if part[i] == "%":
            raw = bytearray()
            while part.startswith("%", i) and len(part) >= i + 3:
                try:
                    raw.append(int(part[i + 1 : i + 3], 16))
                except ValueError:
                    return None
                i += 3
            try:
                out.append(raw.decode("utf-8", "surrogatepass"))
            except UnicodeDecodeError:
                return None
            if i < len(part) and part[i] == "%":
                return None  # a "%" that starts no escape
        else:
            out.append(DOT if part[i] == "." else part[i])
            i += 1
    return "".join(out)


def namespace_user(namespace: tuple[str, ...]) -> str:
    """The user id of a namespace (one-to-one): the labels' parts joined with "/"; InvalidNamespaceError for one that
    names no user id (longer than a user id may be)."""
    if not all(isinstance(label, str) and label and "." not in label for label in namespace):
        raise InvalidNamespaceError(f"namespace {namespace!r}: labels are non-empty strings without '.'")
    user = SEPARATOR.join(_label_part(label) for label in namespace)
    try:
        if validate_user_id(user) != user:
            raise InvalidUserId("not in Unicode NFC")
    except InvalidUserId as exc:
        raise InvalidNamespaceError(f"namespace {namespace!r} names no memory: {exc}") from None
    return user


def user_namespace(user_id: str) -> tuple[str, ...] | None:
    """The namespace of a user id (namespace_user's inverse); None when the id is no namespace's."""
    labels = tuple(_part_label(part) for part in user_id.split(SEPARATOR))
    if any(label is None or not label or "." in label for label in labels):
        return None
    namespace = tuple(label for label in labels if label is not None)
    try:
        return namespace if namespace_user(namespace) == user_id else None
    except InvalidNamespaceError:
        return None


def _unescape(text: str, escapes: dict[str, str]) -> str | None:
    """The text with its escapes replaced; None when it is not in canonical form (a "%" that starts no escape, or a
    raw character that must be escaped), so that no two spellings name one text."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "%":
            if text[i : i + 3] not in escapes:
                return None
            out.append(escapes[text[i : i + 3]])
            i += 3
        elif text[i] in escapes.values():
            return None
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _escape(text: str, escapes: dict[str, str]) -> str:
    return "".join(next((code for code, ch in escapes.items() if ch == c), c) for c in text)


def one_label_user(namespace: tuple[str, ...]) -> str:
    """The user of a namespace of one label (a "." of the user id written "%2E" in it); deeper namespaces and labels
    not written canonically are refused. For a store where each caller owns one memory: no namespace lies below
    another user's."""
    text = _unescape(namespace[0], IN_LABEL) if len(namespace) == 1 else None
    if text is None:
        raise InvalidNamespaceError(f"namespace {namespace!r}: this store holds one memory per label, the user's")
    return text


def one_label_namespace(user_id: str) -> tuple[str, ...] | None:
    return (_escape(user_id, IN_LABEL),) if unicodedata.normalize("NFC", user_id) == user_id else None


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _matches_path(labels: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(labels) == len(path) and all(p == "*" or p == label for p, label in zip(path, labels))


def _same_embed(embeddings: Any, embed: Any) -> bool:
    """The memory's embeddings are the index config's `embed` (an Embeddings object, or the function wrapped)."""
    return embeddings is not None and any(
        x is embed for x in (embeddings, getattr(embeddings, "func", None), getattr(embeddings, "afunc", None))
    )


def served_ttl() -> TTLConfig | None:
    """The `ttl` section of the `store` in langgraph.json, as a LangGraph server hands it to the process
    ($LANGGRAPH_STORE); None without one. A served custom store reads it itself: the server only reads it for its
    own store."""
    try:
        config = json.loads(os.environ.get("LANGGRAPH_STORE") or "{}")
    except ValueError:
        return None
    ttl = config.get("ttl") if isinstance(config, dict) else None
    return TTLConfig(**ttl) if isinstance(ttl, dict) else None


class MemCompileItem(SearchItem):
    """A search result of MemCompileStore: the item as put, its score, and `memcompile`: where MemCompile's compiled
    selection for the query holds it (rank, source, packet_id and its compiled block), None when it does not."""

    __slots__ = ("memcompile",)

    def __init__(self, *args: Any, memcompile: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.memcompile = memcompile


@dataclass(frozen=True)
class _Entry:
    """One item as stored: its turn, the document of its put (None: a turn another surface wrote), its expiry."""

    stored: StoredTurn
    doc: ItemDocument | None
    expiry: Expiry | None

    @property
    def key(self) -> str:
        return dia_id_key(self.stored.packet.dia_id)

    @property
    def packet_id(self) -> str:
        return self.stored.packet.packet_id

    @property
    def position(self) -> int:
        return self.doc.position if self.doc is not None else self.stored.packet.seq

    @property
    def value(self) -> dict[str, Any]:
        return copy.deepcopy(self.doc.value) if self.doc is not None else turn_value(self.stored.packet)

    @property
    def indexed(self) -> bool:
        return self.doc is None or self.doc.indexed

    def expired(self, now: float) -> bool:
        return self.expiry is not None and self.expiry.at <= now


class MemCompileStore(BaseStore):
    """A LangGraph store over a MemCompile: one user per namespace, one turn per item."""

    supports_ttl = True

    def __init__(
        self,
        memory: MemCompile,
        *,
        namespace_to_user: Callable[[tuple[str, ...]], str] = namespace_user,
        user_to_namespace: Callable[[str], tuple[str, ...] | None] = user_namespace,
        user_speaker: str = "User",
        assistant_speaker: str = "Assistant",
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ):
        """index: LangGraph's IndexConfig. `fields` name the text of a value (a put's `index=[...]` overrides
        them); `embed`, when given, must be the memory's embeddings (MemCompileStore.open makes them so): they are
        the dense channel's. ttl: LangGraph's TTLConfig (default_ttl, refresh_on_read, sweep_interval_minutes for
        start_ttl_sweeper)."""
        if index and index.get("embed") is not None and not _same_embed(memory.embeddings, index["embed"]):
            raise ValueError(
                "index['embed'] must be the memory's embeddings: open it with MemCompile(..., embeddings=...) or "
                "use MemCompileStore.open(path, index=...)"
            )
        if ttl and ttl.get("default_ttl") is not None:
            check_ttl(ttl["default_ttl"])
        self.memory = memory
        self.namespace_to_user = namespace_to_user
        self.user_to_namespace = user_to_namespace
        self.speakers = (user_speaker, assistant_speaker)
        self.index_config = dict(index) if index else None
        self.ttl_config = ttl
        self._fields = list(index.get("fields") or []) or None if index else None
        self._sweeper: tuple[threading.Event, Future[None]] | None = None
        # puts waiting to be written, per user, and the users whose queue a thread is writing
        self._queue_lock = threading.Lock()
        self._queued: dict[str, list[tuple[dict[str, PutOp], Future[None]]]] = {}
        self._writing: set[str] = set()

    @classmethod
    def open(
        cls,
        path: str | None = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        **options: Any,
    ) -> MemCompileStore:
        """A store over a MemCompile opened here (options: MemCompile's); an index config's `embed` becomes the
        memory's embeddings."""
        if index and index.get("embed") is not None:
            options["embeddings"] = ensure_embeddings(index["embed"])
        return cls(MemCompile(path, **options), index=index, ttl=ttl)

    @property
    def embeddings(self) -> Embeddings | None:
        """The embeddings queries are scored with (as InMemoryStore's attribute): the memory's dense channel's."""
        return self.memory.embeddings

    def user(self, namespace: tuple[str, ...]) -> str:
        try:
            user = validate_user_id(self.namespace_to_user(tuple(namespace)))
        except InvalidUserId as exc:
            raise InvalidNamespaceError(f"namespace {namespace!r} names no memory: {exc}") from None
        if self.namespace_to_user is namespace_user and user_namespace(user) != tuple(namespace):
            raise InvalidNamespaceError(f"namespace {namespace!r} names no user of its own")  # e.g. NFC merges it
        return user

    # --- batch -------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads see the store as it was before the batch's puts (InMemoryStore's order); puts then run in order. A put
        that is refused refuses the batch before anything changes, a read's ttl refresh included."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        puts = self._checked([op for op in ops if isinstance(op, PutOp)])
        now = time.time()
        results: list[Result] = [None] * len(ops)
        read: dict[str, dict[str, Expiry]] = {}  # user -> packet id -> expiry, of the items a read refreshes
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op, now, read)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op, now, read)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif not isinstance(op, PutOp):
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        for user, expiries in read.items():
            self._refresh(user, expiries, now)
        for user, checked in puts.items():
            self._put_user(user, checked)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        puts = [op for op in ops if isinstance(op, PutOp)]
        if not ops or len(puts) < len(ops):
            return await asyncio.to_thread(self.batch, ops)
        # puts only: queued without a thread each, so that all the puts awaited at once are written together
        for op in puts:
            validate_op_namespace(op)
        waiting = []
        for user, queued in self._checked(puts).items():
            done, writer = self._enqueue(user, queued)
            if writer:
                asyncio.get_running_loop().run_in_executor(None, self._drain, user)
            # a cancelled caller stops waiting; the put, once queued, is written with the others
            waiting.append(asyncio.shield(asyncio.wrap_future(done)))
        await asyncio.gather(*waiting)
        return [None] * len(ops)

    # --- reading -------------------------------------------------------------------------------
    def _entries(self, user: str, dia_ids: list[str] | None, now: float | None) -> list[_Entry]:
        """The user's items (all, or those of these dia_ids) in dialogue order, read in one consistent view; with
        now, those expired by then are left out (the sweep removes them)."""
        entries = []
        for stored, text, expiry in self.memory.engine.records.turns_with_items(user, dia_ids):
            entry = _Entry(stored, None if text is None else read_document(text), expiry)
            if now is None or not entry.expired(now):
                entries.append(entry)
        return entries

    def _all_entries(self, user: str, now: float) -> list[_Entry]:
        """Every item of the user in listing order (the order of first puts)."""
        return sorted(self._entries(user, None, now), key=lambda e: e.position)

    def _item(self, namespace: tuple[str, ...], entry: _Entry) -> Item:
        at = _time(entry.stored.created_at)
        return Item(value=entry.value, key=entry.key, namespace=namespace, created_at=at, updated_at=at)

    def _found(
        self, namespace: tuple[str, ...], entry: _Entry, score: float | None, memcompile: dict[str, Any] | None = None
    ) -> MemCompileItem:
        at = _time(entry.stored.created_at)
        return MemCompileItem(namespace, entry.key, entry.value, at, at, score=score, memcompile=memcompile)

    @staticmethod
    def _read(read: dict[str, dict[str, Expiry]], user: str, entries: Iterable[_Entry], refresh: bool) -> None:
        for e in entries if refresh else ():
            if e.expiry is not None and e.expiry.ttl is not None:
                read.setdefault(user, {})[e.packet_id] = e.expiry

    def _refresh(self, user: str, expiries: dict[str, Expiry], now: float) -> None:
        """Read items live their ttl again from now: under the user's writer lock, for packets that still exist."""
        renewed = {p: Expiry(now + e.ttl * 60, e.ttl) for p, e in expiries.items() if e.ttl is not None}
        with self.memory.engine.records.write_lock(user):
            self.memory.engine.records.put_items(user, {}, renewed)

    def _get(self, op: GetOp, now: float, read: dict[str, dict[str, Expiry]]) -> Item | None:
        user = self.user(op.namespace)
        found = self._entries(user, [key_dia_id(op.key)], now)
        self._read(read, user, found, op.refresh_ttl)
        return self._item(tuple(op.namespace), found[0]) if found else None

    # --- put -----------------------------------------------------------------------------------
    def _paths(self, op: PutOp) -> list[str] | None:
        """The field paths that hold the put value's text (None: store_values.value_text's default)."""
        return op.index or None if op.index is not None else self._fields

    def _checked(self, puts: list[PutOp]) -> dict[str, dict[str, PutOp]]:
        """The puts by user and dia_id, every value checked (ValueError before anything changes)."""
        latest: dict[tuple[str, str], PutOp] = {}  # a key put twice in one batch: the last value wins
        for op in puts:
            if op.ttl is not None:
                check_ttl(op.ttl)
            if op.value is not None:
                value_turn(op.value, key_dia_id(op.key), *self.speakers, index=self._paths(op))
                item_document(op.value, 0, True)
            latest[(self.user(op.namespace), key_dia_id(op.key))] = op
        by_user: dict[str, dict[str, PutOp]] = {}
        for (user, dia_id), op in latest.items():
            by_user.setdefault(user, {})[dia_id] = op
        return by_user

    def _put_user(self, user: str, ops: dict[str, PutOp]) -> None:
        """The user's checked puts in one writer unit of work, with any others queued for the user meanwhile."""
        done, writer = self._enqueue(user, ops)
        if writer:
            self._drain(user)
        done.result()

    def _enqueue(self, user: str, ops: dict[str, PutOp]) -> tuple[Future[None], bool]:
        """Queues a user's puts; True when no one is writing that user's queue, so the caller must (`_drain`)."""
        done: Future[None] = Future()
        with self._queue_lock:
            self._queued.setdefault(user, []).append((ops, done))
            writer = user not in self._writing
            self._writing.add(user)
        return done, writer

    def _drain(self, user: str) -> None:
        """Writes the user's queued puts until none is left, all that wait at once in one unit of work (in queue
        order, so the last put of a key wins): many concurrent writers pay for one ingest and one commit, not one
        each."""
        while True:
            with self._queue_lock:
                drained = self._queued.pop(user, [])
                if not drained:
                    self._writing.discard(user)
                    return
            merged: dict[str, PutOp] = {}
            for queued, _ in drained:
                merged.update(queued)
            failed: BaseException | None = None
            try:
                self._write_user(user, merged)
            except BaseException as exc:
                failed = exc
            for _, done in drained:
                # a waiter's future cancelled meanwhile takes no answer; the others still get theirs
                with contextlib.suppress(InvalidStateError):
                    done.set_exception(failed) if failed is not None else done.set_result(None)

    def _write_user(self, user: str, ops: dict[str, PutOp]) -> None:
        """Under the user's writer lock (concurrent puts of a key: the last one wins, whole): kept packets get their
        new document; a changed turn replaces its packet in the records transaction that adds the new one, which
        keeps the new documents and expiries beside their packets (a forget waits for the lock, then removes all)."""
        docs: dict[str, ItemDocument] = {}  # dia_id -> document of an added turn; position -1: the new packet's seq
        ttls: dict[str, float] = {}  # dia_id -> minutes to live of an added turn

        def rows(packets: list[SourcePacket]) -> tuple[dict[str, str], dict[str, Expiry]]:
            kept = [p for p in packets if p.dia_id in docs]
            stored_at = time.time()  # an item lives its ttl from when it is stored, however long the ingest took
            return (
                {p.packet_id: _placed(docs[p.dia_id], p.seq).dumps() for p in kept},
                {
                    p.packet_id: Expiry(stored_at + ttls[p.dia_id] * 60, ttls[p.dia_id])
                    for p in kept
                    if p.dia_id in ttls
                },
            )

        host = self.memory.host
        with UnitOfWork(host, user, rows=rows) as unit:
            now = time.time()  # the writer lock may have been waited for
            stored = self._entries(user, list(ops), None)
            old = {e.stored.packet.dia_id: e for e in stored}
            remove: dict[str, str] = {}  # dia_id -> packet id
            add: list[dict[str, Any]] = []
            rewrite: dict[str, str] = {}  # packet id -> document text, for a kept packet whose value changed
            expiring: dict[str, Expiry | None] = {}  # packet id -> expiry, for a kept packet
            for dia_id, op in ops.items():
                entry = old.get(dia_id)
                if entry is not None and (op.value is None or entry.expired(now)):
                    remove[dia_id] = entry.packet_id  # an expired item is gone: a put makes it anew
                    entry = None
                if op.value is None:
                    continue
                expiry = None if op.ttl is None else Expiry(now + op.ttl * 60, op.ttl)
                time_ = entry.stored.packet.session_time_raw if entry is not None else None  # a re-put keeps its time
                turn = value_turn(op.value, dia_id, *self.speakers, index=self._paths(op), time=time_)
                position = entry.position if entry is not None else -1
                doc = item_document(op.value, position, op.index is not False, self._paths(op))
                if entry is not None and _same_turn(entry.stored.packet, turn):
                    if entry.doc != doc:
                        rewrite[entry.packet_id] = doc.dumps()
                    if entry.expiry != expiry:
                        expiring[entry.packet_id] = expiry
                    continue  # the stored packet stays (and its created time)
                if entry is not None:
                    remove[dia_id] = entry.packet_id
                    if "session" not in turn:  # the replacement stays in the turn's session
                        turn = {
                            **turn,
                            "session": entry.stored.packet.session,
                            "session_label": entry.stored.packet.session_label,
                        }
                add.append(turn)
                docs[dia_id] = doc
                if op.ttl is not None:
                    ttls[dia_id] = op.ttl
            if rewrite or expiring:
                self.memory.engine.records.put_items(user, rewrite, expiring)
            unit.replace(remove)
            if add:
                numbered = occurrences(add)
                with telemetry.create_memory(user, numbered) as span:
                    out = ingest_graph.invoke(
                        {"turns": numbered}, context=MemoryContext(user_id=user, host=host, writer=unit)
                    )
                    span.counts("add_turns", {"stored": len(out.get("packets", [])), **out.get("counts", {})})
                if len(out.get("packets", [])) != len(add):  # checked before: a turn that would not be stored
                    raise ValueError(f"user {user!r}: {len(add)} turns put, {out.get('counts')}")
            elif remove:
                unit.commit([], [], {})

    # --- search --------------------------------------------------------------------------------
    def _users_under(self, prefix: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
        """(namespace, user) of every user with stored turns whose namespace starts with prefix, in namespace order."""
        found = []
        for user in self.memory.users():
            namespace = self.user_to_namespace(user)
            if namespace is None or tuple(namespace[: len(prefix)]) != tuple(prefix):
                continue
            if self.memory.turns(user, limit=1):  # a user whose turns were all deleted has no namespace
                found.append((tuple(namespace), user))
        return sorted(found)

    def _search(self, op: SearchOp, now: float, read: dict[str, dict[str, Expiry]]) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError("limit and offset must not be negative")
        users = self._users_under(op.namespace_prefix)
        listed = [
            (ns, e) for ns, user in users for e in self._all_entries(user, now) if matches_filter(e.value, op.filter)
        ]
        if not op.query:
            found: Iterator[MemCompileItem] = (self._found(ns, e, None) for ns, e in listed)
        else:
            found = self._ranked(op.query, users, listed)
        page: list[SearchItem] = list(islice(found, op.offset, op.offset + op.limit))
        user_of = dict(users)
        by_key = {(ns, e.key): e for ns, e in listed}
        for item in page:
            self._read(
                read, user_of[tuple(item.namespace)], [by_key[(tuple(item.namespace), item.key)]], op.refresh_ttl
            )
        return page

    def _ranked(
        self, query: str, users: list[tuple[tuple[str, ...], str]], listed: list[tuple[tuple[str, ...], _Entry]]
    ) -> Iterator[MemCompileItem]:
        """One ranking over every namespace under the prefix: the items of each user's compiled selection by their
        similarity to the query (higher first), then the other items in listing order with score 0.0 (an
        `index=False` item: None)."""
        wanted = {(ns, e.packet_id): e for ns, e in listed if e.indexed}
        hits = []
        for namespace, user in users if clean_text(query) else ():
            ctx = self.memory.compile(query, user_id=user)
            for doc in packet_documents(self.memory, user, ctx):
                meta = doc.metadata
                entry = wanted.pop((namespace, meta["packet_id"]), None)
                if entry is None:
                    continue  # filtered out, `index=False`, or deleted since the compile
                provenance = {k: meta[k] for k in ("rank", "source", "packet_id")} | {"compiled": doc.page_content}
                hits.append((namespace, entry, provenance))
        # an item whose text came from several fields scores as its best field (LangGraph's max over vectors)
        texts = [(entry.doc and entry.doc.texts()) or [entry.stored.packet.text] for _, entry, _ in hits]
        flat = iter(self._similarities(query, [t for ts in texts for t in ts]))
        scores = [max(next(flat) for _ in ts) for ts in texts]
        # within each user's selection a turn that only asks stays below the statements chosen before it
        for namespace in {ns for ns, _, _ in hits}:
            at = [i for i, (ns, _, _) in enumerate(hits) if ns == namespace]
            capped = asking_capped([hits[i][1].stored.packet for i in at], [scores[i] for i in at])
            for i, score in zip(at, capped):
                scores[i] = score
        ranked = sorted(zip(scores, hits), key=lambda h: (-h[0], h[1][0], h[1][1].position))
        for score, (namespace, entry, provenance) in ranked:
            yield self._found(namespace, entry, score, provenance)
        for namespace, entry in listed:
            if (namespace, entry.packet_id) in wanted or not entry.indexed:
                yield self._found(namespace, entry, 0.0 if entry.indexed else None)

    def _similarities(self, query: str, texts: list[str]) -> list[float]:
        """Each text's similarity to the query in [0, 1], comparable across namespaces and queries: the cosine of
        their embeddings (negative: 0) with the memory's model, else the share of the query's terms the text holds."""
        if not texts:
            return []
        embeddings = self.memory.embeddings
        if embeddings is not None:
            q = np.asarray(embeddings.embed_query(query), dtype=float)
            docs = np.asarray(embeddings.embed_documents(texts), dtype=float)
            norms = np.linalg.norm(docs, axis=1) * np.linalg.norm(q)
            cosines = docs @ q / np.where(norms > 0, norms, 1.0)
            return [float(min(1.0, max(0.0, c))) for c in cosines]
        asked = term_set(query)
        return [len(asked & term_set(t)) / len(asked) if asked else 0.0 for t in texts]

    # --- time to live --------------------------------------------------------------------------
    def sweep_ttl(self) -> int:
        """Removes every expired item (and turn added with a ttl) as delete removes it; returns how many."""
        return self.memory.sweep_expired()

    async def asweep_ttl(self) -> int:
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Sweeps every `sweep_interval_minutes` (default: the ttl config's) on a thread until stop_ttl_sweeper; a
        done future when there is no interval. A failed sweep is logged and tried again at the next interval."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if self._sweeper is not None:
            return self._sweeper[1]
        future: Future[None] = Future()
        if not interval:
            future.set_result(None)
            return future
        stop = threading.Event()

        def sweep() -> None:
            while not stop.wait(float(interval) * 60):
                try:
                    removed = self.sweep_ttl()
                    if removed:
                        log.info("ttl sweep removed %d expired items", removed)
                except Exception as exc:  # noqa: BLE001 - the sweeper outlives one failed sweep
                    log.warning("ttl sweep failed (%s); tried again in %s minutes", exc, interval)
            future.set_result(None)

        self._sweeper = (stop, future)
        threading.Thread(target=sweep, name="memcompile-ttl-sweeper", daemon=True).start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stops the sweeper; whether it ended within timeout."""
        if self._sweeper is None:
            return True
        stop, future = self._sweeper
        stop.set()
        try:
            future.result(timeout)
        except TimeoutError:
            return False
        self._sweeper = None
        return True

    # --- namespaces ----------------------------------------------------------------------------
    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [namespace for namespace, _ in self._users_under(())]
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            if condition.match_type == "prefix":
                namespaces = [n for n in namespaces if len(n) >= len(path) and _matches_path(n[: len(path)], path)]
            elif condition.match_type == "suffix":
                namespaces = [n for n in namespaces if len(n) >= len(path) and _matches_path(n[-len(path) :], path)]
            else:
                raise ValueError(f"unknown namespace match type {condition.match_type!r}")
        if op.max_depth is not None:
            namespaces = sorted({n[: op.max_depth] for n in namespaces})
        return namespaces[op.offset : op.offset + op.limit]


def _placed(doc: ItemDocument, seq: int) -> ItemDocument:
    """A new item's document sorts where its packet was added."""
    return doc if doc.position >= 0 else replace(doc, position=seq)


def _same_turn(packet: SourcePacket, turn: dict[str, Any]) -> bool:
    """The turn the put would store is the stored one (content hash and, when given, session)."""
    t = coerce_turn(turn)
    same = packet.content_hash == SourcePacket.hash_content(t.speaker, t.text, t.time, t.image_caption, t.image_query)
    return same and (t.session is None or t.session == packet.session)
