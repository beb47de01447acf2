"""Persisted index snapshots: a user's derived indexes saved so a cold start reads one file instead of replaying
every record (Cells, BM25, packet vectors).

Never trusted over the records: a file is used only when the records' digest chain (store/protocols.py) at the
file's newest packet equals the digest the file carries, so it holds exactly the records' packets up to there
(a restore, a clone, a hand-edited row all change it), its epoch equals the records' (nothing was deleted or
re-embedded since) and its version is not newer; the records added after it are then replayed on top. A file that
is damaged, of another format, config or embedding model, or not signed with this store's key is ignored (and
rebuilt). The signature (HMAC-SHA256 with a key kept in the records store) keeps out files nobody with access to
the records wrote; the payload is data only (index/codec.py), checked part by part as it is read.

The files hold users' turns: they are made 0600 in 0700 folders whatever the umask, a write that fails removes
its temporary file, and the sweep removes what no one will read again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..config import MemCompileConfig
from ..index.codec import decode_index, decode_tail, encode_index, encode_tail
from ..index.user import UserIndex
from ..process import gc_paused
from ..store.layout import private_folder, user_key
from ..store.protocols import Head
from .user_state import Stamp

D = TypeVar("D")  # what a decoder gives back
log = logging.getLogger(__name__)
FORMAT = 5  # bump when the header or the payload (index/codec.py: VERSION) changes
TAIL = ".tail"  # the vectors-only file beside a snapshot
HOME = "home"  # in a machine's cache folder of a store: where its records live
STALE_TMP = 3600  # seconds after which a temporary file of a live process is taken as abandoned too
DigestAt = Callable[[str, int], "str | None"]  # RecordsStore.digest_at


class SnapshotFiles:
    def __init__(
        self,
        folder: Path,
        key: bytes,
        config: MemCompileConfig,
        embedding_id: str | None,
        digest_at: DigestAt,
        private_levels: int = 1,
        home: str | None = None,
    ):
        self.folder = folder
        self._home = home  # a machine's cache of stores: where this store's records live, for sweep_moved
        self._private_levels = private_levels  # 2 for a machine's cache of stores: their ids stay private too
        self._key = key
        self._digest_at = digest_at
        self._embedding_id = embedding_id or ""
        self._config_fields = frozenset(asdict(config))  # a file whose config has others is of another release
        # one file per user and build: processes opening a store with another config or model (dense off, a
        # profile) keep their own files instead of replacing each other's
        build = json.dumps({"format": FORMAT, "config": asdict(config), "embedding": self._embedding_id}, default=str)
        self._build = hashlib.sha256(build.encode()).hexdigest()[:12]

    def path(self, user_id: str, kind: str = "") -> Path:
        return self.folder / f"{user_key(user_id)}.{self._build}{kind}.snapshot"

    def _identity(self, index: UserIndex, embedding: str | None = None) -> dict[str, Any]:
        made_by = self._embedding_id if embedding is None else embedding
        return {"format": FORMAT, "user": index.user_id, "config": asdict(index.cfg), "embedding": made_by}

    def _write(self, target: Path, index: UserIndex, payload: bytes) -> None:
        head = {
            **self._identity(index),
            "version": index.version,
            "epoch": index.epoch,
            "seq": index.last_seqs[0],
            "digest": index.digest,
        }
        head_bytes = json.dumps(head, sort_keys=True, default=str).encode()
        signer = hmac.new(self._key, head_bytes + b"\n", hashlib.sha256)
        signer.update(payload)  # the payload grows with the user: never joined into another copy
        mac = signer.hexdigest().encode()
        for level in [self.folder.parent, self.folder][-self._private_levels :]:
            private_folder(level)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)  # also a file left by an earlier run with other bits
            with open(fd, "wb") as fh:
                fh.write(mac + b"\n" + head_bytes + b"\n")
                fh.write(payload)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk: what was written of it is freed at once
            raise
        if self._home is not None and not (self.folder / HOME).exists():
            try:
                fd = os.open(self.folder / HOME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with open(fd, "w") as fh:
                    fh.write(self._home)
            except OSError as exc:  # only the sweep of a later move needs it
                log.warning("could not write %s (%s)", self.folder / HOME, exc)

    def write(self, index: UserIndex) -> None:
        self._write(self.path(index.user_id), index, encode_index(index))
        self.path(index.user_id, TAIL).unlink(missing_ok=True)  # the file holds what the tail held

    def write_tail(self, index: UserIndex, packet_ids: Sequence[str]) -> None:
        """The vectors of packets newer than the snapshot file, so that the next process reads them from here
        instead of opening the vector store (importing and opening Chroma, the slow part of a cold start)."""
        ids = [p for p in packet_ids if p in index.vectors.row]
        matrix = index.vectors.matrix()[[index.vectors.row[p] for p in ids]]
        self._write(self.path(index.user_id, TAIL), index, encode_tail(ids, matrix))

    def _read(
        self,
        target: Path,
        records_head: Head,
        template: UserIndex,
        decode: Callable[[memoryview, UserIndex], D],
        embedding: str | None = None,
    ) -> D | None:
        """The decoded payload of a signed file of this build (of `embedding`'s, when given) that the records back,
        else None (a file that can never be used again is removed)."""
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("index snapshot %s unreadable (%s): rebuilding from the records", target, exc)
            return None
        try:  # views, not copies: the payload is tens of MB
            end_mac = data.index(b"\n")
            end_head = data.index(b"\n", end_mac + 1)
            signed = memoryview(data)[end_mac + 1 :]
            mac = hmac.new(self._key, signed, hashlib.sha256).hexdigest().encode()
            ok = hmac.compare_digest(data[:end_mac], mac)
            head = json.loads(data[end_mac + 1 : end_head])
            payload = signed[end_head - end_mac :]
        except ValueError:
            ok, head = False, {}
        expected = json.loads(json.dumps(self._identity(template, embedding), sort_keys=True, default=str))
        if not ok or {k: head.get(k) for k in expected} != expected:
            log.warning("index snapshot %s is damaged or of another build: rebuilding from the records", target)
            _unlink(target)
            return None
        if not self._backed(head, records_head):
            self.drop(template.user_id)  # not what the records hold: deleted, restored, re-embedded, forgotten
            return None
        try:
            with gc_paused():
                return decode(payload, template)
        except Exception as exc:  # signed but malformed (index/codec.py checks every part) or of another version
            log.warning("index snapshot %s could not be loaded (%s): rebuilding", target, exc)
            _unlink(target)
            return None

    def read(self, user_id: str, records_head: Head, template: UserIndex) -> UserIndex | None:
        """The user's snapshot when it can be brought up to date from the records, else None."""
        index = self._read(self.path(user_id), records_head, template, decode_index)
        if index is None:
            index = self._read_of_another_model(user_id, records_head, template)
        if index is not None:
            index.cfg = template.cfg
        return index  # its digest, carried by the payload, is the header's the records were checked against

    def _read_of_another_model(self, user_id: str, records_head: Head, template: UserIndex) -> UserIndex | None:
        """The user's file of this format and config made under another embedding model, without its vectors: after a
        model change the records part holds (the job makes the vectors), and reading it spares the first call after
        the change a rebuild from the records, which is much slower."""
        mine = self.path(user_id)
        for file in self.folder.glob(f"{user_key(user_id)}.*.snapshot") if self.folder.is_dir() else ():
            if file == mine or file.name.endswith(f"{TAIL}.snapshot"):
                continue
            try:
                with open(file, "rb") as fh:
                    fh.readline()
                    header = json.loads(fh.readline())
                embedding = header["embedding"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable: the sweep removes it
            if not isinstance(embedding, str) or embedding == self._embedding_id:
                continue
            wanted = json.loads(json.dumps(self._identity(template, embedding), sort_keys=True, default=str))
            if {k: header.get(k) for k in wanted} != wanted:
                continue  # another config's file (dense off, a profile): another process's to read, not removed
            index = self._read(file, records_head, template, decode_index, embedding)
            if index is not None:
                index.clear_vectors()
                return index
        return None

    def read_tail(self, user_id: str, records_head: Head, template: UserIndex) -> dict[str, np.ndarray]:
        """Vectors of packets newer than the snapshot file (write_tail), by packet id."""
        tail = self._read(self.path(user_id, TAIL), records_head, template, decode_tail)
        return {} if tail is None else dict(zip(tail[0], tail[1]))

    def _backed(self, header: dict[str, Any], records_head: Head) -> bool:
        """The records can bring a file up to date: it holds exactly their packets up to its newest (Stamp.extends)."""
        stamp = Stamp(header["version"], header["epoch"], header["digest"], header["seq"])
        return stamp.extends(records_head, partial(self._digest_at, header["user"]))

    def sweep(self, head: Callable[[str], Head]) -> int:
        """Removes files of an earlier format or release, files the records no longer back (their user forgotten, deleted from,
        restored or re-embedded since) and temporary files of writes that never finished: a forget on another
        machine cannot reach this one's files, so each worker sweeps its own folder when it opens the store. Reads
        only each file's header; returns how many files were removed."""
        removed = 0
        for file in self.folder.glob("*.snapshot") if self.folder.is_dir() else ():
            try:
                with open(file, "rb") as fh:
                    fh.readline()
                    header = json.loads(fh.readline())
                # a file of an earlier format, or of a release whose config had other fields, is never read again: a
                # large user's would stay behind after every upgrade
                stale = (
                    header["format"] != FORMAT
                    or set(header["config"]) != self._config_fields
                    or not self._backed(header, head(header["user"]))
                )
            except (OSError, ValueError, KeyError, TypeError):
                stale = True  # unreadable: it would be ignored and rebuilt anyway
            if stale:
                removed += _unlink(file)
        return removed + self._drop_abandoned("*")

    def sweep_moved(self, holds: Callable[[str, str], bool | None]) -> int:
        """Removes this machine's folders of other stores whose records are gone from where they lived (a store moved
        to another database or schema leaves its old folder, every user's turns in it, under its old id): `holds(id,
        home)` is False for them. Folders of stores whose records still exist, or cannot be told, stay."""
        removed = 0
        for other in self.folder.parent.iterdir() if self._home is not None and self.folder.parent.is_dir() else ():
            try:
                home = (other / HOME).read_text()
            except OSError:
                continue  # not a store's folder, or made before folders named their home: left as it is
            if other != self.folder and holds(other.name, home) is False:
                shutil.rmtree(other, ignore_errors=True)
                removed += 1
        return removed

    def drop_all(self) -> int:
        """Removes every snapshot file of the folder (they were made under another store id); how many."""
        return sum(_unlink(file) for file in self.folder.glob("*.snapshot")) if self.folder.is_dir() else 0

    def drop(self, user_id: str) -> None:
        """Removes the user's files of every build (what they hold is gone from the records), with the temporary
        files of saves of them that a kill cut short (they hold the user's turns as well)."""
        for file in self.folder.glob(f"{user_key(user_id)}.*snapshot") if self.folder.is_dir() else ():
            _unlink(file)
        self._drop_abandoned(user_key(user_id))

    def _drop_abandoned(self, name: str) -> int:
        """Removes the temporary files of writes that never finished, of the files named `name` (a glob); how many."""
        temporary = self.folder.glob(f"{name}.*.snapshot.*.tmp") if self.folder.is_dir() else ()
        return sum(_unlink(tmp) for tmp in temporary if _abandoned(tmp))

    def drop_build(self, user_id: str) -> None:
        """Removes the user's files of this build: two unlinks, no listing (cheap enough for every load of a user
        with no records; other builds' files go at the next sweep)."""
        for target in (self.path(user_id), self.path(user_id, TAIL)):
            _unlink(target)


def _unlink(file: Path) -> bool:
    """Removes a file; one that cannot be (a read-only folder) is logged and left, never an error of the caller's
    query or open. Whether it was removed."""
    try:
        os.remove(file)
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("could not remove %s (%s): it holds derived data the records no longer back", file, exc)
        return False


def _abandoned(tmp: Path) -> bool:
    """A temporary file (name.<pid>.tmp) whose writer is gone, or that is older than any write takes."""
    try:
        pid = int(tmp.name.rsplit(".", 2)[-2])
        if time.time() - tmp.stat().st_mtime > STALE_TMP:
            return True
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (ValueError, OSError):
        return False  # another owner's process (EPERM) or a file that went meanwhile: left alone
    return False
