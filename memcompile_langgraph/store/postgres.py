"""PostgreSQL records store: the RecordsStore contract (store/protocols.py) for several workers on several machines.

Behaves as the SQLite store (store/sqlite.py): same tables and columns, same versions and epochs, same order.
Versions come from one PostgreSQL sequence per store (never repeat; gaps are harmless), so concurrent writers of
different users never wait on one generation row. Several stores share one database in their own PostgreSQL schema,
named by the URL: `postgresql://user@host:5432/db?schema=team_a` (default schema `memcompile`).

The writer lock is a session-level advisory lock on a connection of its own, held for the whole unit of work: a
unit of work (add_turns, reembed) spans several transactions with embedding and Chroma writes between them, which a
transaction-level lock would either release between batches or hold one transaction open for minutes. A worker that
dies mid-write closes its connection and the server releases the lock with it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg_pool

from ..model import Descriptor, SourcePacket
from .locks import UserLocks
from .protocols import NO_RECORDS, Head, LoadedRecords, StoredTurn, StoreError
from .rows import (
    DESC_COLS,
    EDITABLE,
    PACKET_COLS,
    chained_rows,
    descriptors_from_rows,
    embedding_key,
    rechain,
)

log = logging.getLogger(__name__)
# numbered as the SQLite store's: 1 had no epochs and no created_at, 2 no (user_id, seq) indexes, 3 no digest chain
SCHEMA_VERSION = 4
DEFAULT_SCHEMA = "memcompile"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (user_id TEXT PRIMARY KEY, version BIGINT NOT NULL DEFAULT 0,
    epoch BIGINT NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS packets (
    user_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq BIGINT NOT NULL, dia_id TEXT NOT NULL,
    speaker TEXT NOT NULL, session BIGINT NOT NULL, session_label TEXT NOT NULL, session_time TEXT,
    session_time_raw TEXT NOT NULL, text TEXT NOT NULL, image_caption TEXT NOT NULL, image_query TEXT NOT NULL,
    content_hash TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, packet_id), UNIQUE (user_id, dia_id));
CREATE INDEX IF NOT EXISTS packets_seq ON packets (user_id, seq);
CREATE TABLE IF NOT EXISTS descriptors (
    user_id TEXT NOT NULL, descriptor_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq BIGINT NOT NULL,
    claim TEXT NOT NULL, dia_id TEXT NOT NULL, speaker TEXT NOT NULL, session BIGINT NOT NULL, session_time TEXT,
    people TEXT NOT NULL, keywords TEXT NOT NULL, event_time TEXT NOT NULL, interaction_time TEXT NOT NULL,
    n_tokens BIGINT NOT NULL, negated INTEGER NOT NULL, cell_id TEXT NOT NULL,
    PRIMARY KEY (user_id, descriptor_id));
CREATE INDEX IF NOT EXISTS descriptors_packet ON descriptors (user_id, packet_id);
CREATE INDEX IF NOT EXISTS descriptors_seq ON descriptors (user_id, seq);
CREATE TABLE IF NOT EXISTS counters (user_id TEXT NOT NULL, name TEXT NOT NULL, value BIGINT NOT NULL,
    PRIMARY KEY (user_id, name));
"""


def _triggers(schema: str) -> list[str]:
    """As the SQLite store's TRIGGERS (store/sqlite.py); inserts and deletes per statement (a forget deletes every
    row of a user in one), edits per row (a column list rules out transition tables)."""
    epoch = f"UPDATE {schema}.users SET epoch = -1 - floor(random() * 4e18)::bigint WHERE user_id IN"
    out = [
        f"""CREATE OR REPLACE FUNCTION {schema}.rows_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN {epoch} (SELECT user_id FROM changed WHERE digest = '');
            ELSE {epoch} (SELECT user_id FROM changed);
            END IF;
            RETURN NULL;
        END $$""",
        f"""CREATE OR REPLACE FUNCTION {schema}.row_edited() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN {epoch} (OLD.user_id, NEW.user_id); RETURN NULL; END $$""",
        f"DROP TRIGGER IF EXISTS packets_inserted ON {schema}.packets",
        f"CREATE TRIGGER packets_inserted AFTER INSERT ON {schema}.packets REFERENCING NEW TABLE AS changed "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_changed()",
    ]
    for table, cols in EDITABLE.items():
        out += [
            f"DROP TRIGGER IF EXISTS {table}_deleted ON {schema}.{table}",
            f"CREATE TRIGGER {table}_deleted AFTER DELETE ON {schema}.{table} REFERENCING OLD TABLE AS changed "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_changed()",
            f"DROP TRIGGER IF EXISTS {table}_edited ON {schema}.{table}",
            f"CREATE TRIGGER {table}_edited AFTER UPDATE OF {cols} ON {schema}.{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.row_edited()",
        ]
    return out


def split_url(url: str) -> tuple[str, str]:
    """(libpq URL without our `schema` parameter, schema name); a bad schema name is a one-line StoreError."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(f"records URL must start with postgresql://, got {parts.scheme or 'no scheme'}://")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.fullmatch(schema):
        raise StoreError(f"schema {schema!r} in the records URL: use lower-case letters, digits and _ (at most 63)")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def describe(url: str) -> str:
    """Where the store is, without credentials."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


class PostgresRecords:
    """RecordsStore in one schema of a PostgreSQL database."""

    def __init__(self, url: str, create: bool = True, pool_size: int = 4):
        self.conninfo, self.schema = split_url(url)
        self.where = f"{describe(url)} (schema {self.schema})"
        self._writers = UserLocks()
        self._closed = threading.Event()
        try:
            with psycopg.connect(self.conninfo, connect_timeout=15) as conn:
                self._migrate(conn, create)
                self._bind_home(conn)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL at {self.where}: {_first_line(exc)}") from None
        self.pool = psycopg_pool.ConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=pool_size,
            configure=self._configure,
            check=psycopg_pool.ConnectionPool.check_connection,
            name=f"memcompile-{self.schema}",
            open=True,
        )

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.execute(f"SET search_path TO {self.schema}")  # the name was checked by split_url
        conn.commit()

    def _migrate(self, conn: psycopg.Connection, create: bool) -> None:
        enc = _row(conn.execute("SHOW server_encoding"))[0]
        if enc.upper() not in ("UTF8", "UTF-8"):
            raise StoreError(f"PostgreSQL at {self.where} stores text as {enc}; MemCompile needs a UTF8 database")
        with conn.transaction():
            # processes opening a new store at once: one creates it, the others wait and find it made
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{self.schema}/setup",))
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema=%s", (self.schema,)
                )
            }
            found = None
            if "meta" in tables:
                row = conn.execute(f"SELECT value FROM {self.schema}.meta WHERE key='schema_version'").fetchone()
                found = int(row[0]) if row else 1
            elif "packets" in tables:
                found = 1
            if found is not None and found > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.where} has schema {found}; this memcompile reads up to {SCHEMA_VERSION}: "
                    "upgrade memcompile-langgraph"
                )
            if found == SCHEMA_VERSION:
                return
            if found is None and not create:
                raise StoreError(f"no store at {self.where}")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            conn.execute(f"SET LOCAL search_path TO {self.schema}")
            if found == 1:  # before CREATE ... IF NOT EXISTS, which leaves the old tables as they are
                conn.execute("ALTER TABLE users ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0")
                conn.execute("ALTER TABLE packets ADD COLUMN created_at DOUBLE PRECISION NOT NULL DEFAULT 0")
                conn.execute("UPDATE users SET epoch = version")
            if found is not None:
                for table in ("users", "packets"):
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS digest TEXT NOT NULL DEFAULT ''")
            for statement in [*SCHEMA.split(";"), *_triggers(self.schema)]:
                if statement.strip():
                    conn.execute(statement)
            top = _row(conn.execute("SELECT COALESCE(MAX(version), 0) FROM users"))[0]
            conn.execute(f"CREATE SEQUENCE IF NOT EXISTS generation START WITH {int(top) + 1}")
            for (user,) in conn.execute("SELECT user_id FROM users").fetchall():  # once: stores without the chain
                rechain(conn, "%s", user, -1)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s) ON CONFLICT (key) "
                "DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    def _bind_home(self, conn: psycopg.Connection) -> None:
        """Binds the store id to where the records live (cluster, database, schema): a clone (CREATE DATABASE ...
        TEMPLATE, a dump restored into another database or schema) gets a new store id here, before anything derived
        is named after it, so it never shares the original's snapshot files or Chroma collections."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{self.schema}/setup",))
            try:
                with conn.transaction():  # a savepoint: the control data may be closed to this role
                    cluster = _row(conn.execute("SELECT system_identifier FROM pg_control_system()"))[0]
            except psycopg.errors.InsufficientPrivilege:
                cluster = "?"
            db = _row(conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()"))[0]
            home = f"{cluster}:{db}:{self.schema}"
            row = conn.execute(f"SELECT value FROM {self.schema}.meta WHERE key='home'").fetchone()
            if row is not None and row[0] == home:
                return
            if row is not None:
                gone = conn.execute(f"DELETE FROM {self.schema}.meta WHERE key='store_id'").rowcount
                if gone:
                    log.warning(
                        "%s holds a copy of another store's records (a clone or a restore elsewhere): it gets a new "
                        "store id; its vectors on a Chroma server are rebuilt from the records",
                        self.where,
                    )
            conn.execute(
                f"INSERT INTO {self.schema}.meta (key, value) VALUES ('home', %s) ON CONFLICT (key) "
                "DO UPDATE SET value = excluded.value",
                (home,),
            )

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self.pool.close()

    @contextlib.contextmanager
    def transaction(self, repeatable: bool = False) -> Iterator[psycopg.Connection]:
        """One transaction on a pooled connection: committed on success, rolled back on any exception."""
        try:
            with self.pool.connection() as conn:
                if repeatable:  # one snapshot for several reads: another worker may commit between them
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield conn
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"PostgreSQL at {self.where}: {_first_line(exc)}") from None

    def write_lock(self, user_id: str, blocking: bool = True) -> AbstractContextManager[bool]:
        """Serializes writers of one user across threads, processes and machines. Yields whether it is held:
        with blocking=False it gives up at once when another writer has it."""
        return self._writers.hold(user_id, lambda b: self._advisory(user_id, b), blocking)

    @contextlib.contextmanager
    def _advisory(self, user_id: str, blocking: bool) -> Iterator[bool]:
        key = f"{self.schema}/{user_id}"  # a schema name has no '/': two stores' users never share a lock
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=15)
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL at {self.where}: {_first_line(exc)}") from None
        with conn:  # closing the connection releases the lock whatever happens below
            if blocking:
                conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
            elif not _row(conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)))[0]:
                yield False
                return
            yield True

    def _one(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self.transaction() as conn:
            return conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self.transaction() as conn:
            return conn.execute(sql, args).fetchall()

    def store_id(self) -> str:
        """A random id fixed at creation (or at a re-key): names this store's derived state."""
        row = self._one("SELECT value FROM meta WHERE key='store_id'", ())
        if row is not None:
            stored: str = row[0]  # a read: writers check it at every unit of work
            return stored
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('store_id', %s) ON CONFLICT (key) DO NOTHING",
                (uuid.uuid4().hex,),
            )
            made: str = _row(conn.execute("SELECT value FROM meta WHERE key='store_id'"))[0]
            return made

    def secret(self) -> str:
        """A random secret fixed at creation, readable only by those who can read the records (signs snapshot files)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('secret', %s) ON CONFLICT (key) DO NOTHING",
                (uuid.uuid4().hex + uuid.uuid4().hex,),
            )
            secret: str = _row(conn.execute("SELECT value FROM meta WHERE key='secret'"))[0]
            return secret

    def embedding(self, user_id: str) -> str | None:
        """Identity of the embedding model the user's stored vectors came from (None: not recorded yet)."""
        row = self._one("SELECT value FROM meta WHERE key=%s", (embedding_key(user_id),))
        return row[0] if row else None

    def set_embedding(self, user_id: str, identity: str, bump: bool = False) -> int:
        """Records the model of the user's vectors; with bump, also a new user version and epoch (returned)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (embedding_key(user_id), identity),
            )
            if bump:
                self._bump(conn, user_id, epoch=True)
        return self.version(user_id)

    @staticmethod
    def _bump(conn: psycopg.Connection, user_id: str, epoch: bool) -> int:
        """A new version from the store's sequence (never repeats, forget included); with epoch, the records
        changed other than by appending. The user's row is locked first, so one user's versions only grow."""
        conn.execute("SELECT 1 FROM users WHERE user_id=%s FOR UPDATE", (user_id,))
        gen: int = _row(conn.execute("SELECT nextval('generation')"))[0]
        if epoch:
            conn.execute("UPDATE users SET version = %s, epoch = %s WHERE user_id=%s", (gen, gen, user_id))
        else:
            conn.execute("UPDATE users SET version = %s WHERE user_id=%s", (gen, user_id))
        return gen

    def version(self, user_id: str) -> int:
        return self.head(user_id)[0]

    def head(self, user_id: str) -> Head:
        """(version, epoch, digest) of the user in one indexed read; NO_RECORDS for a user with no records."""
        row = self._one("SELECT version, epoch, digest FROM users WHERE user_id=%s", (user_id,))
        return Head(*row) if row else NO_RECORDS

    def digest_at(self, user_id: str, seq: int) -> str | None:
        """The chain digest at the user's packet `seq` ("" before the first; None: no such packet)."""
        if seq < 0:
            return ""
        row = self._one("SELECT digest FROM packets WHERE user_id=%s AND seq=%s", (user_id, seq))
        return row[0] if row else None

    def users(self) -> list[str]:
        # byte order, as SQLite sorts: the database's collation may be a locale's
        return [r[0] for r in self._all('SELECT user_id FROM users ORDER BY user_id COLLATE "C"', ())]

    def load(self, user_id: str, after: tuple[int, int] = (-1, -1)) -> LoadedRecords:
        """The user's records; with after=(packet seq, descriptor seq), only the rows beyond them."""
        with self.transaction(repeatable=True) as conn:
            row = conn.execute("SELECT version, digest FROM users WHERE user_id=%s", (user_id,)).fetchone()
            prows = conn.execute(
                f"SELECT {PACKET_COLS} FROM packets WHERE user_id=%s AND seq>%s ORDER BY seq", (user_id, after[0])
            ).fetchall()
            drows = conn.execute(
                f"SELECT {DESC_COLS} FROM descriptors WHERE user_id=%s AND seq>%s ORDER BY seq", (user_id, after[1])
            ).fetchall()
        version, digest = row if row else (0, "")
        return LoadedRecords(version, [SourcePacket(*r) for r in prows], descriptors_from_rows(drows), digest)

    def turns(
        self, user_id: str, dia_ids: list[str] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[StoredTurn]:
        sql = f"SELECT {PACKET_COLS}, created_at FROM packets WHERE user_id=%s"
        args: list[Any] = [user_id]
        if dia_ids is not None:
            sql += " AND dia_id = ANY(%s)"
            args.append(list(dia_ids))
        sql += " ORDER BY seq LIMIT %s OFFSET %s"  # LIMIT NULL: no limit
        args += [limit, offset]
        return [StoredTurn(SourcePacket(*r[:-1]), r[-1]) for r in self._all(sql, tuple(args))]

    def commit(
        self,
        user_id: str,
        packets: list[SourcePacket],
        placed: list[tuple[Descriptor, str]],
        counts: dict[str, int] | None = None,
    ) -> int:
        """Packets, their descriptors and the Cell memberships in one transaction; returns the new version."""
        now = time.time()
        with self.transaction() as conn:
            made = conn.execute(
                "INSERT INTO users (user_id, version, epoch) VALUES (%s, 0, 0) ON CONFLICT (user_id) "
                "DO NOTHING RETURNING 1",
                (user_id,),
            ).fetchone()
            if made:
                self._bump(conn, user_id, epoch=True)  # a user made again after forget starts a new epoch
            prev = _row(conn.execute("SELECT digest FROM users WHERE user_id=%s FOR UPDATE", (user_id,)))[0]
            prows, drows, digests = chained_rows(prev, user_id, packets, placed, now)
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO packets ({PACKET_COLS}, created_at, digest) VALUES ({','.join(['%s'] * 15)})", prows
                )
                cur.executemany(
                    f"INSERT INTO descriptors (user_id, {DESC_COLS}) VALUES ({','.join(['%s'] * 16)})", drows
                )
            if digests:
                conn.execute("UPDATE users SET digest=%s WHERE user_id=%s", (digests[-1], user_id))
            self._count(conn, user_id, counts or {})
            return self._bump(conn, user_id, epoch=False)

    @staticmethod
    def _count(conn: psycopg.Connection, user_id: str, counts: dict[str, int]) -> None:
        rows = [(user_id, k, int(v)) for k, v in sorted(counts.items()) if v]  # sorted: no deadlock between two
        if rows:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO counters (user_id, name, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (user_id, name) DO UPDATE SET value = counters.value + excluded.value",
                    rows,
                )

    def add_counts(self, user_id: str, counts: dict[str, int]) -> None:
        if any(counts.values()):
            with self.transaction() as conn:
                self._count(conn, user_id, counts)

    def counters(self, user_id: str) -> dict[str, int]:
        rows = self._all('SELECT name, value FROM counters WHERE user_id=%s ORDER BY name COLLATE "C"', (user_id,))
        return dict(rows)

    def counts(self, user_id: str) -> dict[str, int]:
        with self.transaction(repeatable=True) as conn:
            packets, sessions = _row(
                conn.execute("SELECT COUNT(*), COUNT(DISTINCT session) FROM packets WHERE user_id=%s", (user_id,))
            )
            descs, cells = _row(
                conn.execute("SELECT COUNT(*), COUNT(DISTINCT cell_id) FROM descriptors WHERE user_id=%s", (user_id,))
            )
        return {"packets": packets, "descriptors": descs, "cells": cells, "sessions": sessions}

    def delete_packets(self, user_id: str, packet_ids: list[str]) -> int:
        with self.transaction() as conn:
            ids = list(packet_ids)
            first = _row(
                conn.execute("SELECT MIN(seq) FROM packets WHERE user_id=%s AND packet_id = ANY(%s)", (user_id, ids))
            )[0]
            conn.execute("DELETE FROM descriptors WHERE user_id=%s AND packet_id = ANY(%s)", (user_id, ids))
            conn.execute("DELETE FROM packets WHERE user_id=%s AND packet_id = ANY(%s)", (user_id, ids))
            if first is not None:
                rechain(conn, "%s", user_id, first)
            return self._bump(conn, user_id, epoch=True)

    def forget(self, user_id: str) -> None:
        """Every row of the user; the space of the deleted rows is reclaimed by autovacuum."""
        with self.transaction() as conn:
            for table in ("descriptors", "packets", "counters", "users"):
                conn.execute(f"DELETE FROM {table} WHERE user_id=%s", (user_id,))
            conn.execute("DELETE FROM meta WHERE key=%s", (embedding_key(user_id),))


def _row(cursor: psycopg.Cursor[tuple[Any, ...]]) -> tuple[Any, ...]:
    """The row of a query that always returns one (an aggregate, SHOW, a meta key written at creation)."""
    row = cursor.fetchone()
    if row is None:
        raise StoreError("the database returned no row where one always exists")
    return row


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
