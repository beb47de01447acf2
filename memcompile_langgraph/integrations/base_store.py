"""MemCompileStore: MemCompile behind LangGraph's long-term memory API (`BaseStore`).

Namespace -> user, one-to-one both ways: the labels, each with "%" and "." escaped ("%25", "%2E"), joined with ".":
("memories", "tom") is the user "memories.tom", ("tom",) the user "tom", and the user "tom.smith" (made by another
surface) is the namespace ("tom", "smith"), never one below ("tom",)'s memory: a prefix matches whole labels. The user
id is validated like everywhere else. A server where each caller owns one memory uses `one_label` (the user is the
namespace's only label, escaped: ("tom",) is "tom", ("tom%2Esmith",) is "tom.smith"; deeper namespaces are refused),
so that no namespace lies below another user's. Change it with namespace_to_user / user_to_namespace (the inverse,
used to list namespaces; None hides a user).

Item <-> turn: an item is one stored turn and its key is the turn's dia_id (store_values.py says which field
becomes the text and what `get` returns; the empty key, which a dia_id cannot be, is kept under an escaped one). Where store semantics and MemCompile's differ:
- put under an existing key with a different turn replaces it: packets are immutable, so it is delete + add (the turn
  gets a new created time, its claims and Cells are rebuilt); the same turn again changes nothing.
- created_at == updated_at (the commit time of the turn); a value's fields other than the turn's are not kept.
- search with a query returns the compiled selection (not a similarity ranking) in schedule order: per matching
  user, at most K0 + K_delta packets, then filter, offset and limit over them. Each value carries the turn plus
  provenance: rank, source (anchor / frontier), packet_id, and `compiled` (the rendered block: header and claims);
  SearchItem.score is the packet's score. The compiler calls an LLM only when the MemCompile was built with one.
- search without a query lists turns in dialogue order (filter, offset, limit); several users under a prefix come
  in namespace order.
- ops in one batch run in order; consecutive puts are stored with one add_turns per user. No TTL, no `index` fields
  (every turn is indexed the MemCompile way).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from itertools import islice
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
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
from ..users import validate_user_id
from .retriever import packet_documents
from .store_values import dia_id_key, key_dia_id, matches_filter, turn_value, value_turn

log = logging.getLogger(__name__)

SEPARATOR = "."  # cannot occur inside a LangGraph namespace label
PAGE = 256  # turns read at a time when listing
_ESCAPES = (("%", "%25"), (".", "%2E"))  # "%" first: an escape's own "%" is not escaped again


def escape_label(label: str) -> str:
    for raw, escaped in _ESCAPES:
        label = label.replace(raw, escaped)
    return label


def unescape_label(label: str) -> str:
    for raw, escaped in reversed(_ESCAPES):
        label = label.replace(escaped, raw)
    return label


def join_namespace(namespace: tuple[str, ...]) -> str:
    return SEPARATOR.join(escape_label(label) for label in namespace)


def split_user(user_id: str) -> tuple[str, ...] | None:
    """The namespace of a user id; None for an id no namespace maps to (an empty label, an escape of another kind,
    a label with "." that LangGraph would refuse)."""
    labels = tuple(unescape_label(part) for part in user_id.split(SEPARATOR))
    usable = all(labels) and not any(SEPARATOR in label or "\x00" in label for label in labels)
    return labels if usable and join_namespace(labels) == user_id else None


def one_label_user(namespace: tuple[str, ...]) -> str:
    """The user of a namespace of one label (its escapes undone); deeper namespaces are refused."""
    if len(namespace) != 1:
        raise ValueError(f"namespace {namespace!r}: this store holds one memory per namespace of one label, the user's")
    return unescape_label(namespace[0])


def one_label_namespace(user_id: str) -> tuple[str, ...] | None:
    label = escape_label(user_id)
    return (label,) if "\x00" not in label and unescape_label(label) == user_id else None


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _matches_path(labels: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(labels) == len(path) and all(p == "*" or p == label for p, label in zip(path, labels))


class MemCompileStore(BaseStore):
    """A LangGraph store over a MemCompile: one user per namespace, one turn per item."""

    def __init__(
        self,
        memory: MemCompile,
        *,
        namespace_to_user: Callable[[tuple[str, ...]], str] = join_namespace,
        user_to_namespace: Callable[[str], tuple[str, ...] | None] = split_user,
        user_speaker: str = "User",
        assistant_speaker: str = "Assistant",
    ):
        self.memory = memory
        self.namespace_to_user = namespace_to_user
        self.user_to_namespace = user_to_namespace
        self.speakers = (user_speaker, assistant_speaker)

    def user(self, namespace: tuple[str, ...]) -> str:
        return validate_user_id(self.namespace_to_user(tuple(namespace)))

    # --- batch -------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        puts: list[PutOp] = []
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                puts.append(op)
                continue
            self._put_all(puts)
            puts = []
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            else:
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        self._put_all(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- get / put -----------------------------------------------------------------------------
    def _item(self, namespace: tuple[str, ...], stored: StoredTurn) -> Item:
        at = _time(stored.created_at)
        packet = stored.packet
        return Item(
            value=turn_value(packet), key=dia_id_key(packet.dia_id), namespace=namespace, created_at=at, updated_at=at
        )

    def _get(self, op: GetOp) -> Item | None:
        found = self.memory.turns(self.user(op.namespace), dia_ids=[key_dia_id(op.key)])
        return self._item(tuple(op.namespace), found[0]) if found else None

    def _put_all(self, puts: list[PutOp]) -> None:
        """Every value is checked before anything changes; then per user: replaced turns removed, new ones added."""
        if not puts:
            return
        latest: dict[tuple[str, str], Any] = {}  # a key put twice in one batch: the last value wins
        for op in puts:
            if op.ttl is not None:
                raise NotImplementedError("MemCompileStore keeps turns until they are deleted: ttl is not supported")
            user = self.user(op.namespace)
            dia_id = key_dia_id(op.key)
            latest[(user, dia_id)] = None if op.value is None else value_turn(op.value, dia_id, *self.speakers)
        by_user: dict[str, dict[str, Any]] = {}
        for (user, key), turn in latest.items():
            by_user.setdefault(user, {})[key] = turn
        for user, turns in by_user.items():
            self._put_user(user, turns)

    def _put_user(self, user: str, turns: dict[str, dict[str, Any] | None]) -> None:
        stored = {t.packet.dia_id: t.packet for t in self.memory.turns(user, dia_ids=list(turns))}
        remove, add = [], []
        for key, turn in turns.items():
            old = stored.get(key)
            if old is not None and turn is not None and _same_turn(old, turn):
                continue  # putting the stored turn again keeps it (and its created time)
            if old is not None:
                remove.append(key)
                if turn is not None and "session" not in turn:  # the replacement stays in the turn's session
                    turn = {**turn, "session": old.session, "session_label": old.session_label}
            if turn is not None:
                add.append(turn)
        if remove:
            replaced = sum(turns[k] is not None for k in remove)
            if replaced:
                log.info(
                    "user %r: %d put(s) replace stored turns (packets are immutable: delete + add)", user, replaced
                )
            self.memory.delete_turns(user, remove)
        if add:
            counts = self.memory.add_turns(add, user_id=user)
            if counts["stored"] != len(add):
                raise ValueError(f"user {user!r}: {len(add)} turns put, {counts['stored']} stored ({counts})")

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
        found = self._compiled(op, op.query) if op.query else self._listed(op)
        return list(islice((i for i in found if matches_filter(i.value, op.filter)), op.offset, op.offset + op.limit))

    def _listed(self, op: SearchOp) -> Iterator[SearchItem]:
        for namespace, user in self._users_under(op.namespace_prefix):
            start = 0
            while page := self.memory.turns(user, limit=PAGE, offset=start):
                for stored in page:
                    at = _time(stored.created_at)
                    yield SearchItem(namespace, dia_id_key(stored.packet.dia_id), turn_value(stored.packet), at, at)
                start += len(page)

    def _compiled(self, op: SearchOp, query: str) -> Iterator[SearchItem]:
        for namespace, user in self._users_under(op.namespace_prefix):
            ctx = self.memory.compile(query, user_id=user)
            docs = packet_documents(self.memory, user, ctx)
            stored_turns = self.memory.turns(user, dia_ids=[d.metadata["dia_id"] for d in docs])
            created = {t.packet.dia_id: t for t in stored_turns}
            for doc in docs:
                meta, stored = doc.metadata, created.get(doc.metadata["dia_id"])
                if stored is None:
                    continue  # deleted since the compile
                value = {
                    **turn_value(stored.packet),
                    "rank": meta["rank"],
                    "source": meta["source"],
                    "packet_id": meta["packet_id"],
                    "compiled": doc.page_content,
                }
                at = _time(stored.created_at)
                yield SearchItem(namespace, dia_id_key(meta["dia_id"]), value, at, at, score=meta["score"])

    # --- namespaces ----------------------------------------------------------------------------
    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [namespace for namespace, _ in self._users_under(())]
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            if condition.match_type == "prefix":
                namespaces = [n for n in namespaces if _matches_path(n[: len(path)], path)]
            elif condition.match_type == "suffix":
                namespaces = [n for n in namespaces if len(n) >= len(path) and _matches_path(n[-len(path) :], path)]
            else:
                raise ValueError(f"unknown namespace match type {condition.match_type!r}")
        if op.max_depth is not None:
            namespaces = sorted({n[: op.max_depth] for n in namespaces})
        return namespaces[op.offset : op.offset + op.limit]


def _same_turn(packet: SourcePacket, turn: dict[str, Any]) -> bool:
    """The turn the put would store is the stored one (content hash and, when given, session)."""
    t = coerce_turn(turn)
    same = packet.content_hash == SourcePacket.hash_content(t.speaker, t.text, t.time, t.image_caption, t.image_query)
    return same and (t.session is None or t.session == packet.session)
