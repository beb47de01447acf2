"""SQLite records store (the embedded default): packets, descriptors with their Cell, per-user counters and versions.
One file per store directory; the RecordsStore contract is in store/protocols.py."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..model import Descriptor, SourcePacket
from .layout import check_store_path
from .locks import FileLock, StripeLocks, UserLocks
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
# 1: no epochs, no created_at (stores of 2026-11 and before); 2: no (user_id, seq) indexes; 3: no digest chain.
# Migrated on open.
SCHEMA_VERSION = 4
FILE = "memcompile.sqlite3"
WRITER_STRIPES = 256  # cross-process writer lock files: users share them by a keyed hash (locks/writers-N.lock)

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL DEFAULT 0,
    epoch INTEGER NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS packets (
    user_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq INTEGER NOT NULL, dia_id TEXT NOT NULL,
    speaker TEXT NOT NULL, session INTEGER NOT NULL, session_label TEXT NOT NULL, session_time TEXT,
    session_time_raw TEXT NOT NULL, text TEXT NOT NULL, image_caption TEXT NOT NULL, image_query TEXT NOT NULL,
    content_hash TEXT NOT NULL, created_at REAL NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, packet_id), UNIQUE (user_id, dia_id));
CREATE TABLE IF NOT EXISTS descriptors (
    user_id TEXT NOT NULL, descriptor_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq INTEGER NOT NULL,
    claim TEXT NOT NULL, dia_id TEXT NOT NULL, speaker TEXT NOT NULL, session INTEGER NOT NULL, session_time TEXT,
    people TEXT NOT NULL, keywords TEXT NOT NULL, event_time TEXT NOT NULL, interaction_time TEXT NOT NULL,
    n_tokens INTEGER NOT NULL, negated INTEGER NOT NULL, cell_id TEXT NOT NULL,
    PRIMARY KEY (user_id, descriptor_id));
CREATE INDEX IF NOT EXISTS descriptors_packet ON descriptors (user_id, packet_id);
CREATE INDEX IF NOT EXISTS packets_seq ON packets (user_id, seq);
CREATE INDEX IF NOT EXISTS descriptors_seq ON descriptors (user_id, seq);
CREATE TABLE IF NOT EXISTS counters (user_id TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
    PRIMARY KEY (user_id, name));
"""

# A row changed by hand (or by anything but this code) gives its user a new epoch, negative and random so it never
# equals one drawn from the generation: no cached index or snapshot file of before the change is extended. This
# code's own writes do not fire them (inserted rows carry their digest; only digests are updated), or fire them
# right before giving a new epoch anyway (delete_packets, forget).
_NEW_EPOCH = "UPDATE users SET epoch = -1 - abs(random() / 2) WHERE user_id IN ({who})"
TRIGGERS = [
    *(
        f"CREATE TRIGGER IF NOT EXISTS {t}_edited AFTER UPDATE OF {cols} ON {t} "
        f"BEGIN {_NEW_EPOCH.format(who='OLD.user_id, NEW.user_id')}; END"
        for t, cols in EDITABLE.items()
    ),
    *(
        f"CREATE TRIGGER IF NOT EXISTS {t}_deleted AFTER DELETE ON {t} BEGIN {_NEW_EPOCH.format(who='OLD.user_id')}; END"
        for t in EDITABLE
    ),
    "CREATE TRIGGER IF NOT EXISTS packets_inserted AFTER INSERT ON packets WHEN NEW.digest = '' "
    f"BEGIN {_NEW_EPOCH.format(who='NEW.user_id')}; END",
]


class SqliteRecords:
    """RecordsStore over one SQLite file (or memory when path is None)."""

    def __init__(self, path: str | Path | None, create: bool = True):
        self.dir = Path(path) if path is not None else None
        target = ":memory:"
        if self.dir is not None:
            target = str(self.dir / FILE)
            _check_layout(self.dir, create)
            (self.dir / "locks").mkdir(exist_ok=True)
        try:
            self.conn = sqlite3.connect(target, timeout=60, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {target}: {exc}") from None
        self._mutex = threading.RLock()
        self._writers = UserLocks()
        self._stripes = StripeLocks()  # the writer-lock stripe files this object holds
        self._lock_key: bytes | None = None  # keys the writer-lock stripes (from secret(), read at first use)
        setup = FileLock(self.dir / "locks" / "setup.lock").hold() if self.dir is not None else contextlib.nullcontext()
        # processes opening a new store at once: switching to WAL can fail with "locked" without waiting
        with self._mutex, setup:
            try:
                self.conn.execute("PRAGMA busy_timeout=60000")
                if self.dir is not None:
                    self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.conn.execute("PRAGMA secure_delete=ON")  # forgotten text is overwritten, not left in free pages
                self._migrate()
                self._bind_home()
            except sqlite3.DatabaseError as exc:
                self.conn.close()
                raise StoreError(f"{target} is not a readable MemCompile records file ({exc})") from None

    def _migrate(self) -> None:
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        found = None
        if "meta" in tables:
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            found = int(row[0]) if row else 1
        elif "packets" in tables:
            found = 1
        if found is not None and found > SCHEMA_VERSION:
            raise StoreError(
                f"{self.dir / FILE if self.dir else 'the store'} has schema {found}; this memcompile reads up to "
                f"{SCHEMA_VERSION}: upgrade memcompile-langgraph"
            )
        if found == SCHEMA_VERSION:
            return
        with self.transaction() as tx:
            if found == 1:  # before CREATE ... IF NOT EXISTS, which leaves the old tables as they are
                tx.execute("ALTER TABLE users ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0")
                tx.execute("ALTER TABLE packets ADD COLUMN created_at REAL NOT NULL DEFAULT 0")
                tx.execute("UPDATE users SET epoch = version")
            for table in ("users", "packets") if found is not None else ():
                if "digest" not in {r[1] for r in tx.execute(f"PRAGMA table_info({table})")}:
                    tx.execute(f"ALTER TABLE {table} ADD COLUMN digest TEXT NOT NULL DEFAULT ''")
            for statement in [*SCHEMA.split(";"), *TRIGGERS]:  # executescript would commit the open transaction
                if statement.strip():
                    tx.execute(statement)
            top = tx.execute("SELECT COALESCE(MAX(version), 0) FROM users").fetchone()[0]
            tx.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', ?)", (str(top),))
            for (user,) in tx.execute("SELECT user_id FROM users").fetchall():  # once: stores without the chain
                rechain(tx, "?", user, -1)
            tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        if found is not None and found < 4 and self.dir is not None:
            # writer locks were one file per user named by a hash of the id (confirmable by guessing): now striped
            for old in (self.dir / "locks").glob("*.lock"):
                if len(old.stem) == 40 and all(c in "0123456789abcdef" for c in old.stem):
                    old.unlink(missing_ok=True)

    def _bind_home(self) -> None:
        """Binds the store id to the records file itself (device and inode): a copy of the store directory opened
        elsewhere gets a new store id here, before anything derived is named after it, so it never shares the
        original's Chroma collections or snapshot files."""
        if self.dir is None:
            return
        st = os.stat(self.dir / FILE)
        home = f"{st.st_dev}:{st.st_ino}"
        if self._one("SELECT value FROM meta WHERE key='home'", ()) == (home,):
            return  # the usual case: nothing written (a read-only open stays read-only)
        with self.transaction() as tx:
            row = tx.execute("SELECT value FROM meta WHERE key='home'").fetchone()
            if row is not None and row[0] != home:
                had = tx.execute("DELETE FROM meta WHERE key='store_id'").rowcount
                if had:
                    log.warning(
                        "%s is a copy of another store's records (its file moved or was copied): it gets a new "
                        "store id; its vectors on a Chroma server are rebuilt from the records",
                        self.dir / FILE,
                    )
            tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('home', ?)", (home,))

    def close(self) -> None:
        with self._mutex:
            self.conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._mutex:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def write_lock(self, user_id: str, blocking: bool = True) -> AbstractContextManager[bool]:
        """Serializes writers of one user across threads and processes (placement reads the Cells it extends).
        Yields whether it is held: with blocking=False it gives up at once when another writer has it."""
        if self.dir is None:
            return self._writers.hold(user_id, lambda _: contextlib.nullcontext(True), blocking)
        path = self.writer_lock_path(user_id)
        return self._writers.hold(user_id, lambda b: self._stripes.hold(path, blocking=b), blocking)

    def writer_lock_path(self, user_id: str) -> Path:
        """The file whose lock serializes the user's writers across processes: one of WRITER_STRIPES files."""
        if self.dir is None:
            raise ValueError("a records store in memory has no lock files")
        if self._lock_key is None:
            self._lock_key = self.secret().encode()
        return self.dir / "locks" / f"writers-{writer_stripe(self._lock_key, user_id)}.lock"

    def _one(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self._mutex:
            row: tuple[Any, ...] | None = self.conn.execute(sql, args).fetchone()
            return row

    def _all(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._mutex:
            return self.conn.execute(sql, args).fetchall()

    def store_id(self) -> str:
        """A random id fixed at creation (or at a re-key): names this store's derived state."""
        row = self._one("SELECT value FROM meta WHERE key='store_id'", ())
        if row is not None:
            stored: str = row[0]  # a read: writers check it at every unit of work
            return stored
        with self._mutex:
            self.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)", (uuid.uuid4().hex,))
            made: str = self.conn.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0]
            return made

    def secret(self) -> str:
        """A random secret fixed at creation, readable only by those who can read the records (signs snapshot files)."""
        with self._mutex:
            self.conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('secret', ?)", (uuid.uuid4().hex + uuid.uuid4().hex,)
            )
            secret: str = self.conn.execute("SELECT value FROM meta WHERE key='secret'").fetchone()[0]
            return secret

    def embedding(self, user_id: str) -> str | None:
        """Identity of the embedding model the user's stored vectors came from (None: not recorded yet)."""
        row = self._one("SELECT value FROM meta WHERE key=?", (embedding_key(user_id),))
        return row[0] if row else None

    def set_embedding(self, user_id: str, identity: str, bump: bool = False) -> int:
        """Records the model of the user's vectors; with bump, also a new user version and epoch (returned)."""
        with self.transaction() as tx:
            tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (embedding_key(user_id), identity))
            if bump:
                self._bump(tx, user_id, epoch=True)
        return self.version(user_id)

    @staticmethod
    def _bump(tx: sqlite3.Connection, user_id: str, epoch: bool) -> int:
        """A new version from the store-wide generation (never repeats, forget included); with epoch, the
        records changed other than by appending, so snapshots of older versions cannot be extended."""
        tx.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='generation'")
        gen = int(tx.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])
        if epoch:
            tx.execute("UPDATE users SET version = ?, epoch = ? WHERE user_id=?", (gen, gen, user_id))
        else:
            tx.execute("UPDATE users SET version = ? WHERE user_id=?", (gen, user_id))
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
        return [r[0] for r in self._all("SELECT user_id FROM users ORDER BY user_id", ())]

    def load(self, user_id: str, after: tuple[int, int] = (-1, -1)) -> LoadedRecords:
        """The user's records; with after=(packet seq, descriptor seq), only the rows beyond them."""
        with self._mutex:
            self.conn.execute("BEGIN")  # one snapshot: another process may commit between the reads
            try:
                version, _, digest = self.head(user_id)
                prows = self.conn.execute(
                    f"SELECT {PACKET_COLS} FROM packets WHERE user_id=? AND seq>? ORDER BY seq", (user_id, after[0])
                ).fetchall()
                drows = self.conn.execute(
                    f"SELECT {DESC_COLS} FROM descriptors WHERE user_id=? AND seq>? ORDER BY seq", (user_id, after[1])
                ).fetchall()
            finally:
                self.conn.execute("COMMIT")
        return LoadedRecords(version, [SourcePacket(*r) for r in prows], descriptors_from_rows(drows), digest)

    def turns(
        self, user_id: str, dia_ids: list[str] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[StoredTurn]:
        sql = f"SELECT {PACKET_COLS}, created_at FROM packets WHERE user_id=?"
        args: list[Any] = [user_id]
        if dia_ids is not None:
            sql += f" AND dia_id IN ({','.join('?' * len(dia_ids))})"
            args += dia_ids
        sql += " ORDER BY seq LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
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
        with self.transaction() as tx:
            if tx.execute("SELECT 1 FROM users WHERE user_id=?", (user_id,)).fetchone() is None:
                tx.execute("INSERT INTO users (user_id, version, epoch) VALUES (?, 0, 0)", (user_id,))
                self._bump(tx, user_id, epoch=True)  # a user made again after forget starts a new epoch
            prev = tx.execute("SELECT digest FROM users WHERE user_id=?", (user_id,)).fetchone()[0]
            prows, drows, digests = chained_rows(prev, user_id, packets, placed, now)
            tx.executemany(
                f"INSERT INTO packets ({PACKET_COLS}, created_at, digest) VALUES ({','.join('?' * 15)})", prows
            )
            tx.executemany(f"INSERT INTO descriptors (user_id, {DESC_COLS}) VALUES ({','.join('?' * 16)})", drows)
            if digests:
                tx.execute("UPDATE users SET digest=? WHERE user_id=?", (digests[-1], user_id))
            self._count(tx, user_id, counts or {})
            return self._bump(tx, user_id, epoch=False)

    @staticmethod
    def _count(tx: sqlite3.Connection, user_id: str, counts: dict[str, int]) -> None:
        tx.executemany(
            "INSERT INTO counters (user_id, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT(user_id, name) DO UPDATE SET value = value + excluded.value",
            [(user_id, k, int(v)) for k, v in counts.items() if v],
        )

    def add_counts(self, user_id: str, counts: dict[str, int]) -> None:
        if any(counts.values()):
            with self.transaction() as tx:
                self._count(tx, user_id, counts)

    def counters(self, user_id: str) -> dict[str, int]:
        return dict(self._all("SELECT name, value FROM counters WHERE user_id=? ORDER BY name", (user_id,)))

    def counts(self, user_id: str) -> dict[str, int]:
        with self._mutex:
            packets = self.conn.execute("SELECT COUNT(*) FROM packets WHERE user_id=?", (user_id,)).fetchone()[0]
            descs, cells = self.conn.execute(
                "SELECT COUNT(*), COUNT(DISTINCT cell_id) FROM descriptors WHERE user_id=?", (user_id,)
            ).fetchone()
            sessions = self.conn.execute(
                "SELECT COUNT(DISTINCT session) FROM packets WHERE user_id=?", (user_id,)
            ).fetchone()[0]
        return {"packets": packets, "descriptors": descs, "cells": cells, "sessions": sessions}

    def delete_packets(self, user_id: str, packet_ids: list[str]) -> int:
        with self.transaction() as tx:
            first = None
            for pid in packet_ids:
                row = tx.execute("SELECT seq FROM packets WHERE user_id=? AND packet_id=?", (user_id, pid)).fetchone()
                first = row[0] if row and (first is None or row[0] < first) else first
                tx.execute("DELETE FROM descriptors WHERE user_id=? AND packet_id=?", (user_id, pid))
                tx.execute("DELETE FROM packets WHERE user_id=? AND packet_id=?", (user_id, pid))
            if first is not None:
                rechain(tx, "?", user_id, first)
            version = self._bump(tx, user_id, epoch=True)
        self.purge_log()
        return version

    def forget(self, user_id: str) -> None:
        with self.transaction() as tx:
            for table in ("descriptors", "packets", "counters", "users"):
                tx.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
            tx.execute("DELETE FROM meta WHERE key=?", (embedding_key(user_id),))
        self.purge_log()

    def purge_log(self) -> None:
        """Copy the WAL into the database and truncate it, so deleted rows leave no old page images behind."""
        if self.dir is not None:
            with self._mutex:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def writer_stripe(key: bytes, user_id: str) -> int:
    """Which writer-lock stripe a user takes: keyed by the store's secret, so a lock file neither names a user nor
    lets anyone confirm a guessed id, and the files do not grow with the users (nothing to remove at forget)."""
    mac = hmac.new(key, user_id.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
    return int.from_bytes(mac[:4], "big") % WRITER_STRIPES


def _check_layout(root: Path, create: bool) -> None:
    """One-line errors for a records file emptied or removed beside existing vectors (opening it as a new store would
    lose them) and for a missing store on a read; the kinds of the store's paths are checked by store/layout.py."""
    check_store_path(root)
    records = root / FILE
    missing = not records.exists() or records.stat().st_size == 0
    if missing and (root / "chroma").exists():
        state = "is empty" if records.exists() else "is missing"
        raise StoreError(
            f"{records} {state} but {root / 'chroma'} holds vectors: restore the records file (or move the "
            "chroma folder away to start a new store)"
        )
    if missing and not create:
        raise StoreError(f"no store at {root}")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store directory {root}: {exc.strerror}") from None
