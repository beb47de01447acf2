"""MemCompileStore: MemCompile behind LangGraph's long-term memory API (`BaseStore`), a drop-in for InMemoryStore.

Namespace <-> user (namespace_user / user_namespace, one-to-one): the labels joined with "/", each written in the
user id with "%" as "%25" and "/" as "%2F"; a label writes a "." of the user id as "%2E" (LangGraph forbids "."
in labels) and a "%" as "%25". ("tom",) is the user "tom", ("memories", "tom") the user "memories/tom",
("tom%2Esmith",) the user "tom.smith". No two namespaces share a user, a prefix matches whole labels, and a user id
that is no namespace's ("50%") is hidden from the store. A server where each caller owns one memory maps with
one_label_user / one_label_namespace: the user is the namespace's only label (("tom%2Esmith",) is "tom.smith"),
deeper namespaces are refused, so no namespace lies below another user's. Change it with namespace_to_user /
user_to_namespace.

Item <-> turn (store_values.py): the value is kept as given beside one turn MemCompile indexes; the key is the
turn's dia_id. Where store semantics and MemCompile's differ (docs/integrations.md lists every difference):
- a put that changes the turn's text, speaker, time or session replaces its packet (packets are immutable: delete +
  add, claims and Cells rebuilt); the item keeps its place in listings. created_at == updated_at (the packet's).
- search with a query: the compiled selection (per user under the prefix) by score, higher first, scores in
  [0, 1]; then every other matching item in listing order with score 0.0 (an `index=False` item: None). A hit's
  value carries "memcompile": rank, source, packet_id and the compiled block.
- listings: per namespace (in namespace order) the items in the order of their first put.
- a batch's reads see the store before its puts, as in InMemoryStore. No TTL.
"""

from __future__ import annotations

import asyncio
import logging
import math
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from ..ingest.turn_input import coerce_turn
from ..memory import MemCompile
from ..model import SourcePacket
from ..store.protocols import StoredTurn
from ..text.terms import clean_text
from ..users import validate_user_id
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
IN_USER_ID = {"%25": "%", "%2F": "/"}  # escapes inside one label's part of a user id
IN_LABEL = {"%25": "%", "%2E": "."}  # escapes inside a namespace label


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


def namespace_user(namespace: tuple[str, ...]) -> str:
    """The user id of a namespace (one-to-one); InvalidNamespaceError for a label not written canonically."""
    parts = []
    for label in namespace:
        text = _unescape(label, IN_LABEL) if isinstance(label, str) else None
        if text is None or unicodedata.normalize("NFC", label) != label:
            raise InvalidNamespaceError(
                f"namespace label {label!r}: write '%' as '%25' and '.' as '%2E' (Unicode NFC text)"
            )
        parts.append(_escape(text, IN_USER_ID))
    return SEPARATOR.join(parts)


def user_namespace(user_id: str) -> tuple[str, ...] | None:
    """The namespace of a user id (namespace_user's inverse); None when the id is no namespace's."""
    if unicodedata.normalize("NFC", user_id) != user_id:
        return None  # validated user ids are NFC
    labels = []
    for part in user_id.split(SEPARATOR):
        text = _unescape(part, IN_USER_ID)
        if text is None:
            return None
        labels.append(_escape(text, IN_LABEL))
    return tuple(labels)


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


def _unit_score(score: float) -> float:
    """A packet's score in (0, 1), order kept (the scheduler's scores are unbounded and may be negative)."""
    return 0.5 * (1.0 + math.tanh(score / 2.0))  # the logistic function, without overflow


@dataclass(frozen=True)
class _Entry:
    """One item as stored: its turn, and the document of its put (None: a turn another surface wrote)."""

    stored: StoredTurn
    doc: ItemDocument | None

    @property
    def key(self) -> str:
        return dia_id_key(self.stored.packet.dia_id)

    @property
    def position(self) -> int:
        return self.doc.position if self.doc is not None else self.stored.packet.seq

    @property
    def value(self) -> dict[str, Any]:
        return dict(self.doc.value) if self.doc is not None else turn_value(self.stored.packet)

    @property
    def indexed(self) -> bool:
        return self.doc is None or self.doc.indexed


class MemCompileStore(BaseStore):
    """A LangGraph store over a MemCompile: one user per namespace, one turn per item."""

    def __init__(
        self,
        memory: MemCompile,
        *,
        namespace_to_user: Callable[[tuple[str, ...]], str] = namespace_user,
        user_to_namespace: Callable[[str], tuple[str, ...] | None] = user_namespace,
        user_speaker: str = "User",
        assistant_speaker: str = "Assistant",
    ):
        self.memory = memory
        self.namespace_to_user = namespace_to_user
        self.user_to_namespace = user_to_namespace
        self.speakers = (user_speaker, assistant_speaker)

    def user(self, namespace: tuple[str, ...]) -> str:
        user = validate_user_id(self.namespace_to_user(tuple(namespace)))
        if self.namespace_to_user is namespace_user and user_namespace(user) != tuple(namespace):
            raise InvalidNamespaceError(f"namespace {namespace!r} names no user of its own")  # e.g. NFC merges it
        return user

    # --- batch -------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads see the store as it was before the batch's puts (InMemoryStore's order); puts then run in order."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif not isinstance(op, PutOp):
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        self._put_all([op for op in ops if isinstance(op, PutOp)])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- reading -------------------------------------------------------------------------------
    def _entries(self, user: str, stored: list[StoredTurn]) -> list[_Entry]:
        docs = self.memory.engine.records.items(user, [t.packet.packet_id for t in stored])
        entries = []
        for t in stored:
            text = docs.get(t.packet.packet_id)
            entries.append(_Entry(t, None if text is None else read_document(text)))
        return entries

    def _all_entries(self, user: str) -> list[_Entry]:
        """Every item of the user in listing order (the order of first puts)."""
        return sorted(self._entries(user, self.memory.turns(user)), key=lambda e: e.position)

    def _item(self, namespace: tuple[str, ...], entry: _Entry, **score: Any) -> Any:
        at = _time(entry.stored.created_at)
        if score:
            return SearchItem(namespace, entry.key, entry.value, at, at, **score)
        return Item(value=entry.value, key=entry.key, namespace=namespace, created_at=at, updated_at=at)

    def _get(self, op: GetOp) -> Item | None:
        user = self.user(op.namespace)
        found = self._entries(user, self.memory.turns(user, dia_ids=[key_dia_id(op.key)]))
        return self._item(tuple(op.namespace), found[0]) if found else None

    # --- put -----------------------------------------------------------------------------------
    def _put_all(self, puts: list[PutOp]) -> None:
        """Every value is checked before anything changes; then per user: replaced turns removed, new ones added."""
        latest: dict[tuple[str, str], PutOp] = {}  # a key put twice in one batch: the last value wins
        for op in puts:
            if op.ttl is not None:
                raise NotImplementedError("MemCompileStore keeps turns until they are deleted: ttl is not supported")
            if op.value is not None:
                value_turn(op.value, key_dia_id(op.key), *self.speakers, index=op.index or None)
                item_document(op.value, 0, True)
            latest[(self.user(op.namespace), key_dia_id(op.key))] = op
        by_user: dict[str, dict[str, PutOp]] = {}
        for (user, dia_id), op in latest.items():
            by_user.setdefault(user, {})[dia_id] = op
        for user, ops in by_user.items():
            self._put_user(user, ops)

    def _put_user(self, user: str, ops: dict[str, PutOp]) -> None:
        old = {e.stored.packet.dia_id: e for e in self._entries(user, self.memory.turns(user, dia_ids=list(ops)))}
        remove: list[str] = []
        add: list[dict[str, Any]] = []
        docs: dict[str, ItemDocument] = {}  # dia_id -> document; position -1: the new packet's seq
        rewrite: dict[str, str] = {}  # packet_id -> document text, for a kept packet whose value changed
        for dia_id, op in ops.items():
            entry = old.get(dia_id)
            if op.value is None:
                if entry is not None:
                    remove.append(dia_id)
                continue
            time = entry.stored.packet.session_time_raw if entry is not None else None  # a re-put keeps its time
            turn = value_turn(op.value, dia_id, *self.speakers, index=op.index or None, time=time)
            doc = item_document(op.value, entry.position if entry is not None else -1, op.index is not False)
            if entry is not None and _same_turn(entry.stored.packet, turn):
                if entry.doc != doc:
                    rewrite[entry.stored.packet.packet_id] = doc.dumps()
                continue  # the stored packet stays (and its created time)
            if entry is not None:
                remove.append(dia_id)
                if "session" not in turn:  # the replacement stays in the turn's session
                    turn = {
                        **turn,
                        "session": entry.stored.packet.session,
                        "session_label": entry.stored.packet.session_label,
                    }
            add.append(turn)
            docs[dia_id] = doc
        records = self.memory.engine.records
        if rewrite:
            records.put_items(user, rewrite)
        if remove:
            self.memory.delete_turns(user, remove)
        if add:
            counts = self.memory.add_turns(add, user_id=user)
            if counts["stored"] != len(add):
                raise ValueError(f"user {user!r}: {len(add)} turns put, {counts['stored']} stored ({counts})")
            stored = self.memory.turns(user, dia_ids=list(docs))
            records.put_items(
                user,
                {
                    t.packet.packet_id: _placed(docs[t.packet.dia_id], t.packet.seq).dumps()
                    for t in stored
                    if t.packet.dia_id in docs
                },
            )

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

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError("limit and offset must not be negative")
        users = self._users_under(op.namespace_prefix)
        listed = [(ns, e) for ns, user in users for e in self._all_entries(user) if matches_filter(e.value, op.filter)]
        if not op.query:
            found: Iterator[SearchItem] = (self._item(ns, e, score=None) for ns, e in listed)
        else:
            found = self._ranked(op.query, users, listed)
        return list(islice(found, op.offset, op.offset + op.limit))

    def _ranked(
        self, query: str, users: list[tuple[tuple[str, ...], str]], listed: list[tuple[tuple[str, ...], _Entry]]
    ) -> Iterator[SearchItem]:
        """The compiled selections of every user by score (higher first), then the other items in listing order."""
        wanted = {(ns, e.stored.packet.packet_id): e for ns, e in listed if e.indexed}
        hits = []
        for namespace, user in users if clean_text(query) else ():
            ctx = self.memory.compile(query, user_id=user)
            for doc in packet_documents(self.memory, user, ctx):
                meta = doc.metadata
                entry = wanted.pop((namespace, meta["packet_id"]), None)
                if entry is None:
                    continue  # filtered out, `index=False`, or deleted since the compile
                provenance = {k: meta[k] for k in ("rank", "source", "packet_id")} | {"compiled": doc.page_content}
                hits.append((_unit_score(meta["score"]), namespace, meta["rank"], entry, provenance))
        hits.sort(key=lambda h: (-h[0], h[1], h[2]))
        for score, namespace, _, entry, provenance in hits:
            item = self._item(namespace, entry, score=score)
            item.value["memcompile"] = provenance
            yield item
        for namespace, entry in listed:
            if (namespace, entry.stored.packet.packet_id) in wanted or not entry.indexed:
                yield self._item(namespace, entry, score=0.0 if entry.indexed else None)

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
    return doc if doc.position >= 0 else ItemDocument(doc.value, seq, doc.indexed)


def _same_turn(packet: SourcePacket, turn: dict[str, Any]) -> bool:
    """The turn the put would store is the stored one (content hash and, when given, session)."""
    t = coerce_turn(turn)
    same = packet.content_hash == SourcePacket.hash_content(t.speaker, t.text, t.time, t.image_caption, t.image_query)
    return same and (t.session is None or t.session == packet.session)
