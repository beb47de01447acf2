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


def test_an_export_carries_each_turns_end_and_an_import_keeps_it(tmp_path, backend):
    """A turn stored with a time to live ends there too after an export and an import: one whose end has passed is
    not stored again (counted), the others expire when they would have."""
    import time

    first, moved, late = (backend.where(tmp_path / name) for name in ("first", "moved", "late"))
    mem = first.memory(dense=False)
    try:
        mem.add_turns([{"speaker": "Ann", "text": "My locker code is 1234.", "dia_id": "D1:1"}], "ann")
        mem.add_turns([{"speaker": "Ann", "text": "The gate code is 9876.", "dia_id": "D1:2"}], "ann", ttl=0.05)
        mem.add_turns([{"speaker": "Ann", "text": "My desk is by the window.", "dia_id": "D1:3"}], "ann", ttl=60)
        exported = list(mem.export_turns("ann"))
    finally:
        mem.close()
    ends = {t["dia_id"]: t.get("expires_at") for t in exported}
    assert ends["D1:1"] is None and ends["D1:2"] and ends["D1:3"], ends
    target = moved.memory(dense=False)
    try:
        assert target.add_turns(exported, "ann")["stored"] == 3
        time.sleep(3.5)  # the gate code's three seconds pass
        assert target.sweep_expired() == 1
        assert [t.packet.dia_id for t in target.turns("ann")] == ["D1:1", "D1:3"]
    finally:
        target.close()
    again = late.memory(dense=False)  # the same export, imported after the gate code's end
    try:
        counts = again.add_turns(exported, "ann")
        assert counts["stored"] == 2 and counts["skipped_expired"] == 1, counts
        assert "9876" not in str([t.packet.text for t in again.turns("ann")])
        assert again.stats("ann")["counters"]["skipped_expired"] == 1
        bad = {**exported[0], "dia_id": "D2:1", "expires_at": "soon"}  # untrusted: one counted skip
        assert again.add_turns([bad], "ann") == {"stored": 0, "descriptors": 0, "skipped_bad_expires_at": 1}
    finally:
        again.close()
