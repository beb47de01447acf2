"""Bad input through the real CLI: unusable files give exit code 2 and exactly one line on stderr (and write
nothing); bad turns inside a good file are skipped and counted, the good ones stored, warnings counted."""

from __future__ import annotations

import json

import pytest

from memcompile_langgraph.config import DEFAULT_CONFIG

from .harness import memcompile, rows, write_json

TWO_MB = 2 * 1024 * 1024

pytestmark = pytest.mark.slow  # every test here runs CLI or writer subprocesses


def _turn(text: str, **extra) -> dict:
    return {"speaker": "Ann", "text": text, **extra}


# --- unusable files: (name, file bytes) -------------------------------------------------------------------
UNUSABLE_FILES = {
    "empty": b"",
    "whitespace": b"  \n\t\n",
    "invalid_json": b'{"speaker": "Ann", "text": "cut off',
    "wrong_schema": json.dumps({"users": {"ann": ["hello"]}}).encode(),
    "json_scalar": b'"just a string"',
    "list_of_numbers": b"[1, 2, 3]",
    "binary_garbage": bytes(range(256)) * 4,
    "nested_too_deep": b"[" * 200_000 + b"]" * 200_000,
    "locomo_without_sessions": json.dumps([{"sample_id": "s1", "conversation": {"speaker_a": "A"}}]).encode(),
    "jsonl_no_valid_line": b"not json\n{still not\n",
    "all_turns_bad": b'1\n[2]\n{"text": "no speaker"}\n{"speaker": "Ann", "text": "   "}\n',
}


def _assert_one_line_error(run, *fragments: str) -> None:
    assert run.code == 2, (run.code, run.out, run.err)
    assert len(run.err_lines) == 1, run.err
    line = run.err_lines[0]
    assert line.startswith("memcompile: error:") and "Traceback" not in run.err
    for f in fragments:
        assert f in line, line


@pytest.mark.parametrize("kind", sorted(UNUSABLE_FILES))
def test_unusable_file_is_one_line_and_exit_2(kind, tmp_path):
    path = tmp_path / f"{kind}.json"
    path.write_bytes(UNUSABLE_FILES[kind])
    store = tmp_path / "store"
    run = memcompile("ingest", path, "--store", store, "--quiet")
    _assert_one_line_error(run, path.name)
    assert not store.exists()  # rejected before anything is written


def test_missing_file_and_directory(tmp_path):
    _assert_one_line_error(memcompile("ingest", tmp_path / "nope.json", "--store", tmp_path / "s"), "nope.json")
    _assert_one_line_error(memcompile("ingest", tmp_path, "--store", tmp_path / "s"), "cannot read")


@pytest.mark.parametrize("user", ["", "   ", "tab\tin\nid", "x" * 300, "rtl\u202eevil"])
def test_unusable_user_id(user, tmp_path):
    path = write_json(tmp_path / "ok.json", [_turn("I like tea.")])
    store = tmp_path / "store"
    _assert_one_line_error(memcompile("ingest", path, "--store", store, "--user", user, "--quiet"), "user id")
    assert not store.exists()


def test_damaged_store(tmp_path):
    path = write_json(tmp_path / "ok.json", [_turn("I like tea.")])
    store = tmp_path / "store"
    store.mkdir()
    (store / "memcompile.sqlite3").write_bytes(b"this is not a database" * 100)
    _assert_one_line_error(memcompile("ingest", path, "--store", store, "--quiet"), "store", "not a database")
    _assert_one_line_error(memcompile("stats", "--store", store), "not a database")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    _assert_one_line_error(memcompile("ingest", path, "--store", not_a_dir, "--quiet"))


# --- bad turns inside a good file ------------------------------------------------------------------------
GOOD = [
    _turn("I adopted a beagle named Biscuit.", time="2024-03-04T09:15", dia_id="D1:1"),
    _turn("Priya starts at Northwind next month.", time="2024-03-04T09:16", dia_id="D1:2"),
]
# (JSONL line, counter it must raise): the turn is skipped, nothing of it stored
SKIPPED = [
    ("{not json at all", "skipped_bad_json_line"),
    ("42", "skipped_not_an_object"),
    ('"a bare string"', "skipped_not_an_object"),
    ("[1, 2]", "skipped_not_an_object"),
    (json.dumps({"text": "skippedmarker without speaker"}), "skipped_missing_speaker"),
    (json.dumps({"speaker": 123, "text": "skippedmarker numeric speaker"}), "skipped_missing_speaker"),
    (json.dumps({"speaker": "Ann"}), "skipped_missing_text"),
    (json.dumps({"speaker": "Ann", "text": " \t\u200b "}), "skipped_empty_text"),
    (json.dumps({"speaker": "Ann", "text": ["skippedmarker", "list"]}), "skipped_text_not_string"),
    (json.dumps(_turn("skippedmarker other content", dia_id="D1:1")), "skipped_duplicate_dia_id"),
    (json.dumps(_turn("skippedmarker session too large", session=10**12)), "skipped_bad_session"),
    (json.dumps(_turn("skippedmarker boolean session", session=True)), "skipped_bad_session"),
    (json.dumps(_turn("skippedmarker list dia id", dia_id=["D9:9"])), "skipped_dia_id_not_string"),
    (json.dumps(_turn("skippedmarker object time", time={"day": 3})), "skipped_time_not_string"),
]
# (turn, counter): stored, with a counted warning
WARNED = {
    "nul_and_control": (_turn("NUL\x00 and bell\x07 and escape\x1b[31m gone", dia_id="D2:1"), "cleaned_text"),
    "bidi_override": (_turn("Pay \u202eevil\u202c bidi", dia_id="D2:2"), "cleaned_text"),
    "unparsed_time": (_turn("We met on a strange day.", time="the day after never", dia_id="D2:3"), "unparsed_time"),
    "numeric_time": (_turn("An epoch stamp here.", time=1700000000, dia_id="D2:4"), "unparsed_time"),
    "two_mb_turn": (_turn("long " * (TWO_MB // 5), dia_id="D2:5"), "trimmed_for_extraction"),
}
INVALID_UTF8_LINE = b'{"speaker": "Ann", "text": "caf\xe9 au lait \xff\xfe", "dia_id": "D2:6"}'


def _expected_counters() -> dict[str, int]:
    out: dict[str, int] = {}
    for _, name in SKIPPED:
        out[name] = out.get(name, 0) + 1
    for _, name in WARNED.values():
        out[name] = out.get(name, 0) + 1
    out["invalid_utf8"] = 1
    out["trimmed_for_embedding"] = 1
    out["already_stored"] = 1  # GOOD[0] appears twice, identical
    return out


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixed")
    lines = [json.dumps(t).encode() for t in GOOD]
    lines += [line.encode() for line, _ in SKIPPED]
    lines += [json.dumps(t).encode() for t, _ in WARNED.values()]
    lines += [INVALID_UTF8_LINE, json.dumps(GOOD[0]).encode(), b"", b"   "]
    path = tmp / "turns.jsonl"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")  # CRLF line ends, blank lines: both fine
    store = tmp / "store"
    run = memcompile("ingest", path, "--store", store, "--user", "mixed", "--quiet")
    stats = memcompile("stats", "--store", store, "--user", "mixed", "--json")
    return store, run, json.loads(stats.out)


def test_good_file_with_bad_turns_exits_0_and_reports(mixed_store):
    _, run, _ = mixed_store
    assert run.code == 0 and "Traceback" not in run.err, run.err
    stored = 2 + len(WARNED) + 1
    assert f"mixed: stored {stored} turns" in run.out
    assert "skipped " in run.out and "warnings " in run.out and "1 already stored" in run.out


def test_every_kind_is_counted_exactly(mixed_store):
    _, _, stats = mixed_store
    counters = stats["counters"]
    expected = _expected_counters()
    assert {k: counters.get(k, 0) for k in expected} == expected
    unexpected = {k for k in counters if k.startswith("skipped_")} - set(expected)
    assert not unexpected
    assert stats["packets"] == stats["vectors"] == 2 + len(WARNED) + 1


def test_good_turns_stored_bad_ones_not(mixed_store):
    store, _, _ = mixed_store
    texts = {r[0]: r[1] for r in rows(store, "SELECT dia_id, text FROM packets WHERE user_id='mixed'")}
    assert texts["D1:1"] == GOOD[0]["text"] and texts["D1:2"] == GOOD[1]["text"]
    everything = json.dumps(rows(store, "SELECT * FROM packets")) + json.dumps(rows(store, "SELECT * FROM descriptors"))
    assert "skippedmarker" not in everything


def test_control_and_bidi_characters_are_removed(mixed_store):
    store, _, _ = mixed_store
    texts = {r[0]: r[1] for r in rows(store, "SELECT dia_id, text FROM packets WHERE user_id='mixed'")}
    assert texts["D2:1"] == "NUL and bell and escape[31m gone"
    assert texts["D2:2"] == "Pay evil bidi"
    claims = " ".join(r[0] for r in rows(store, "SELECT claim FROM descriptors WHERE user_id='mixed'"))
    for bad in ("\x00", "\x07", "\x1b", "\u202e", "\u202c"):
        assert bad not in claims and bad not in "".join(texts.values())


def test_invalid_utf8_is_replaced_and_kept(mixed_store):
    store, _, _ = mixed_store
    (text,) = rows(store, "SELECT text FROM packets WHERE user_id='mixed' AND dia_id='D2:6'")[0]
    assert text.startswith("caf\ufffd au lait")


def test_unparsed_times_are_kept_raw_with_unknown_time(mixed_store):
    store, _, _ = mixed_store
    got = dict(
        (r[0], r[1:])
        for r in rows(
            store,
            "SELECT dia_id, session_time, session_time_raw FROM packets WHERE user_id='mixed' AND dia_id IN ('D2:3','D2:4')",
        )
    )
    assert got == {"D2:3": (None, "the day after never"), "D2:4": (None, "1700000000")}
    events = rows(store, "SELECT event_time FROM descriptors WHERE user_id='mixed' AND dia_id IN ('D2:3','D2:4')")
    assert events and all(e == ("",) for e in events)


def test_two_mb_turn_stored_whole_trimmed_for_extraction_and_embedding(mixed_store):
    store, _, _ = mixed_store
    (length,) = rows(store, "SELECT length(text) FROM packets WHERE user_id='mixed' AND dia_id='D2:5'")[0]
    assert length == len(WARNED["two_mb_turn"][0]["text"].strip()) > 2_000_000
    claims = rows(store, "SELECT length(claim) FROM descriptors WHERE user_id='mixed' AND dia_id='D2:5'")
    assert claims and max(c[0] for c in claims) <= DEFAULT_CONFIG.extract_max_chars + 200


def test_reingesting_the_file_adds_nothing(mixed_store, tmp_path):
    store, _, before = mixed_store
    path = tmp_path / "again.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in GOOD + [t for t, _ in WARNED.values()]))
    run = memcompile("ingest", path, "--store", store, "--user", "mixed", "--quiet")
    assert run.code == 0 and "stored 0 turns" in run.out
    after = json.loads(memcompile("stats", "--store", store, "--user", "mixed", "--json").out)
    assert after["packets"] == before["packets"] and after["descriptors"] == before["descriptors"]
    warnings = ("cleaned_text", "unparsed_time", "trimmed_for_extraction", "trimmed_for_embedding")
    assert {k: after["counters"][k] for k in warnings} == {k: before["counters"][k] for k in warnings}


@pytest.mark.slow
def test_many_sessions(tmp_path):
    """A LoCoMo sample with 1,500 sessions of one turn each, plus a session key too large to be an index."""
    n = 1500
    conversation = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for i in range(1, n + 1):
        conversation[f"session_{i}"] = [
            {"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D{i}:1", "text": f"Note number {i}."}
        ]
        conversation[f"session_{i}_date_time"] = f"1:{i % 60:02d} pm on {1 + i % 28} May, {2000 + i // 336}"
    conversation["session_99999999999"] = [{"speaker": "Ann", "dia_id": "D0:1", "text": "too far"}]
    path = write_json(tmp_path / "many.json", [{"sample_id": "many", "conversation": conversation}])
    store = tmp_path / "store"
    run = memcompile("ingest", path, "--store", store, "--quiet")
    assert run.code == 0, run.err
    assert f"many: stored {n} turns" in run.out and "bad_session=1" in run.out
    stats = json.loads(memcompile("stats", "--store", store, "--user", "many", "--json").out)
    assert stats["packets"] == n and stats["sessions"] == n


def test_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([_turn("A file saved with a byte order mark.")]).encode())
    run = memcompile("ingest", path, "--store", tmp_path / "store", "--user", "bom", "--quiet")
    assert run.code == 0 and "bom: stored 1 turns" in run.out, run.err
