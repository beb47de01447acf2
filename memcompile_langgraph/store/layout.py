"""What a store directory holds, checked before anything opens it: a wrong kind of path is one clear error."""

from __future__ import annotations

import hashlib
from pathlib import Path

# name inside the store -> whether it must be a folder
ENTRIES = {
    "memcompile.sqlite3": False,
    "llm.sqlite3": False,
    "chroma": True,
    "locks": True,
    "chroma/chroma.sqlite3": False,
}


class StorePathError(ValueError):
    """The store path cannot hold a store; the message is one line naming the path."""


def check_store_path(path: str | Path) -> Path:
    """The store folder, or a place one can be made: every existing part is of the kind the store expects."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StorePathError(f"{path} is a file, not a store folder")
    existing = next((p for p in path.parents if p.exists()), None)
    if not path.exists() and existing is not None and not existing.is_dir():
        raise StorePathError(f"cannot make the store folder {path}: {existing} is a file")
    for name, folder in ENTRIES.items():
        entry = path / name
        if entry.exists() and entry.is_dir() != folder:
            kind, wanted = ("a folder", "a file") if entry.is_dir() else ("a file", "a folder")
            raise StorePathError(f"{entry} is {kind} where the store keeps {wanted}")
    return path


def user_key(user_id: str) -> str:
    """A name derived from the user id that is safe in any file or collection name."""
    return hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]
