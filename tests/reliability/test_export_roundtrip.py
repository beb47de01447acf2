"""Export, import, re-import and re-sending the original file are idempotent and keep users apart, at the CLI: turns
sent without a dia_id keep the identity they were stored with (their place in the file sent) through an export,
and an export names its user, which `ingest` stores it under unless --user says otherwise. Both record backends."""

from __future__ import annotations

import json

import pytest

from .harness import memcompile, write_json

pytestmark = pytest.mark.slow  # a dozen CLI runs per backend

# no dia_ids; Tom says "Yes." twice in one session: two turns, told apart by their place
ORIGINAL = [
    {"speaker": "Tom", "text": "Shall we take the ferry to the island?", "time": "2024-05-01T10:00"},
    {"speaker": "Tom", "text": "Yes.", "time": "2024-05-01T10:00"},
    {"speaker": "Ann", "text": "The ferry leaves at nine from pier four.", "time": "2024-05-01T10:00"},
    {"speaker": "Tom", "text": "Yes.", "time": "2024-05-01T10:00"},
    {"speaker": "Ann", "text": "I booked the cabin by the lighthouse.", "time": "2024-05-03T18:00"},
]


def _ok(*args) -> str:
    run = memcompile(*args)
    assert run.code == 0, run.out + run.err
    return run.out


def _packets(where, user: str) -> int:
    stats = json.loads(_ok("stats", *where.cli, "--json"))
    return stats.get(user, {}).get("packets", 0)


def test_export_import_reimport_and_resend_are_idempotent_and_keep_users_apart(tmp_path, backend):
    first, moved = backend.where(tmp_path / "first"), backend.where(tmp_path / "moved")
    original = write_json(tmp_path / "original.json", ORIGINAL)
    _ok("ingest", original, *first.cli, "--user", "ann", "--quiet")
    _ok("ingest", write_json(tmp_path / "bob.json", ORIGINAL[:3]), *first.cli, "--user", "bob", "--quiet")
    _ok("export", *first.cli, "--user", "ann", "-o", tmp_path / "ann.jsonl")
    _ok("export", *first.cli, "--user", "bob", "-o", tmp_path / "bob.jsonl")

    # the export into its own store: every turn known, none a duplicate dia_id
    out = _ok("ingest", tmp_path / "ann.jsonl", *first.cli, "--quiet")
    assert out.startswith("ann:") and "5 already stored" in out and "duplicate" not in out, out
    assert _packets(first, "ann") == 5 and _packets(first, "default") == 0

    # the move: each export stored under the user it names, without --user
    out = _ok("ingest", tmp_path / "ann.jsonl", *moved.cli, "--quiet")
    assert out.startswith("ann: stored 5 turns"), out
    _ok("ingest", tmp_path / "bob.jsonl", *moved.cli, "--quiet")
    assert (_packets(moved, "ann"), _packets(moved, "bob"), _packets(moved, "default")) == (5, 3, 0)

    # re-import, then the original file sent again after the move: nothing stored twice
    out = _ok("ingest", tmp_path / "ann.jsonl", *moved.cli, "--quiet")
    assert "5 already stored" in out and "duplicate" not in out, out
    out = _ok("ingest", original, *moved.cli, "--user", "ann", "--quiet")
    assert "5 already stored" in out, out
    assert (_packets(moved, "ann"), _packets(moved, "bob")) == (5, 3)

    # the moved store exports the same turns as the first one
    _ok("export", *moved.cli, "--user", "ann", "-o", tmp_path / "again.jsonl")
    strip = lambda path: [  # noqa: E731
        {k: v for k, v in json.loads(line).items() if k != "stored_at"} for line in path.read_text().splitlines()
    ]
    assert strip(tmp_path / "again.jsonl") == strip(tmp_path / "ann.jsonl")
