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
import math
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg_pool

from .locks import UserLocks
from .protocols import StoreError
from .rows import EDITABLE
from .sql import SCHEMA_VERSION, SqlRecords, Tx
from .timeouts import env_seconds

DEFAULT_SCHEMA = "memcompile"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
TIMEOUT_ENV = "MEMCOMPILE_PG_TIMEOUT"
DEFAULT_TIMEOUT = 30.0  # seconds one statement (or a connection's start) may wait for the server's answer
SETUP_POLL = 0.1  # seconds between the questions of a process waiting for another one to set the store up


def server_timeout() -> float:
    """Seconds a PostgreSQL statement may wait for its answer: $MEMCOMPILE_PG_TIMEOUT, else 30."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT, "a PostgreSQL statement may wait", StoreError)


class _Watchdog:
    """Ends the connection of a statement the server has not answered by its deadline. libpq waits for an answer
    forever (a server that is stopped, or beyond a link that drops packets, still has its TCP peer acknowledge), and
    neither keepalives nor a server-side statement_timeout reach a server that does not run: closing the socket from
    here is what wakes the waiting thread. One thread for the process, started on first use."""

    def __init__(self) -> None:
        self._due: dict[int, tuple[float, psycopg.Connection[Any]]] = {}
        self._ended: set[int] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def bounded(self, conn: psycopg.Connection[Any], seconds: float, where: str) -> Iterator[None]:
        key = id(conn)
        with self._wake:
            self._due[key] = (time.monotonic() + seconds, conn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="memcompile-pg-deadline", daemon=True)
                self._thread.start()
            self._wake.notify()
        try:
            yield
        except psycopg.Error:
            with self._wake:
                ended = key in self._ended
            if ended:
                raise StoreError(f"PostgreSQL at {where}: no answer within {seconds:g} s ({TIMEOUT_ENV})") from None
            raise
        finally:
            with self._wake:
                self._due.pop(key, None)
                self._ended.discard(key)

    def _watch(self) -> None:
        with self._wake:
            while True:
                now = time.monotonic()
                for key, (due, conn) in list(self._due.items()):
                    if due <= now:
                        del self._due[key]
                        self._ended.add(key)
                        _end(conn)
                soonest = min((due for due, _ in self._due.values()), default=None)
                self._wake.wait(None if soonest is None else soonest - now)


def _end(conn: psycopg.Connection[Any]) -> None:
    """Shuts the connection's socket down (through a copy of its descriptor): the thread waiting on it reads the end
    at once, and the pool replaces the connection."""
    with contextlib.suppress(OSError, psycopg.Error):
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


_WATCHDOG = _Watchdog()


class _BoundedTx(Tx):
    """A transaction on the PostgreSQL server whose every statement waits at most `seconds` for the answer."""

    __slots__ = ("seconds", "where")

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]], seconds: float, where: str) -> None:
        super().__init__(conn, "pyformat")
        self.seconds, self.where = seconds, where

    def bounded(self) -> AbstractContextManager[None]:
        assert isinstance(self.conn, psycopg.Connection)
        return _WATCHDOG.bounded(self.conn, self.seconds, self.where)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self.bounded():
            return super().execute(sql, args)

    def many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        with self.bounded():
            super().many(sql, rows)


def _triggers(schema: str) -> list[str]:
    """As the SQLite store's TRIGGERS (store/sqlite.py); inserts and deletes per statement (a forget deletes every
    row of a user in one), edits per row (a column list rules out transition tables). The functions name the schema
    of the table that fired them, not the one they were made in: a store whose schema is renamed keeps working."""
    epoch = "UPDATE %I.users SET epoch = -1 - floor(random() * 4e18)::bigint WHERE user_id IN"
    out = [
        f"""CREATE OR REPLACE FUNCTION {schema}.rows_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            EXECUTE format('{epoch} (SELECT user_id FROM changed)', TG_TABLE_SCHEMA);
            RETURN NULL;
        END $$""",
        f"""CREATE OR REPLACE FUNCTION {schema}.row_edited() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            EXECUTE format('{epoch} ($1, $2)', TG_TABLE_SCHEMA) USING OLD.user_id, NEW.user_id;
            RETURN NULL;
        END $$""",
    ]
    for table, cols in EDITABLE.items():
        for event, rows in (("DELETE", "OLD"), ("INSERT", "NEW")):
            name = f"{table}_{event.lower()}d"
            out += [
                f"DROP TRIGGER IF EXISTS {name} ON {schema}.{table}",
                f"CREATE TRIGGER {name} AFTER {event} ON {schema}.{table} REFERENCING {rows} TABLE AS changed "
                f"FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_changed()",
            ]
        out += [
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


class PostgresRecords(SqlRecords):
    """RecordsStore in one schema of a PostgreSQL database."""

    INTEGER, REAL, ROW_LOCK = "BIGINT", "DOUBLE PRECISION", " FOR UPDATE"
    BYTE_ORDER = ' COLLATE "C"'  # as SQLite sorts: the database's collation may be a locale's
    NO_LIMIT = None

    def __init__(self, url: str, create: bool = True, pool_size: int = 4):
        self.conninfo, self.schema = split_url(url)
        self._address = describe(url)
        self.where = f"{self._address} (schema {self.schema})"
        self._writers = UserLocks()
        self._reembeds = UserLocks()
        self._held: dict[str, tuple[int, int]] = {}  # user -> (epoch, lock session pid) of the writer lock held here
        self._closed = threading.Event()
        self.timeout = server_timeout()
        connect_timeout = max(2, math.ceil(self.timeout))  # libpq's: whole seconds, at least 2
        try:
            with psycopg.connect(self.conninfo, connect_timeout=connect_timeout) as conn:
                self._migrate(conn, create)
                self._bind_home(conn)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL at {self.where}: {_first_line(exc)}") from None
        self.pool = psycopg_pool.ConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs={"connect_timeout": connect_timeout},
            timeout=self.timeout,  # a caller waits for a connection at most as long as for an answer
            configure=self._configure,
            check=self._check,
            name=f"memcompile-{self.schema}",
            open=True,
        )

    def _configure(self, conn: psycopg.Connection) -> None:
        with _WATCHDOG.bounded(conn, self.timeout, self.where):
            conn.execute(f"SET search_path TO {self.schema}")  # the name was checked by split_url
            conn.commit()

    def _check(self, conn: psycopg.Connection) -> None:
        """The pool's check of a connection before handing it out, as bounded as any statement."""
        with _WATCHDOG.bounded(conn, self.timeout, self.where):
            psycopg_pool.ConnectionPool.check_connection(conn)

    @contextlib.contextmanager
    def _setting_up(self, conn: psycopg.Connection) -> Iterator[_BoundedTx]:
        """A transaction of the connection that sets the store up, its statements, commit and rollback as bounded as
        any other (a server frozen while a memory opens would hold the open forever): one process at a time, in the
        store's schema."""
        tx = _BoundedTx(conn, self.timeout, self.where)
        try:
            # processes opening a new store at once: one creates it, the others wait and find it made. They ask again
            # and again, each question bounded: a long setup elsewhere is waited for, a frozen server is not
            while not tx.row("SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0))", (f"{self.schema}/setup",))[0]:
                time.sleep(SETUP_POLL)
            tx.run(f"SET LOCAL search_path TO {self.schema}")
            yield tx
        except BaseException:
            if not conn.closed:  # the deadline closed it, or the server is there to roll back
                with contextlib.suppress(psycopg.Error, StoreError), tx.bounded():
                    conn.rollback()
            raise
        with tx.bounded():
            conn.commit()

    def _migrate(self, conn: psycopg.Connection, create: bool) -> None:
        with self._setting_up(conn) as tx:
            enc = tx.row("SHOW server_encoding")[0]
            if enc.upper() not in ("UTF8", "UTF-8"):
                raise StoreError(f"PostgreSQL at {self.where} stores text as {enc}; MemCompile needs a UTF8 database")
            tables = {
                r[0]
                for r in tx.all("SELECT table_name FROM information_schema.tables WHERE table_schema=?", (self.schema,))
            }
            found = self._found_schema(tx, tables)
            if found == SCHEMA_VERSION:
                return
            if found is None and not create:
                raise StoreError(f"no store at {self.where}")
            tx.run(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            self._upgrade(tx, found)

    def _bind_home(self, conn: psycopg.Connection) -> None:
        """The store id is bound to where the records live (cluster, database, schema): a clone (CREATE DATABASE ...
        TEMPLATE, a dump restored into another database or schema) gets a new one (SqlRecords._rehome)."""
        with self._setting_up(conn) as tx:
            try:
                # a savepoint, its own statements bounded with it: the control data may be closed to this role
                with tx.bounded(), conn.transaction():
                    cluster = Tx(conn, "pyformat").row("SELECT system_identifier FROM pg_control_system()")[0]
            except psycopg.errors.InsufficientPrivilege:
                cluster = "?"
            db = tx.row("SELECT oid FROM pg_database WHERE datname = current_database()")[0]
            self._home = f"{cluster}:{db}:{self.schema}"
            self._rehome(tx, self._home, "a clone or a restore elsewhere")

    def _place(self) -> str:
        return self._home

    def address(self) -> str:
        return self._address

    def holds(self, store_id: str, home: str, place: str | None = None) -> bool | None:
        cluster, db, schema = home.split(":", 2)
        here_cluster, here_db, _ = self._home.split(":", 2)
        if cluster != here_cluster or cluster == "?":
            return None  # another server's records are not ours to look at
        with self._read() as tx:
            if db != here_db:  # another database of this server: only whether it still exists is ours to know
                return None if tx.one("SELECT 1 FROM pg_database WHERE oid = ?", (int(db),)) else False
            if not _SCHEMA_NAME.fullmatch(schema) or not tx.one(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = 'meta'", (schema,)
            ):
                return False
            row = tx.one(f"SELECT value FROM {schema}.meta WHERE key='store_id'")
        return row is not None and row[0] == store_id

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self.pool.close()

    @contextlib.contextmanager
    def transaction(self, repeatable: bool = False) -> Iterator[Tx]:
        """One transaction on a pooled connection: committed on success, rolled back on any exception."""
        try:
            with self.pool.connection() as conn:
                tx = _BoundedTx(conn, self.timeout, self.where)
                if repeatable:  # one consistent view for several reads: another worker may commit between them
                    tx.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield tx
                with tx.bounded():
                    conn.commit()  # here, not at the pool's exit: the commit waits for the server as any statement
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"PostgreSQL at {self.where}: {_first_line(exc)}") from None

    def _read(self, consistent: bool = False) -> AbstractContextManager[Tx]:
        return self.transaction(repeatable=consistent)

    def _next_version(self, tx: Tx, user_id: str) -> int:
        """From the store's sequence; the user's row is locked first, so one user's versions only grow."""
        tx.run("SELECT 1 FROM users WHERE user_id=? FOR UPDATE", (user_id,))
        gen: int = tx.row("SELECT nextval('generation')")[0]
        return gen

    def _start_generation(self, tx: Tx, top: int) -> None:
        tx.run(f"CREATE SEQUENCE IF NOT EXISTS generation START WITH {top + 1}")

    def _member(self, column: str, values: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
        return f"{column} = ANY(?)", (list(values),)

    def _columns(self, tx: Tx, table: str) -> set[str]:
        return {
            r[0]
            for r in tx.all(
                "SELECT column_name FROM information_schema.columns WHERE table_schema=? AND table_name=?",
                (self.schema, table),
            )
        }

    def _triggers(self) -> list[str]:
        return _triggers(self.schema)

    def _scrub(self) -> None:
        """Nothing: autovacuum reclaims the space of deleted rows."""

    def _fence(self, tx: Tx, user_id: str) -> None:
        """The writer lock is a session's: the session can end (a server restart, a failover, idle_session_timeout,
        pg_terminate_backend) while its writer goes on. So each write transaction of a user whose lock this process
        took proves, in the transaction, that the lock's session still holds it and that no one took it since (the
        epoch row stays locked to the commit, so a new taker's epoch waits for it); else nothing of it is written."""
        held = self._held.get(user_id)
        if held is None:
            return
        epoch, pid = held
        row = tx.one("SELECT epoch FROM writer_epochs WHERE user_id=? FOR UPDATE", (user_id,))
        holds = tx.row(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = ? "
            "AND objsubid = 1 AND classid::text::bigint = (k >> 32) & 4294967295 "
            "AND objid::text::bigint = k & 4294967295) FROM (SELECT hashtextextended(?, 0) AS k) AS lock",
            (pid, f"{self.schema}/{user_id}"),
        )[0]
        if row is None or row[0] != epoch or not holds:
            raise WriterLockLost(
                f"the writer lock of user {user_id!r} on PostgreSQL at {self.where} was lost (its session ended) "
                "before this write: nothing of it was stored; run the write again"
            )

    def write_lock(self, user_id: str, blocking: bool = True) -> AbstractContextManager[bool]:
        """Serializes writers of one user across threads, processes and machines. Yields whether it is held:
        with blocking=False it gives up at once when another writer has it."""
        return self._writers.hold(user_id, lambda b: self._advisory(user_id, b), blocking)

    def reembed_lock(self, user_id: str, blocking: bool = True) -> AbstractContextManager[bool]:
        """Held by the one job that makes the user's vectors again (runtime/upgrade.py), across processes and
        machines: an advisory lock of its own, with no writer epoch (the job's writes take the writer lock)."""
        return self._reembeds.hold(user_id, lambda b: self._advisory(user_id, b, "reembed"), blocking)

    @contextlib.contextmanager
    def _advisory(self, user_id: str, blocking: bool, kind: str = "") -> Iterator[bool]:
        # a schema name has no '/': two stores' users never share a lock, nor a user's writers and re-embed job
        key = f"{self.schema}/{kind + '/' if kind else ''}{user_id}"
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=max(2, math.ceil(self.timeout)))
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL at {self.where}: {_first_line(exc)}") from None
        with conn:  # closing the connection releases the lock whatever happens below
            tx = _BoundedTx(conn, self.timeout, self.where)
            if blocking:  # waits for another writer as long as it writes: no deadline on this one
                conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
            elif not tx.row("SELECT pg_try_advisory_lock(hashtextextended(?, 0))", (key,))[0]:
                yield False
                return
            try:
                if not kind:  # this taking's epoch, and the session that holds the lock: every write checks both
                    self._held[user_id] = tx.row(
                        f"INSERT INTO {self.schema}.writer_epochs (user_id, epoch) VALUES (?, 1) ON CONFLICT "
                        "(user_id) DO UPDATE SET epoch = writer_epochs.epoch + 1 RETURNING epoch, pg_backend_pid()",
                        (user_id,),
                    )
                yield True
            finally:
                if not kind:
                    self._held.pop(user_id, None)
                # released now, not when the server gets round to ending the session after the close: the next
                # writer, even a non-blocking one, must find it free
                with contextlib.suppress(psycopg.Error, StoreError):
                    tx.run("SELECT pg_advisory_unlock(hashtextextended(?, 0))", (key,))


class WriterLockLost(StoreError):
    """A writer's lock ended (its PostgreSQL session did) before one of its writes: that write was not stored."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
