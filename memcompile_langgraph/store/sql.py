"""The RecordsStore contract (store/protocols.py) once for both SQL databases: every query of the records, written with
`?` placeholders, over a few primitives each database gives (store/sqlite.py, store/postgres.py): a write transaction,
reads (in one consistent view where asked), the next version, the membership test, and the dialect's spellings.

The tables are the same in both; a row changed by anything but this code gives its user a new epoch by a trigger
(each database's own, see TRIGGERS in store/sqlite.py), so no cached index or snapshot file of before the change is
extended."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..model import Descriptor, SourcePacket
from .protocols import NO_RECORDS, Expiry, Head, LoadedRecords, Moved, StoredTurn, StoreError
from .rows import (
    DESC_COLS,
    EXPIRY,
    PACKET_COLS,
    chain,
    chained_rows,
    descriptors_from_rows,
    embedding_key,
    expiry_key,
    forgetting_key,
    item_key,
    removing_key,
)

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)
# 1: no epochs, no created_at; 2: no (user_id, seq) indexes; 3: no digest chain;
# 4: a packet's (user_id, seq) not unique, no writer epochs, no insert trigger on descriptors, none on packets that
# carry a digest. Migrated on open.
SCHEMA_VERSION = 5
MAX_MEMBERS = 900  # values one membership test takes (SQLite before 3.32 binds at most 999 in a statement)

# {big}: a 64-bit integer, {real}: a double, in the database's spelling
TABLES = """
CREATE TABLE IF NOT EXISTS users (user_id TEXT PRIMARY KEY, version {big} NOT NULL DEFAULT 0,
    epoch {big} NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS packets (
    user_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq {big} NOT NULL, dia_id TEXT NOT NULL,
    speaker TEXT NOT NULL, session {big} NOT NULL, session_label TEXT NOT NULL, session_time TEXT,
    session_time_raw TEXT NOT NULL, text TEXT NOT NULL, image_caption TEXT NOT NULL, image_query TEXT NOT NULL,
    content_hash TEXT NOT NULL, created_at {real} NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, packet_id), UNIQUE (user_id, dia_id));
CREATE TABLE IF NOT EXISTS descriptors (
    user_id TEXT NOT NULL, descriptor_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq {big} NOT NULL,
    claim TEXT NOT NULL, dia_id TEXT NOT NULL, speaker TEXT NOT NULL, session {big} NOT NULL, session_time TEXT,
    people TEXT NOT NULL, keywords TEXT NOT NULL, event_time TEXT NOT NULL, interaction_time TEXT NOT NULL,
    n_tokens {big} NOT NULL, negated INTEGER NOT NULL, cell_id TEXT NOT NULL,
    PRIMARY KEY (user_id, descriptor_id));
CREATE INDEX IF NOT EXISTS descriptors_packet ON descriptors (user_id, packet_id);
CREATE UNIQUE INDEX IF NOT EXISTS packets_seq ON packets (user_id, seq);
CREATE INDEX IF NOT EXISTS descriptors_seq ON descriptors (user_id, seq);
CREATE TABLE IF NOT EXISTS counters (user_id TEXT NOT NULL, name TEXT NOT NULL, value {big} NOT NULL,
    PRIMARY KEY (user_id, name));
CREATE TABLE IF NOT EXISTS writer_epochs (user_id TEXT PRIMARY KEY, epoch {big} NOT NULL);
"""
# writer_epochs: one per writer-lock taking of a user, where a lock can be lost while its writer lives on (PostgreSQL)


# a quoted literal or identifier, where a `?` is text, not a placeholder
_QUOTED = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")""")


@lru_cache(maxsize=1024)
def pyformat(sql: str) -> str:
    """SQL with `?` placeholders in psycopg's style: `?` outside quotes becomes `%s`, and every `%` is doubled, since
    psycopg reads `%` as the start of a placeholder wherever it stands."""
    parts = _QUOTED.split(sql.replace("%", "%%"))
    return "".join(part if i % 2 else part.replace("?", "%s") for i, part in enumerate(parts))


class Tx:
    """A connection inside a transaction (or a read) of either database, taking SQL with `?` placeholders."""

    __slots__ = ("conn", "paramstyle")

    def __init__(
        self, conn: sqlite3.Connection | psycopg.Connection[tuple[Any, ...]], paramstyle: Literal["qmark", "pyformat"]
    ) -> None:
        self.conn, self.paramstyle = conn, paramstyle  # the driver's DB-API paramstyle

    def _sql(self, sql: str) -> str:
        return sql if self.paramstyle == "qmark" else pyformat(sql)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """One statement; its cursor (the driver's)."""
        return self.conn.execute(self._sql(sql), args)

    def one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.execute(sql, args).fetchone()
        return row

    def row(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...]:
        """The row of a query that always returns one (an aggregate, a meta key written at creation)."""
        row = self.one(sql, args)
        if row is None:
            raise StoreError("the database returned no row where one always exists")
        return row

    def all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.execute(sql, args).fetchall()
        return rows

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Executes a statement; returns the rows it changed."""
        changed: int = self.execute(sql, args).rowcount
        return changed

    def many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            cur = self.conn.cursor()
            try:
                cur.executemany(self._sql(sql), rows)
            finally:
                cur.close()

    def put_meta(self, key: str, value: str, replace: bool = True) -> None:
        """Sets a meta key (replace=False: only where it is not set yet)."""
        on_conflict = "DO UPDATE SET value = excluded.value" if replace else "DO NOTHING"
        self.run(f"INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) {on_conflict}", (key, value))


def rechain(tx: Tx, user_id: str, first_seq: int) -> str:
    """Recomputes the user's chain from packet `first_seq` on (after a delete; once for stores made before the
    chain) inside the caller's transaction; returns the newest digest."""
    row = tx.one("SELECT digest FROM packets WHERE user_id=? AND seq<? ORDER BY seq DESC LIMIT 1", (user_id, first_seq))
    prev = row[0] if row else ""
    prows = tx.all(f"SELECT {PACKET_COLS} FROM packets WHERE user_id=? AND seq>=? ORDER BY seq", (user_id, first_seq))
    dcols = ", ".join(f"d.{c.strip()}" for c in f"user_id, {DESC_COLS}".split(","))
    drows = tx.all(
        f"SELECT {dcols} FROM descriptors d JOIN packets p ON p.user_id = d.user_id AND p.packet_id = d.packet_id "
        "WHERE d.user_id=? AND p.seq>=?",
        (user_id, first_seq),
    )
    digests = chain(prev, prows, drows)
    tx.many(
        "UPDATE packets SET digest=? WHERE user_id=? AND packet_id=?",
        [(dg, user_id, p[0]) for p, dg in zip(prows, digests)],
    )
    newest = digests[-1] if digests else prev
    tx.run("UPDATE users SET digest=? WHERE user_id=?", (newest, user_id))
    return newest


class SqlRecords(ABC):
    """A RecordsStore over SQL; a database's subclass gives the abstract methods and the spellings below."""

    INTEGER: ClassVar[str]  # a 64-bit integer column
    REAL: ClassVar[str]  # a double column
    BYTE_ORDER: ClassVar[str]  # the collation that sorts text by its bytes
    ROW_LOCK: ClassVar[str]  # appended to a SELECT of one row that the transaction goes on to change
    NO_LIMIT: ClassVar[int | None]  # the LIMIT value that sets none
    where: str  # the records, named in errors

    # the primitives

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Tx]:
        """A write transaction: committed on success, rolled back on any exception."""

    @abstractmethod
    def _read(self, consistent: bool = False) -> AbstractContextManager[Tx]:
        """Reads; with consistent, several in one view of the database (another process may commit between them)."""

    @abstractmethod
    def _next_version(self, tx: Tx, user_id: str) -> int:
        """A new version from the store-wide generation, never repeated (forget included)."""

    @abstractmethod
    def _member(self, column: str, values: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
        """`column` is one of `values`, as a condition and its arguments."""

    @abstractmethod
    def _columns(self, tx: Tx, table: str) -> set[str]:
        """The columns of one of the store's tables."""

    @abstractmethod
    def _triggers(self) -> list[str]:
        """The statements that (re)make the triggers giving a new epoch to users whose rows were changed by hand."""

    @abstractmethod
    def _start_generation(self, tx: Tx, top: int) -> None:
        """Makes the version generation where missing, above every version already given (`top`)."""

    @abstractmethod
    def write_lock(self, user_id: str, blocking: bool = True) -> AbstractContextManager[bool]: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _fence(self, tx: Tx, user_id: str) -> None:
        """Inside a write transaction of the user: fails it when this process's writer of the user lost its writer
        lock."""

    @abstractmethod
    def _scrub(self) -> None:
        """After rows were deleted: whatever the database needs so that they leave nothing readable behind."""

    # the schema

    def _found_schema(self, tx: Tx, tables: set[str], meta: str = "meta") -> int | None:
        """The schema version of the tables found (None: no store yet); one newer than this code reads is an error."""
        found = None
        if "meta" in tables:
            row = tx.one(f"SELECT value FROM {meta} WHERE key='schema_version'")
            value = str(row[0]) if row else "1"
            if not value.isdecimal() or int(value) < 1:  # no memcompile wrote it: upgrading it would guess
                raise StoreError(f"{self.where} has schema version {value!r}, which no memcompile writes")
            found = int(value)
        elif "packets" in tables:
            found = 1
        if found is not None and found > SCHEMA_VERSION:
            raise StoreError(
                f"{self.where} has schema {found}; this memcompile reads up to {SCHEMA_VERSION}: "
                "upgrade memcompile-langgraph"
            )
        return found

    def _upgrade(self, tx: Tx, found: int | None) -> None:
        """Brings the tables from schema `found` (None: none yet) to SCHEMA_VERSION in the caller's transaction."""
        if found == 1:  # before CREATE ... IF NOT EXISTS, which leaves the old tables as they are
            tx.run(f"ALTER TABLE users ADD COLUMN epoch {self.INTEGER} NOT NULL DEFAULT 0")
            tx.run(f"ALTER TABLE packets ADD COLUMN created_at {self.REAL} NOT NULL DEFAULT 0")
            tx.run("UPDATE users SET epoch = version")
        for table in ("users", "packets") if found is not None else ():
            if "digest" not in self._columns(tx, table):
                tx.run(f"ALTER TABLE {table} ADD COLUMN digest TEXT NOT NULL DEFAULT ''")
        if found is not None and found < 5:
            self._unique_seqs(tx)
        for statement in [*TABLES.format(big=self.INTEGER, real=self.REAL).split(";"), *self._triggers()]:
            if statement.strip():
                tx.run(statement)
        self._start_generation(tx, int(tx.row("SELECT COALESCE(MAX(version), 0) FROM users")[0]))
        for (user,) in tx.all("SELECT user_id FROM users") if found is not None and found < 4 else ():
            rechain(tx, user, -1)  # once: stores without the chain
        tx.put_meta("schema_version", str(SCHEMA_VERSION))

    def _unique_seqs(self, tx: Tx) -> None:
        """Before (user_id, seq) is unique: packets that two writers gave one seq (a writer that went on after losing
        its lock) move behind the user's last, in the order they were committed, and the chain is recomputed."""
        tx.run("DROP INDEX IF EXISTS packets_seq")
        users = [r[0] for r in tx.all("SELECT DISTINCT user_id FROM packets GROUP BY user_id, seq HAVING COUNT(*) > 1")]
        for user in users:
            rows = tx.all(
                "SELECT packet_id, seq FROM packets WHERE user_id=? ORDER BY seq, created_at, packet_id", (user,)
            )
            top, seen, moved = max(r[1] for r in rows), set(), []
            for pid, seq in rows:
                if seq in seen:
                    top += 1
                    moved.append((top, user, pid))
                seen.add(seq)
            tx.many("UPDATE packets SET seq=? WHERE user_id=? AND packet_id=?", moved)
            log.warning(
                "%s: %d packets of one user shared a seq with another; moved behind the last", self.where, len(moved)
            )
            rechain(tx, user, -1)
            self._bump(tx, user, epoch=True)

    def _rehome(self, tx: Tx, home: str, copied: str) -> None:
        """Binds the store id to `home`, where the records live: records found elsewhere than where they were made
        (`copied` says how that comes about) get a new store id, before anything derived is named after it, so they
        never share the original's Chroma collections or snapshot files. The id they came with is kept in
        `moved_from` with where it lived, until what was derived under it is swept (`moved`)."""
        row = tx.one("SELECT value FROM meta WHERE key='home'")
        if row is not None and row[0] == home:
            return
        old = tx.one("SELECT value FROM meta WHERE key='store_id'")
        if row is not None and old is not None and tx.run("DELETE FROM meta WHERE key='store_id'"):
            tx.run("DELETE FROM meta WHERE key='deployment'")  # a new store: bound where it is opened next
            log.warning(
                "%s holds a copy of another store's records (%s): it gets a new store id; its vectors on a Chroma "
                "server are rebuilt from the records",
                self.where,
                copied,
            )
            place = tx.one("SELECT value FROM meta WHERE key='place'")
            earlier = [*self._moved(tx), {"store_id": old[0], "home": row[0], "place": place[0] if place else None}]
            tx.put_meta("moved_from", json.dumps(earlier))
        tx.put_meta("home", home)
        tx.put_meta("place", self._place())

    @staticmethod
    def _moved(tx: Tx) -> list[dict[str, Any]]:
        row = tx.one("SELECT value FROM meta WHERE key='moved_from'")
        return list(json.loads(row[0])) if row else []

    @abstractmethod
    def _place(self) -> str:
        """Where these records are, as another store can look for them (a path; server, database and schema)."""

    @abstractmethod
    def holds(self, store_id: str, home: str, place: str | None = None) -> bool | None:
        """Whether the records bound to `home` (`place`: where they were) still exist with that store id (None:
        cannot tell from here)."""

    def home(self) -> str:
        """Where these records live, as store ids are bound to it (SqlRecords._rehome)."""
        row = self._one("SELECT value FROM meta WHERE key='home'")
        return row[0] if row else ""

    def moved(self) -> list[Moved]:
        """The store ids these records had before they were moved or copied here, each with whether the records it
        was bound to still exist (False: what was derived under it belongs to nobody; None: cannot tell here)."""
        with self._read() as tx:
            earlier = self._moved(tx)
        return [Moved(e["store_id"], self.holds(e["store_id"], e["home"], e["place"])) for e in earlier]

    def moved_swept(self, store_id: str) -> None:
        with self.transaction() as tx:
            left = [e for e in self._moved(tx) if e["store_id"] != store_id]
            if left:
                tx.put_meta("moved_from", json.dumps(left))
            else:
                tx.run("DELETE FROM meta WHERE key='moved_from'")

    # the contract

    def _one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self._read() as tx:
            return tx.one(sql, args)

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._read() as tx:
            return tx.all(sql, args)

    def store_id(self) -> str:
        """A random id fixed at creation (or at a re-key): names this store's derived state."""
        return self._made_meta("store_id", uuid.uuid4().hex)  # a read: writers check it at every unit of work

    def address(self) -> str | None:
        """Where this process reaches the records from, when that can differ between a database and a physical copy
        of it (a server's address; None for a file, whose copy gets its own store id)."""
        return None

    def apart(self, deployment: str | None = None) -> tuple[str, str] | None:
        """(this deployment, the first) when this process reaches the records under another deployment name than
        the first process did: a physical copy (pg_basebackup, a promoted standby) keeps the store id, so its
        vectors on a shared Chroma server are kept under names of their own. deployment: the operator's name for
        it, else address(). None: the first deployment (bound here when none is yet)."""
        name = deployment or self.address()
        if name is None:
            return None
        first = self._made_meta("deployment", name)
        return None if first == name else (name, first)

    def secret(self) -> str:
        """A random secret fixed at creation, readable only by those who can read the records (signs snapshot files)."""
        return self._made_meta("secret", uuid.uuid4().hex + uuid.uuid4().hex)

    def _made_meta(self, key: str, new: str) -> str:
        """The meta key's value, set to `new` where it is not set yet: a plain read when it is (readers never take
        the write lock, which waits behind every writer and fails on a read-only volume)."""
        row = self._one("SELECT value FROM meta WHERE key=?", (key,))
        if row is not None:
            found: str = row[0]
            return found
        with self.transaction() as tx:
            tx.put_meta(key, new, replace=False)
            made: str = tx.row("SELECT value FROM meta WHERE key=?", (key,))[0]
            return made

    def embedding(self, user_id: str) -> str | None:
        """Identity of the embedding model the user's stored vectors came from (None: not recorded yet)."""
        row = self._one("SELECT value FROM meta WHERE key=?", (embedding_key(user_id),))
        return row[0] if row else None

    def store_model(self, claim: str | None = None) -> str | None:
        """The embedding model of the store: the one model whose workers make vectors (None: no writer claimed it
        yet). claim: recorded as the store's where none is yet (a plain read when one is)."""
        if claim is not None:
            return self._made_meta("store_model", claim)
        row = self._one("SELECT value FROM meta WHERE key='store_model'")
        return row[0] if row else None

    def set_store_model(self, identity: str) -> None:
        """Makes `identity` the store's embedding model (MemCompile.switch_model: the one step that changes it)."""
        with self.transaction() as tx:
            tx.put_meta("store_model", identity)

    def set_embedding(self, user_id: str, identity: str, bump: bool = False) -> int:
        """Records the model of the user's vectors; with bump, also a new user version and epoch (returned)."""
        with self.transaction() as tx:
            self._fence(tx, user_id)
            tx.put_meta(embedding_key(user_id), identity)
            if bump:
                self._bump(tx, user_id, epoch=True)
        return self.version(user_id)

    def _bump(self, tx: Tx, user_id: str, epoch: bool) -> int:
        """A new version for the user; with epoch, the records changed other than by appending, so snapshots of
        older versions cannot be extended."""
        gen = self._next_version(tx, user_id)
        if epoch:
            tx.run("UPDATE users SET version = ?, epoch = ? WHERE user_id=?", (gen, gen, user_id))
        else:
            tx.run("UPDATE users SET version = ? WHERE user_id=?", (gen, user_id))
        return gen

    def version(self, user_id: str) -> int:
        return self.head(user_id)[0]

    def head(self, user_id: str) -> Head:
        """(version, epoch, digest) of the user in one indexed read; NO_RECORDS for a user with no records."""
        row = self._one("SELECT version, epoch, digest FROM users WHERE user_id=?", (user_id,))
        return Head(*row) if row else NO_RECORDS

    def digest_at(self, user_id: str, seq: int) -> str | None:
        """The chain digest at the user's packet `seq` ("" before the first; None: no such packet)."""
        if seq < 0:
            return ""
        row = self._one("SELECT digest FROM packets WHERE user_id=? AND seq=?", (user_id, seq))
        return row[0] if row else None

    def users(self) -> list[str]:
        return [r[0] for r in self._all(f"SELECT user_id FROM users ORDER BY user_id{self.BYTE_ORDER}")]

    def load(self, user_id: str, after: tuple[int, int] = (-1, -1)) -> LoadedRecords:
        """The user's records; with after=(packet seq, descriptor seq), only the rows beyond them."""
        with self._read(consistent=True) as tx:
            row = tx.one("SELECT version, digest FROM users WHERE user_id=?", (user_id,))
            prows = tx.all(
                f"SELECT {PACKET_COLS} FROM packets WHERE user_id=? AND seq>? ORDER BY seq", (user_id, after[0])
            )
            drows = tx.all(
                f"SELECT {DESC_COLS} FROM descriptors WHERE user_id=? AND seq>? ORDER BY seq", (user_id, after[1])
            )
        version, digest = row if row else (0, "")
        return LoadedRecords(version, [SourcePacket(*r) for r in prows], descriptors_from_rows(drows), digest)

    def turns(
        self, user_id: str, dia_ids: list[str] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[StoredTurn]:
        with self._read() as tx:
            return self._turns(tx, user_id, dia_ids, limit, offset)

    def turns_with_items(
        self, user_id: str, dia_ids: list[str] | None = None
    ) -> list[tuple[StoredTurn, str | None, Expiry | None]]:
        """The user's turns (all, or those with these dia_ids) in dialogue order, each with the document and the
        expiry kept beside it, in one consistent read: a replace committed meanwhile is seen whole or not at all."""
        with self._read(consistent=True) as tx:
            stored = self._turns(tx, user_id, dia_ids, None, 0)
            ids = [t.packet.packet_id for t in stored]
            docs = dict(self._keyed(tx, item_key(user_id, ""), ids))
            expiries = dict(self._keyed(tx, expiry_key(user_id, ""), ids))
        out = []
        for t in stored:
            read = _expiry(expiries[t.packet.packet_id]) if t.packet.packet_id in expiries else None
            out.append((t, docs.get(t.packet.packet_id), read[0] if read else None))
        return out

    def _turns(
        self, tx: Tx, user_id: str, dia_ids: list[str] | None, limit: int | None, offset: int
    ) -> list[StoredTurn]:
        sql = f"SELECT {PACKET_COLS}, created_at FROM packets WHERE user_id=?"
        args: tuple[Any, ...] = (user_id,)
        if dia_ids is not None:
            member, values = self._member("dia_id", dia_ids)
            sql += f" AND {member}"
            args += values
        sql += " ORDER BY seq LIMIT ? OFFSET ?"
        args += (self.NO_LIMIT if limit is None else limit, offset)
        return [StoredTurn(SourcePacket(*r[:-1]), r[-1]) for r in tx.all(sql, args)]

    def commit(
        self,
        user_id: str,
        packets: list[SourcePacket],
        placed: list[tuple[Descriptor, str]],
        counts: dict[str, int] | None = None,
        *,
        removed: Sequence[str] = (),
        items: Mapping[str, str] | None = None,
        expiries: Mapping[str, Expiry] | None = None,
    ) -> int:
        """Packets, their descriptors and the Cell memberships in one transaction; returns the new version. In the
        same transaction: the packets `removed` go (a replace: never a moment without either), and the documents
        and expiries of the new packets are kept beside them."""
        now = time.time()
        with self.transaction() as tx:
            self._fence(tx, user_id)
            if tx.run(
                "INSERT INTO users (user_id, version, epoch) VALUES (?, 0, 0) ON CONFLICT (user_id) DO NOTHING",
                (user_id,),
            ):
                self._bump(tx, user_id, epoch=True)  # a user made again after forget starts a new epoch
            if removed:
                self._delete(tx, user_id, list(removed))
            prev, epoch = tx.row(f"SELECT digest, epoch FROM users WHERE user_id=?{self.ROW_LOCK}", (user_id,))
            if packets:  # one range read; the unique (user_id, seq) index stops whatever gets past it
                seqs = {p.seq for p in packets}
                taken = tx.all(
                    "SELECT seq FROM packets WHERE user_id=? AND seq BETWEEN ? AND ?", (user_id, min(seqs), max(seqs))
                )
                if seqs & {r[0] for r in taken}:
                    raise StoreError(
                        f"user {user_id!r} was written by another writer since this one read it (a packet seq of "
                        "this batch is taken): nothing of this batch was stored"
                    )
            prows, drows, digests = chained_rows(prev, user_id, packets, placed, now)
            tx.many(f"INSERT INTO packets ({PACKET_COLS}, created_at, digest) VALUES ({','.join('?' * 15)})", prows)
            tx.many(f"INSERT INTO descriptors (user_id, {DESC_COLS}) VALUES ({','.join('?' * 16)})", drows)
            # the insert triggers gave a new epoch, as to rows inserted by hand: an append keeps the one it extends
            tx.run(
                "UPDATE users SET digest=?, epoch=? WHERE user_id=?", (digests[-1] if digests else prev, epoch, user_id)
            )
            self._count(tx, user_id, counts or {})
            self._put_item_rows(tx, user_id, items or {}, expiries or {})
            version = self._bump(tx, user_id, epoch=bool(removed))
        if removed:
            self._scrub()
        return version

    @staticmethod
    def _count(tx: Tx, user_id: str, counts: dict[str, int]) -> None:
        tx.many(
            "INSERT INTO counters (user_id, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT (user_id, name) DO UPDATE SET value = counters.value + excluded.value",
            [(user_id, k, int(v)) for k, v in sorted(counts.items()) if v],  # sorted: two writers never deadlock
        )

    def add_counts(self, user_id: str, counts: dict[str, int]) -> None:
        if any(counts.values()):
            with self.transaction() as tx:
                self._count(tx, user_id, counts)

    def counters(self, user_id: str) -> dict[str, int]:
        return dict(
            self._all(f"SELECT name, value FROM counters WHERE user_id=? ORDER BY name{self.BYTE_ORDER}", (user_id,))
        )

    def counts(self, user_id: str) -> dict[str, int]:
        with self._read(consistent=True) as tx:
            packets, sessions = tx.row(
                "SELECT COUNT(*), COUNT(DISTINCT session) FROM packets WHERE user_id=?", (user_id,)
            )
            descs, cells = tx.row(
                "SELECT COUNT(*), COUNT(DISTINCT cell_id) FROM descriptors WHERE user_id=?", (user_id,)
            )
        return {"packets": packets, "descriptors": descs, "cells": cells, "sessions": sessions}

    def delete_packets(self, user_id: str, packet_ids: list[str]) -> int:
        with self.transaction() as tx:
            self._fence(tx, user_id)
            self._delete(tx, user_id, packet_ids)
            version = self._bump(tx, user_id, epoch=True)
        self._scrub()
        return version

    def _delete(self, tx: Tx, user_id: str, packet_ids: list[str]) -> None:
        """The packets with their descriptors, documents and expiries, and the chain recomputed after them."""
        first = None
        for start in range(0, len(packet_ids), MAX_MEMBERS):
            member, values = self._member("packet_id", packet_ids[start : start + MAX_MEMBERS])
            low = tx.row(f"SELECT MIN(seq) FROM packets WHERE user_id=? AND {member}", (user_id, *values))[0]
            first = low if first is None or (low is not None and low < first) else first
            for table in ("descriptors", "packets"):
                tx.run(f"DELETE FROM {table} WHERE user_id=? AND {member}", (user_id, *values))
            chunk = packet_ids[start : start + MAX_MEMBERS]
            member, values = self._member("key", [k(user_id, p) for p in chunk for k in (item_key, expiry_key)])
            tx.run(f"DELETE FROM meta WHERE {member}", values)
        if first is not None:
            rechain(tx, user_id, first)
        # until removal_done: their vectors and the LLM replies that may quote them go after this commit
        row = tx.one(f"SELECT value FROM meta WHERE key=?{self.ROW_LOCK}", (removing_key(user_id),))
        pending = json.loads(row[0]) if row else []
        tx.put_meta(removing_key(user_id), json.dumps(sorted({*pending, *packet_ids})))

    def forget(self, user_id: str) -> None:
        with self.transaction() as tx:
            self._fence(tx, user_id)
            for table in ("descriptors", "packets", "counters", "users", "writer_epochs"):
                tx.run(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
            tx.run("DELETE FROM meta WHERE key IN (?, ?)", (embedding_key(user_id), removing_key(user_id)))
            for prefix in (item_key(user_id, ""), expiry_key(user_id, "")):
                tx.run("DELETE FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
            tx.put_meta(forgetting_key(user_id), "1")  # until forget_done: the derived state goes after this commit
        self._scrub()

    def pending_forgets(self) -> list[str]:
        prefix = forgetting_key("")
        rows = self._all(f"SELECT key FROM meta WHERE key LIKE ? ORDER BY key{self.BYTE_ORDER}", (prefix + "%",))
        return [key[len(prefix) :] for (key,) in rows if key.startswith(prefix)]

    def forget_done(self, user_id: str) -> None:
        with self.transaction() as tx:
            tx.run("DELETE FROM meta WHERE key=?", (forgetting_key(user_id),))

    def pending_removals(self) -> dict[str, list[str]]:
        prefix = removing_key("")
        rows = self._all("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
        return {key[len(prefix) :]: json.loads(value) for key, value in rows}

    def removal_done(self, user_id: str) -> None:
        with self.transaction() as tx:
            tx.run("DELETE FROM meta WHERE key=?", (removing_key(user_id),))
        self._scrub()  # the ids it named leave no page image behind either

    def put_items(
        self, user_id: str, items: Mapping[str, str], expiries: Mapping[str, Expiry | None] | None = None
    ) -> None:
        """Keeps a document beside each given packet (packet id -> text) and sets or clears (None) packet expiries,
        in one transaction; a packet that no longer exists gets nothing (the caller holds the user's writer lock, so
        a forget is either before, leaving no packet, or after, removing these too). Delete and forget remove them
        with the packet. MemCompileStore keeps a put's JSON value here, since a packet holds only the turn."""
        with self.transaction() as tx:
            self._fence(tx, user_id)
            self._put_item_rows(tx, user_id, items, expiries or {})

    def _put_item_rows(
        self, tx: Tx, user_id: str, items: Mapping[str, str], expiries: Mapping[str, Expiry | None]
    ) -> None:
        exists = "EXISTS (SELECT 1 FROM packets WHERE user_id=? AND packet_id=?)"
        upsert = f"INSERT INTO meta (key, value) SELECT CAST(? AS TEXT), CAST(? AS TEXT) WHERE {exists} ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        rows = [(item_key(user_id, p), text, user_id, p) for p, text in items.items()]
        rows += [
            (expiry_key(user_id, p), json.dumps({"at": e.at, "ttl": e.ttl, "user": user_id}), user_id, p)
            for p, e in expiries.items()
            if e is not None
        ]
        tx.many(upsert, rows)
        cleared = [expiry_key(user_id, p) for p, e in expiries.items() if e is None]
        for start in range(0, len(cleared), MAX_MEMBERS):
            member, values = self._member("key", cleared[start : start + MAX_MEMBERS])
            tx.run(f"DELETE FROM meta WHERE {member}", values)

    def expiries(self, user_id: str, packet_ids: Sequence[str]) -> dict[str, Expiry]:
        """The expiries of these packets (packets that never expire are absent)."""
        found = {}
        with self._read() as tx:
            rows = self._keyed(tx, expiry_key(user_id, ""), packet_ids)
        for key, text in rows:
            read = _expiry(text)
            if read is not None:
                found[key] = read[0]
        return found

    def expired(self, now: float) -> list[tuple[str, str]]:
        """(user, packet id) of every packet whose expiry is before `now`."""
        out = []
        for key, text in self._all("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(EXPIRY), EXPIRY)):
            read = _expiry(text)
            if read is not None and read[0].at <= now:
                out.append((read[1], key.rpartition(":")[2]))
        return out

    def items(self, user_id: str, packet_ids: Sequence[str]) -> dict[str, str]:
        """The documents put_items kept beside these packets (packet id -> text; packets without one are absent)."""
        with self._read() as tx:
            return dict(self._keyed(tx, item_key(user_id, ""), packet_ids))

    def _keyed(self, tx: Tx, prefix: str, packet_ids: Sequence[str]) -> list[tuple[str, str]]:
        found = []
        for start in range(0, len(packet_ids), MAX_MEMBERS):
            member, values = self._member("key", [prefix + p for p in packet_ids[start : start + MAX_MEMBERS]])
            found += [
                (key[len(prefix) :], text)
                for key, text in tx.all(f"SELECT key, value FROM meta WHERE {member}", values)
            ]
        return found


def _expiry(text: str) -> tuple[Expiry, str] | None:
    """A stored expiry read back with its user; None when it is not one (stored text is untrusted)."""
    try:
        row = json.loads(text)
        at, ttl, user = row["at"], row.get("ttl"), row.get("user")
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if not isinstance(at, (int, float)) or not isinstance(user, str):
        return None
    return Expiry(float(at), float(ttl) if isinstance(ttl, (int, float)) else None), user
