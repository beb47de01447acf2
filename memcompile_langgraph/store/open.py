"""Which records store a memory uses: SQLite in the store directory (the default) or PostgreSQL by URL."""

from __future__ import annotations

import os
from pathlib import Path

from .protocols import RecordsStore

RECORDS_URL_ENV = "MEMCOMPILE_RECORDS_URL"


def records_url_from(records_url: str | None) -> str | None:
    """The URL given, else MEMCOMPILE_RECORDS_URL (read here, so the facade, the CLI and the graphs agree);
    an empty string means SQLite in the store directory whatever the environment says."""
    return (os.environ.get(RECORDS_URL_ENV) if records_url is None else records_url) or None


def open_records(path: str | Path | None, records_url: str | None = None, create: bool = True) -> RecordsStore:
    url = records_url_from(records_url)
    if url:
        from .pg_records import (
            PgRecordStore,  # psycopg is imported only by memories that use PostgreSQL
        )

        return PgRecordStore(url, create=create)
    from .records import RecordStore

    return RecordStore(path, create=create)
