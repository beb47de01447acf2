"""SQLite records store (the embedded default): packets, descriptors with their Cell, per-user counters and versions.
One file per store directory; the queries are store/sql.py's, the RecordsStore contract is in store/protocols.py."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .layout import check_store_path, private_file, private_folder, tighten
from .locks import FileLock, StripeLocks, UserLocks
from .protocols import StoreError
from .rows import EDITABLE
from .sql import SCHEMA_VERSION, SqlRecords, Tx
from .wal import BUSY_MS, LogScrub

FILE = "memcompile.sqlite3"
WRITER_STRIPES = 256  # cross-process writer lock files: users share them by a keyed hash (locks/writers-N.lock)

# A row inserted, changed or deleted by hand (or by anything but this code) gives its user a new epoch, negative and
# random so it never equals one drawn from the generation: no cached index or snapshot file of before the change is
# extended. Rows restored from a backup carry their digests, so every insert fires: this code's own commit puts the
# epoch it read back in the same transaction (SqlRecords.commit); its other writes only update digests, or fire them
# right before giving a new epoch anyway (delete_packets, forget).
_NEW_EPOCH = "UPDATE users SET epoch = -1 - abs(random() / 2) WHERE user_id IN ({who})"
TRIGGERS = [
    "DROP TRIGGER IF EXISTS packets_inserted",  # schema 4's fired only for rows without a digest
    *(
        f"CREATE TRIGGER IF NOT EXISTS {t}_edited AFTER UPDATE OF {cols} ON {t} "
        f"BEGIN {_NEW_EPOCH.format(who='OLD.user_id, NEW.user_id')}; END"
        for t, cols in EDITABLE.items()
    ),
    *(
        f"CREATE TRIGGER IF NOT EXISTS {t}_{event.lower()}d AFTER {event} ON {t} "
        f"BEGIN {_NEW_EPOCH.format(who=f'{row}.user_id')}; END"
        for t in EDITABLE
        for event, row in (("DELETE", "OLD"), ("INSERT", "NEW"))
    ),
]


class SqliteRecords(SqlRecords):
    """RecordsStore over one SQLite file (or memory when path is None)."""

    INTEGER, REAL, BYTE_ORDER, ROW_LOCK = "INTEGER", "REAL", "", ""  # BEGIN IMMEDIATE locks the whole file
    NO_LIMIT = -1

    def __init__(self, path: str | Path | None, create: bool = True):
        self.dir = Path(path) if path is not None else None
        target = ":memory:"
        if self.dir is not None:
            target = str(self.dir / FILE)
            _check_layout(self.dir, create)
            private_folder(self.dir / "locks")
            private_file(self.dir / FILE)
        self.where = target if self.dir is not None else "the store"
        try:
            self.conn, self.read_only = _connect(target)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {target}: {exc}") from None
        self._mutex = threading.RLock()
        self._log = LogScrub(self.conn, self.where)
        self._writers = UserLocks()
        self._reembeds = UserLocks()
        self._stripes = StripeLocks()  # the writer-lock and re-embed-lock stripe files this object holds
        self._lock_key: bytes | None = None  # keys the writer-lock stripes (from secret(), read at first use)
        setup = FileLock(self.dir / "locks" / "setup.lock").hold() if self.dir is not None else contextlib.nullcontext()
        # processes opening a new store at once: switching to WAL can fail with "locked" without waiting
        with self._mutex, setup:
            try:
                self.conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
                if self.dir is not None and not self.read_only:
                    self.conn.execute("PRAGMA journal_mode=WAL")
                    for kept in ("-wal", "-shm"):  # made with the database's mode; an earlier release's: tightened
                        tighten(f"{target}{kept}")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.conn.execute("PRAGMA secure_delete=ON")  # forgotten text is overwritten, not left in free pages
                self._migrate()
                if not self.read_only:  # a read-only copy keeps the store id it was copied with: it writes nothing
                    self._bind_home()
                    self.store_id()  # both made by a writer at open, so that readers only ever read them
                    self.secret()
            except sqlite3.DatabaseError as exc:
                self.conn.close()
                raise StoreError(f"{target} is not a readable MemCompile records file ({exc})") from None

    def _migrate(self) -> None:
        with self._read() as tx:
            found = self._found_schema(tx, {r[0] for r in tx.all("SELECT name FROM sqlite_master WHERE type='table'")})
        if found == SCHEMA_VERSION:
            return
        if self.read_only:
            raise StoreError(f"{self.where} is read-only and of an older schema: open it once where it can be written")
        with self.transaction() as tx:  # executescript would commit the open transaction: statement by statement
            self._upgrade(tx, found)
        if found is not None and found < 4 and self.dir is not None:
            # stores before schema 4 kept a lock file per user, named by a hash a guess could confirm: removed
            for old in (self.dir / "locks").glob("*.lock"):
                if len(old.stem) == 40 and all(c in "0123456789abcdef" for c in old.stem):
                    old.unlink(missing_ok=True)

    def _bind_home(self) -> None:
        """The store id is bound to the records file itself (device and inode): see SqlRecords._rehome."""
        if self.dir is None:
            return
        st = os.stat(self.dir / FILE)
        home = f"{st.st_dev}:{st.st_ino}"
        if self._one("SELECT value FROM meta WHERE key='home'") == (home,):
            return  # the usual case: nothing written (a read-only open stays read-only)
        with self.transaction() as tx:
            self._rehome(tx, home, "its file moved or was copied")

    def _place(self) -> str:
        return str((self.dir / FILE).resolve()) if self.dir is not None else ":memory:"

    def holds(self, store_id: str, home: str, place: str | None = None) -> bool | None:
        if place is None:
            return None  # moved before places were recorded
        if place == self._place():
            return False  # this file took the place of the one that was there (a restore into place)
        try:
            conn = sqlite3.connect(f"file:{place}?mode=ro", uri=True)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            return None if os.path.exists(place) else False
        return row is not None and row[0] == store_id

    def close(self) -> None:
        with self._mutex:
            self.conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Tx]:
        if self.read_only:
            raise StoreError(f"{self.where} is on a read-only volume (or folder): it can be read, not written")
        with self._mutex:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(self.conn, "qmark")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            self._log.after_write()

    @contextlib.contextmanager
    def _read(self, consistent: bool = False) -> Iterator[Tx]:
        with self._mutex:
            if not consistent:
                yield Tx(self.conn, "qmark")
                return
            self.conn.execute("BEGIN")
            try:
                yield Tx(self.conn, "qmark")
            finally:
                self.conn.execute("COMMIT")

    def _next_version(self, tx: Tx, user_id: str) -> int:
        tx.run("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='generation'")
        return int(tx.row("SELECT value FROM meta WHERE key='generation'")[0])

    def _start_generation(self, tx: Tx, top: int) -> None:
        tx.put_meta("generation", str(top), replace=False)

    def _member(self, column: str, values: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
        return f"{column} IN ({','.join('?' * len(values))})", tuple(values)

    def _columns(self, tx: Tx, table: str) -> set[str]:
        return {r[1] for r in tx.all(f"PRAGMA table_info({table})")}

    def _triggers(self) -> list[str]:
        return TRIGGERS

    def write_lock(self, user_id: str, blocking: bool = True) -> AbstractContextManager[bool]:
        """Serializes writers of one user across threads and processes (placement reads the Cells it extends).
        Yields whether it is held: with blocking=False it gives up at once when another writer has it."""
        if self.dir is None:
            return self._writers.hold(user_id, lambda _: contextlib.nullcontext(True), blocking)
        path = self.writer_lock_path(user_id)
        return self._writers.hold(user_id, lambda b: self._stripes.hold(path, blocking=b), blocking)

    def reembed_lock(self, user_id: str, blocking: bool = True) -> AbstractContextManager[bool]:
        """Held by the one job that makes the user's vectors again (runtime/upgrade.py), across threads and
        processes; stripe files of their own, so a job never keeps another user's writers waiting."""
        if self.dir is None:
            return self._reembeds.hold(user_id, lambda _: contextlib.nullcontext(True), blocking)
        path = self.writer_lock_path(user_id, "reembed")
        return self._reembeds.hold(user_id, lambda b: self._stripes.hold(path, blocking=b), blocking)

    def writer_lock_path(self, user_id: str, kind: str = "writers") -> Path:
        """The file whose lock serializes the user's writers (or re-embed jobs) across processes: one of
        WRITER_STRIPES files."""
        if self.dir is None:
            raise ValueError("a records store in memory has no lock files")
        if self._lock_key is None:
            self._lock_key = self.secret().encode()
        return self.dir / "locks" / f"{kind}-{writer_stripe(self._lock_key, user_id)}.lock"

    def _scrub(self) -> None:
        self.scrub_log()

    def _fence(self, tx: Tx, user_id: str) -> None:
        """Nothing: a file lock ends only with its process (or its holder's release), never under a live writer."""

    def scrub_log(self) -> None:
        """Copy the WAL into the database and truncate it, so deleted rows leave no old page images behind (store/wal.py
        says what happens while another connection reads the file)."""
        if self.dir is not None:
            with self._mutex:
                self._log.after_delete()


def _connect(target: str) -> tuple[sqlite3.Connection, bool]:
    """A connection to the records file, and whether it is read-only. A file whose WAL its last writer checkpointed
    away cannot be opened as it is where SQLite cannot make the WAL's shared-memory file (a read-only volume or
    folder): there nothing can change it either, so it is read as immutable."""
    conn = sqlite3.connect(target, timeout=60, check_same_thread=False, isolation_level=None)
    if target == ":memory:":
        return conn, False
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # SQLite opens the file at its first statement
    except sqlite3.OperationalError:
        conn.close()
        if os.access(os.path.dirname(target), os.W_OK) or os.path.exists(f"{target}-wal"):
            raise
        uri = f"{Path(target).resolve().as_uri()}?immutable=1"
        return sqlite3.connect(uri, uri=True, timeout=60, check_same_thread=False, isolation_level=None), True
    return conn, not os.access(target, os.W_OK)


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
        if not root.exists():
            private_folder(root)
    except OSError as exc:
        raise StoreError(f"cannot create the store directory {root}: {exc.strerror}") from None
