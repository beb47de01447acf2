"""The resumable part of a run: one JSONL line per finished question, and the per-dialogue build facts."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, TextIO


def fingerprint(inputs: dict[str, Any]) -> str:
    """Short id of everything that changes a record; a run with other inputs writes another results file."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:10]


class ResultLog:
    """Records appended and flushed as questions finish; on restart the finished ones are read back."""

    def __init__(self, path: Path):
        self.path = path
        self._fh: TextIO | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        """qid -> record; a torn last line (a run killed mid-write) is ignored and redone."""
        out: dict[str, dict[str, Any]] = {}
        if not self.path.is_file():
            return out
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("qid"), str):
                    out[record["qid"]] = record
        return out

    def append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self._repair_tail()
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()

    def _repair_tail(self) -> None:
        """A killed run can leave a last line without its newline: end it so the next record starts clean."""
        if self.path.is_file() and self.path.stat().st_size:
            with self.path.open("rb+") as fh:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class DialogueLog:
    """dialogues.json: per dialogue the store facts, build time and LLM usage, rewritten after each dialogue."""

    def __init__(self, path: Path):
        self.path = path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # unreadable, not UTF-8 or not JSON: every dialogue's facts are made again
            data = {}
        # an entry that is no object is dropped, so its dialogue's facts are made again too
        items = data.items() if isinstance(data, dict) else ()
        self.data: dict[str, dict[str, Any]] = {k: v for k, v in items if isinstance(v, dict)}

    def update(self, user_id: str, **facts: Any) -> None:
        self.data.setdefault(user_id, {}).update(facts)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.path)
