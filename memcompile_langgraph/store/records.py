"""SQLite record store: packets, descriptors with their Cell, per-user counters. One file per store directory."""
from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Iterator

from ..records import Descriptor, SourcePacket

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS packets (
    user_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq INTEGER NOT NULL, dia_id TEXT NOT NULL,
    speaker TEXT NOT NULL, session INTEGER NOT NULL, session_label TEXT NOT NULL, session_time TEXT,
    session_time_raw TEXT NOT NULL, text TEXT NOT NULL, image_caption TEXT NOT NULL, image_query TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    PRIMARY KEY (user_id, packet_id), UNIQUE (user_id, dia_id));
CREATE TABLE IF NOT EXISTS descriptors (
    user_id TEXT NOT NULL, descriptor_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq INTEGER NOT NULL,
    claim TEXT NOT NULL, dia_id TEXT NOT NULL, speaker TEXT NOT NULL, session INTEGER NOT NULL, session_time TEXT,
    people TEXT NOT NULL, keywords TEXT NOT NULL, event_time TEXT NOT NULL, interaction_time TEXT NOT NULL,
    n_tokens INTEGER NOT NULL, negated INTEGER NOT NULL, cell_id TEXT NOT NULL,
    PRIMARY KEY (user_id, descriptor_id));
CREATE INDEX IF NOT EXISTS descriptors_packet ON descriptors (user_id, packet_id);
CREATE TABLE IF NOT EXISTS counters (user_id TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
    PRIMARY KEY (user_id, name));
"""

_PACKET_COLS = "packet_id, user_id, dia_id, speaker, session, session_label, session_time, session_time_raw, text, seq, image_caption, image_query, content_hash"
_DESC_COLS = "descriptor_id, packet_id, claim, dia_id, speaker, session, session_time, people, keywords, event_time, interaction_time, n_tokens, seq, negated, cell_id"


def user_key(user_id: str) -> str:
    """A name derived from the user id that is safe in any file or collection name."""
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


REEMBEDDING = "(re-embedding)"  # recorded while a writer replaces the vectors: equal to no model's identity


def _embedding_key(user_id: str) -> str:
    return f"embedding:{user_key(user_id)}"


class RecordStore:
    def __init__(self, path: str | Path | None):
        self.dir = Path(path) if path is not None else None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / "locks").mkdir(exist_ok=True)
        target = str(self.dir / "memcompile.sqlite3") if self.dir is not None else ":memory:"
        self.conn = sqlite3.connect(target, timeout=60, check_same_thread=False, isolation_level=None)
        self._mutex = threading.RLock()
        self._user_locks: dict[str, threading.RLock] = {}
        self._lock_depth: dict[str, int] = {}  # per user, touched only by the thread holding its RLock
        with self._mutex, self._setup_lock():
            self.conn.execute("PRAGMA busy_timeout=60000")
            if self.dir is not None:
                self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA secure_delete=ON")  # forgotten text is overwritten, not left in free pages
            self.conn.executescript(SCHEMA)

    @contextlib.contextmanager
    def _setup_lock(self) -> Iterator[None]:
        """Processes opening a new store at once: switching to WAL can fail with "locked" without waiting."""
        if self.dir is None:
            yield
            return
        import fcntl

        with open(self.dir / "locks" / "setup.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

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

    @contextlib.contextmanager
    def write_lock(self, user_id: str, blocking: bool = True) -> Iterator[bool]:
        """Serializes writers of one user across threads and processes (placement reads the Cells it extends).

        Re-entrant within a thread (an ingest holding it loads the index, whose reconcile takes it again).
        Yields whether it is held: with blocking=False it gives up at once when another writer has it."""
        lock = self._user_locks.setdefault(user_id, threading.RLock())
        if not lock.acquire(blocking=blocking):
            yield False
            return
        depth = self._lock_depth.get(user_id, 0)
        self._lock_depth[user_id] = depth + 1
        try:
            if self.dir is None or depth:
                yield True
                return
            import fcntl

            with open(self.dir / "locks" / f"{user_key(user_id)}.lock", "a+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held = False
                else:
                    held = True
                try:
                    yield held
                finally:
                    if held:
                        fcntl.flock(fh, fcntl.LOCK_UN)
        finally:
            self._lock_depth[user_id] = depth
            lock.release()

    def _one(self, sql: str, args: tuple) -> tuple | None:
        with self._mutex:
            return self.conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: tuple) -> list[tuple]:
        with self._mutex:
            return self.conn.execute(sql, args).fetchall()

    def store_id(self) -> str:
        """A random id fixed at creation: names this store's collections on a shared Chroma server."""
        with self._mutex:
            self.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)", (uuid.uuid4().hex,))
            return self.conn.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0]

    def embedding(self, user_id: str) -> str | None:
        """Identity of the embedding model the user's stored vectors came from (None: not recorded yet)."""
        row = self._one("SELECT value FROM meta WHERE key=?", (_embedding_key(user_id),))
        return row[0] if row else None

    def set_embedding(self, user_id: str, identity: str, bump: bool = False) -> int:
        """Records the model of the user's vectors; with bump, also a new user version (returned)."""
        with self.transaction() as tx:
            tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_embedding_key(user_id), identity))
            if bump:
                tx.execute("UPDATE users SET version = version + 1 WHERE user_id=?", (user_id,))
        return self.version(user_id)

    def version(self, user_id: str) -> int:
        row = self._one("SELECT version FROM users WHERE user_id=?", (user_id,))
        return row[0] if row else 0

    def users(self) -> list[str]:
        return [r[0] for r in self._all("SELECT user_id FROM users ORDER BY user_id", ())]

    def load(self, user_id: str) -> tuple[int, list[SourcePacket], list[tuple[Descriptor, str]]]:
        with self._mutex:
            self.conn.execute("BEGIN")  # one snapshot: another process may commit between the three reads
            try:
                version = self.version(user_id)
                prows = self.conn.execute(f"SELECT {_PACKET_COLS} FROM packets WHERE user_id=? ORDER BY seq", (user_id,)).fetchall()
                drows = self.conn.execute(f"SELECT {_DESC_COLS} FROM descriptors WHERE user_id=? ORDER BY seq", (user_id,)).fetchall()
            finally:
                self.conn.execute("COMMIT")
        packets = [SourcePacket(*r) for r in prows]
        descs = []
        # one JSON parse per column instead of two per row (a 100k-turn store has ~200k rows)
        people = json.loads("[" + ",".join(r[7] for r in drows) + "]")
        keywords = json.loads("[" + ",".join(r[8] for r in drows) + "]")
        for r, per, key in zip(drows, people, keywords):
            d = Descriptor(
                descriptor_id=r[0], packet_id=r[1], claim=r[2], dia_id=r[3], speaker=r[4], session=r[5], session_time=r[6],
                people=tuple(per), keywords=tuple(key), event_time=r[9], interaction_time=r[10],
                n_tokens=r[11], seq=r[12], negated=bool(r[13]),
            )
            descs.append((d, r[14]))
        return version, packets, descs

    def commit(self, user_id: str, packets: list[SourcePacket], placed: list[tuple[Descriptor, str]], counts: dict[str, int] | None = None) -> int:
        """Packets, their descriptors and the Cell memberships in one transaction; returns the new version."""
        with self.transaction() as tx:
            tx.execute("INSERT OR IGNORE INTO users (user_id, version) VALUES (?, 0)", (user_id,))
            tx.executemany(
                f"INSERT INTO packets ({_PACKET_COLS}) VALUES ({','.join('?' * 13)})",
                [
                    (p.packet_id, p.user_id, p.dia_id, p.speaker, p.session, p.session_label, p.session_time, p.session_time_raw,
                     p.text, p.seq, p.image_caption, p.image_query, p.content_hash)
                    for p in packets
                ],
            )
            tx.executemany(
                f"INSERT INTO descriptors (user_id, {_DESC_COLS}) VALUES ({','.join('?' * 16)})",
                [
                    (user_id, d.descriptor_id, d.packet_id, d.claim, d.dia_id, d.speaker, d.session, d.session_time,
                     json.dumps(d.people), json.dumps(d.keywords), d.event_time, d.interaction_time, d.n_tokens, d.seq,
                     int(d.negated), cell)
                    for d, cell in placed
                ],
            )
            self._count(tx, user_id, counts or {})
            tx.execute("UPDATE users SET version = version + 1 WHERE user_id=?", (user_id,))
            return tx.execute("SELECT version FROM users WHERE user_id=?", (user_id,)).fetchone()[0]

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
            sessions = self.conn.execute("SELECT COUNT(DISTINCT session) FROM packets WHERE user_id=?", (user_id,)).fetchone()[0]
        return {"packets": packets, "descriptors": descs, "cells": cells, "sessions": sessions}

    def delete_packets(self, user_id: str, packet_ids: list[str]) -> None:
        with self.transaction() as tx:
            for pid in packet_ids:
                tx.execute("DELETE FROM descriptors WHERE user_id=? AND packet_id=?", (user_id, pid))
                tx.execute("DELETE FROM packets WHERE user_id=? AND packet_id=?", (user_id, pid))
            tx.execute("UPDATE users SET version = version + 1 WHERE user_id=?", (user_id,))
        self.purge_log()

    def forget(self, user_id: str) -> None:
        with self.transaction() as tx:
            for table in ("descriptors", "packets", "counters", "users"):
                tx.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
            tx.execute("DELETE FROM meta WHERE key=?", (_embedding_key(user_id),))
        self.purge_log()

    def purge_log(self) -> None:
        """Copy the WAL into the database and truncate it, so deleted rows leave no old page images behind."""
        if self.dir is not None:
            with self._mutex:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
