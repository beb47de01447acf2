"""What a store directory holds, checked before anything opens it: a wrong kind of path is one clear error."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

# the store's files hold every turn in clear (records) or its vectors: only their owner reads them, whatever the umask
PRIVATE_FILE, PRIVATE_FOLDER = 0o600, 0o700

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


def private_folder(folder: Path) -> Path:
    """`folder` made 0700 (an existing one tightened to it), and so are the parents it makes (the store folder)."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for level in reversed(missing):
        level.mkdir(mode=PRIVATE_FOLDER, exist_ok=True)  # a mode only takes bits away from the umask's
    tighten(folder)  # also under a umask that kept fewer bits: exactly 0700
    return folder


def private_file(path: Path) -> Path:
    """`path` made as an empty 0600 file where missing (an existing one tightened to 0600), so that whoever creates it
    next, SQLite or Chroma, opens it as it is; SQLite also gives its WAL and shared-memory files the mode of its
    database file."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE))
    except OSError:  # a read-only volume: an existing file is read as it is, a missing one is reported by its opener
        return path
    tighten(path)
    return path


def tighten(path: str | Path) -> None:
    """A file or folder of the store (made by an earlier release, or by another library under the umask) made
    private; one that cannot be changed (a read-only volume, another owner's) is left as it is."""
    with contextlib.suppress(OSError):
        mode = os.stat(path, follow_symlinks=False).st_mode
        wanted = PRIVATE_FOLDER if stat.S_ISDIR(mode) else PRIVATE_FILE
        if stat.S_IMODE(mode) != wanted and not stat.S_ISLNK(mode):
            os.chmod(path, wanted)
