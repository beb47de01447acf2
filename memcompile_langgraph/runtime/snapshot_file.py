"""Persisted index snapshots: a user's derived indexes saved so a cold start reads one file instead of replaying
every record (Cells, BM25, packet vectors).

Never trusted over the records: a file is used only when its epoch equals the records' (nothing was deleted or
re-embedded since it was written) and its version is not newer; the records added after it are then replayed
on top. A file that is damaged, of another format, config or embedding model, or not signed with this store's
key is ignored (and rebuilt). The signature (HMAC-SHA256 with a key kept in the records store) keeps out files
nobody with access to the records wrote; the payload is data only (index_codec), checked part by part as it is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..config import MemCompileConfig
from ..gc_pause import gc_paused
from ..index import UserIndex
from ..index_codec import decode_index, decode_tail, encode_index, encode_tail
from ..store.records import user_key

log = logging.getLogger(__name__)
FORMAT = 5  # bump when the header or the payload (index_codec.VERSION) changes
TAIL = ".tail"  # the vectors-only file beside a snapshot


class SnapshotFiles:
    def __init__(self, folder: Path, key: bytes, config: MemCompileConfig, embedding_id: str | None):
        self.folder = folder
        self._key = key
        self._embedding_id = embedding_id or ""
        # one file per user and build: processes opening a store with another config or model (dense off, a
        # profile) keep their own files instead of replacing each other's
        build = json.dumps({"format": FORMAT, "config": asdict(config), "embedding": self._embedding_id}, default=str)
        self._build = hashlib.sha256(build.encode()).hexdigest()[:12]

    def path(self, user_id: str, kind: str = "") -> Path:
        return self.folder / f"{user_key(user_id)}.{self._build}{kind}.snapshot"

    def _identity(self, index: UserIndex) -> dict:
        return {"format": FORMAT, "user": index.user_id, "config": asdict(index.cfg), "embedding": self._embedding_id}

    def _write(self, target: Path, index: UserIndex, payload: bytes) -> None:
        head = {**self._identity(index), "version": index.version, "epoch": index.epoch}
        head_bytes = json.dumps(head, sort_keys=True, default=str).encode()
        mac = hmac.new(self._key, head_bytes + b"\n" + payload, hashlib.sha256).hexdigest().encode()
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(mac + b"\n" + head_bytes + b"\n" + payload)
        os.replace(tmp, target)

    def write(self, index: UserIndex) -> None:
        self._write(self.path(index.user_id), index, encode_index(index))
        self.path(index.user_id, TAIL).unlink(missing_ok=True)  # the file holds what the tail held

    def write_tail(self, index: UserIndex, packet_ids: list[str]) -> None:
        """The vectors of packets newer than the snapshot file, so that the next process reads them from here
        instead of opening the vector store (importing and opening Chroma: ~2 s)."""
        ids = [p for p in packet_ids if p in index.vectors.row]
        matrix = index.vectors.matrix()[[index.vectors.row[p] for p in ids]]
        self._write(self.path(index.user_id, TAIL), index, encode_tail(ids, matrix))

    def _read(self, target: Path, version: int, epoch: int, template: UserIndex, decode: Callable) -> Any:
        """The decoded payload of a signed file of this build that the records back, else None (a file that
        can never be used again is removed)."""
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
        expected = json.loads(json.dumps(self._identity(template), sort_keys=True, default=str))
        if not ok or {k: head.get(k) for k in expected} != expected:
            log.warning("index snapshot %s is damaged or of another build: rebuilding from the records", target)
            target.unlink(missing_ok=True)
            return None
        if not _backed(head, (version, epoch)):
            self.remove(template.user_id)  # records deleted, re-embedded or forgotten since: it may hold what is gone
            return None
        try:
            with gc_paused():
                return decode(payload, template)
        except Exception as exc:  # signed but malformed (index_codec checks every part) or of another version
            log.warning("index snapshot %s could not be loaded (%s): rebuilding", target, exc)
            target.unlink(missing_ok=True)
            return None

    def read(self, user_id: str, version: int, epoch: int, template: UserIndex) -> UserIndex | None:
        """The user's snapshot when it can be brought up to date from the records, else None."""
        index = self._read(self.path(user_id), version, epoch, template, decode_index)
        if index is not None:
            index.cfg = template.cfg
        return index

    def read_tail(self, user_id: str, version: int, epoch: int, template: UserIndex) -> dict[str, np.ndarray]:
        """Vectors of packets newer than the snapshot file (write_tail), by packet id."""
        tail = self._read(self.path(user_id, TAIL), version, epoch, template, decode_tail)
        return {} if tail is None else dict(zip(tail[0], tail[1]))

    def sweep(self, head: Callable[[str], tuple[int, int]]) -> int:
        """Removes files of an earlier format and files the records no longer back (their user forgotten, deleted
        from or re-embedded since): on a store shared by several machines a forget cannot reach the others' files,
        so each worker sweeps its own folder when it opens the store. Reads only each file's header; returns how
        many files were removed."""
        removed = 0
        for file in self.folder.glob("*.snapshot") if self.folder.is_dir() else ():
            try:
                with open(file, "rb") as fh:
                    fh.readline()
                    header = json.loads(fh.readline())
                # a file of an earlier format is never read again: one 100k-turn user leaves ~350 MB per upgrade
                stale = header["format"] != FORMAT or not _backed(header, head(header["user"]))
            except (OSError, ValueError, KeyError, TypeError):
                stale = True  # unreadable: it would be ignored and rebuilt anyway
            if stale:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(file)
                removed += 1
        return removed

    def remove(self, user_id: str) -> None:
        """Removes the user's files of every build (what they hold is gone from the records)."""
        for file in self.folder.glob(f"{user_key(user_id)}.*snapshot") if self.folder.is_dir() else ():
            with contextlib.suppress(FileNotFoundError):
                os.remove(file)


def _backed(header: dict, records_head: tuple[int, int]) -> bool:
    """The records can bring a file up to date: same epoch (nothing deleted, re-embedded or forgotten since) and a
    version not newer than theirs."""
    version, epoch = records_head
    return header["epoch"] == epoch and header["version"] <= version
