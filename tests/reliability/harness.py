"""Helpers of the reliability suite: the real CLI in a subprocess, and raw views of a store (its records in SQLite
or PostgreSQL, its Chroma directory) that bypass MemCompile (opening it would reconcile, and so hide the damage a test
looks for)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.record_backends import Where

from memcompile_langgraph.store.chroma import ChromaVectors

CLI = [sys.executable, "-c", "import sys; from memcompile_langgraph.cli import main; sys.exit(main())"]


def cli_env() -> dict[str, str]:
    return {**os.environ, "ANONYMIZED_TELEMETRY": "False", "PYTHONWARNINGS": "ignore"}


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def memcompile(*args: str, timeout: float = 600) -> Run:
    proc = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=cli_env(), timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def spawn(*args: str, log: Path) -> subprocess.Popen:
    """The CLI in the background, in its own process group (so a test can kill exactly it)."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [*CLI, *map(str, args)], stdout=out, stderr=subprocess.STDOUT, env=cli_env(), start_new_session=True
        )


def rows(store: Path | Where, sql: str, args: tuple = ()) -> list[tuple]:
    return where_of(store).rows(sql, args)


def where_of(store: Path | Where) -> Where:
    """A bare directory is a store with SQLite records."""
    return store if isinstance(store, Where) else Where(Path(store))


def snapshot(store: Path | Where, user: str) -> dict:
    """Everything a clean run determines: packets, descriptors with their Cell, and the vectors."""
    # sorted here, not by SQL: PostgreSQL's collation may not be SQLite's byte order
    packets = sorted(
        rows(store, "SELECT packet_id, dia_id, content_hash, session FROM packets WHERE user_id=?", (user,)),
        key=lambda r: r[1],
    )
    descriptors = sorted(
        rows(
            store,
            "SELECT descriptor_id, packet_id, claim, people, keywords, event_time, cell_id FROM descriptors "
            "WHERE user_id=?",
            (user,),
        )
    )
    return {"packets": packets, "descriptors": descriptors, **vector_view(store, user)}


def vector_view(store: Path | Where, user: str) -> dict:
    """Ids Chroma lists, ids whose vectors its index returns, and those vectors. The second is read by id, not by a
    probe query: Chroma's HNSW search is approximate and can leave a node unreachable even in a fresh build (seen: one
    vector of 369 that no query returned, at k = n and from its own vector), while a lost index entry fails to read
    back."""
    vs = ChromaVectors(where_of(store).path)
    listed = vs.ids(user)
    ids, vectors = vs.vectors(user)
    return {
        "vector_ids": listed,
        "indexed_ids": set(ids),
        "vectors": {pid: tuple(float(x) for x in v) for pid, v in zip(ids, vectors)},
    }


def packet_ids(store: Path | Where, user: str) -> set[str]:
    return {r[0] for r in rows(store, "SELECT packet_id FROM packets WHERE user_id=?", (user,))}


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


SUBJECTS = ("dog", "garden", "violin", "marathon", "bakery", "kayak", "novel", "telescope", "chess club", "pottery")
PLACES = ("Lisbon", "Oslo", "Kyoto", "Denver", "Nairobi", "Lima", "Hanoi", "Tallinn", "Perth", "Quebec")


def synthetic_turns(tag: str, n: int, seed: int = 0) -> list[dict]:
    """Short, varied dated turns; every text carries `tag` so a leak of this user is recognizable anywhere."""
    import random

    rng = random.Random(f"{tag}-{seed}")
    speakers = (f"{tag.capitalize()}a", f"{tag.capitalize()}b")
    out = []
    for i in range(n):
        subject, place = rng.choice(SUBJECTS), rng.choice(PLACES)
        day = 1 + i // 8
        out.append(
            {
                "speaker": speakers[i % 2],
                "text": f"{tag} note {i}: I talked about my {subject} trip to {place} with {rng.choice(speakers)}.",
                "time": f"2024-{1 + day // 28:02d}-{1 + day % 28:02d}T10:{i % 60:02d}",
            }
        )
    return out
