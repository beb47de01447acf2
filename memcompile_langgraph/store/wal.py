"""Emptying an SQLite file's write-ahead log after rows were deleted, so that they leave no page images behind.

Another connection reading the file (a shell, a backup tool) keeps the log from being emptied while it reads. Then
the failure is said once and the log is emptied after a later write, without waiting, once that reader is gone.
"""

from __future__ import annotations

import logging
import sqlite3

log = logging.getLogger(__name__)

BUSY_MS = 60000  # how long a statement waits for a lock another connection holds


class LogScrub:
    """The log of one connection; its owner serializes the calls (they run under the owner's lock)."""

    def __init__(self, conn: sqlite3.Connection, where: str):
        self.conn, self.where = conn, where
        self.owed = False  # deleted rows may still be in the log: another connection was reading it

    def after_delete(self) -> None:
        """Empties the log, waiting for readers as any statement does."""
        owed = self.owed
        if not self._truncate(wait=True) and not owed:
            log.warning(
                "%s: another connection is reading it, so its write-ahead log keeps deleted rows until a later write "
                "empties it",
                self.where,
            )

    def after_write(self) -> None:
        """Empties the log if a delete could not, without waiting for a reader still in the way."""
        if self.owed:
            self._truncate(wait=False)

    def _truncate(self, wait: bool) -> bool:
        if not wait:
            self.conn.execute("PRAGMA busy_timeout=0")
        try:
            busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            if not wait:
                self.conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        self.owed = bool(busy)
        return not busy
