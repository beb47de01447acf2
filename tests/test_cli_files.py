"""Files in and out of the CLI are taken whole or refused whole: an export that fails (a full disk) keeps the earlier
file, a truncated export is refused, a LoCoMo file is checked before anything is stored; a multi-conversation file
never merges into one --user; each skipped line says where it is."""

import contextlib
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli import main
from memcompile_langgraph.store.open import open_records


def _users(store: Path) -> list[str]:
    if not (store / "memcompile.sqlite3").exists():
        return []
    records = open_records(store, "", create=False)
    try:
        return records.users()
    finally:
        records.close()


def _sample(sid, n: int = 3) -> dict:
    turns = [
        {"speaker": "Ann" if i % 2 else "Bo", "dia_id": f"D1:{i + 1}", "text": f"{sid} line {i}."} for i in range(n)
    ]
    return {"sample_id": sid, "conversation": {"session_1": turns, "session_1_date_time": "1:00 pm on 8 May, 2023"}}


def _locomo(tmp_path: Path, *samples: dict) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(list(samples)))
    return path


def _store(tmp_path: Path, user: str, turns: int, chars: int = 40) -> Path:
    store = tmp_path / "src"
    mem = MemCompile(store, dense=False, records_url="", chroma_url="")
    mem.add_turns([{"speaker": "Ann", "text": f"Turn {i}: " + "x" * chars} for i in range(turns)], user_id=user)
    mem.close()
    return store


@contextlib.contextmanager
def _small_disk(where: Path, size: str = "96k"):
    """A real full disk: a tmpfs of `size` (needs root, as on CI machines here)."""
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if proc.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_failed_export_keeps_the_earlier_complete_file(tmp_path, capsys):
    store = _store(tmp_path, "ann", 4)
    mem = MemCompile(store, dense=False, records_url="", chroma_url="")
    mem.add_turns([{"speaker": "Bo", "text": f"Long turn {i}: " + "y" * 400} for i in range(400)], user_id="bo")
    mem.close()
    with _small_disk(tmp_path / "disk") as disk:
        target = disk / "export.jsonl"
        assert main(["export", "--store", str(store), "--records-url", "", "--user", "ann", "-o", str(target)]) == 0
        earlier = target.read_bytes()
        capsys.readouterr()
        # bo's ~170 KB do not fit in 96 KB
        assert main(["export", "--store", str(store), "--records-url", "", "--user", "bo", "-o", str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "No space left on device" in err[0] and "earlier file" in err[0], err
        assert target.read_bytes() == earlier  # intact, and nothing half-written beside it
        assert sorted(p.name for p in disk.iterdir()) == ["export.jsonl"]
        assert main(["ingest", str(target), "--store", str(tmp_path / "dst"), "--user", "ann", "--quiet"]) == 0
    assert _users(tmp_path / "dst") == ["ann"]


@pytest.fixture(scope="module")
def export_file(tmp_path_factory) -> bytes:
    tmp = tmp_path_factory.mktemp("export")
    store = _store(tmp, "ann", 5, chars=10)
    out = tmp / "ann.jsonl"
    assert main(["export", "--store", str(store), "--records-url", "", "--user", "ann", "-o", str(out)]) == 0
    return out.read_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10**6))
def test_an_export_cut_anywhere_is_stored_whole_or_not_at_all(export_file, tmp_path, cut):
    cut %= len(export_file) + 1
    run = tmp_path / uuid.uuid4().hex
    run.mkdir()
    (run / "part.jsonl").write_bytes(export_file[:cut])
    code = main(["ingest", str(run / "part.jsonl"), "--store", str(run / "dst"), "--records-url", "", "--quiet"])
    users = _users(run / "dst")
    if code == 0:
        mem = MemCompile(run / "dst", dense=False, records_url="", chroma_url="")
        try:
            assert mem.stats("ann")["packets"] == 5  # every turn of the export, as the user it names
        finally:
            mem.close()
        assert cut >= len(export_file) - 1  # the whole file (its last newline may go)
    else:
        assert code == 2 and users == []


def test_a_locomo_file_with_one_bad_sample_id_stores_nothing_and_names_it(tmp_path, capsys):
    path = _locomo(tmp_path, _sample("conv-1"), _sample("conv-2\u200b"), _sample("conv-3"))
    assert main(["ingest", str(path), "--store", str(tmp_path / "s"), "--records-url", "", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sample 2" in err[0] and "conv-2\\u200b" in err[0] and "nothing stored" in err[0], err
    assert not (tmp_path / "s").exists()


def test_user_with_a_file_of_many_conversations_is_refused_or_takes_the_sample(tmp_path, capsys):
    path = _locomo(tmp_path, _sample("conv-1", 3), _sample("conv-2", 5))
    store = str(tmp_path / "s")
    assert main(["ingest", str(path), "--store", store, "--records-url", "", "--user", "me", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 conversations" in err[0] and "--sample" in err[0]
    assert not Path(store).exists()

    argv = ["ingest", str(path), "--store", store, "--records-url", "", "--quiet"]
    assert main([*argv, "--user", "me", "--sample", "conv-2"]) == 0
    assert capsys.readouterr().out.strip().splitlines() == ["me: stored 5 turns, 5 descriptors"]
    assert main([*argv, "--sample", "nope"]) == 2
    assert "conv-1, conv-2" in capsys.readouterr().err

    assert main(argv) == 0  # every conversation as its own user; the summary counts the whole file
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("conv-1: stored 3 turns") and out[1].startswith("conv-2: stored 5 turns")
    assert out[2].startswith("2 users: stored 8 turns")
    assert sorted(_users(Path(store))) == ["conv-1", "conv-2", "me"]


def test_each_skipped_line_says_where_it_is(tmp_path, capsys):
    lines = [
        '{"speaker": "Ann", "text": "Hello."}',
        "{not json",
        '{"text": "no speaker"}',
        '{"speaker": "Bo", "text": "Hi."}',
    ]
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["ingest", str(path), "--store", str(tmp_path / "s"), "--records-url", "", "--quiet"]) == 0
    captured = capsys.readouterr()
    skips = [line for line in captured.err.splitlines() if "skipped" in line]
    assert skips == [
        f"memcompile: {path}: line 2 skipped: bad_json_line",
        f"memcompile: {path}: line 3 skipped: missing_speaker",
    ]
    assert "stored 2 turns" in captured.out and "bad_json_line=1" in captured.out


def test_skip_lines_stop_at_a_cap(tmp_path, capsys):
    path = tmp_path / "turns.jsonl"
    path.write_text('{"speaker": "Ann", "text": "Hello."}\n' + "{oops\n" * 50)
    assert main(["ingest", str(path), "--store", str(tmp_path / "s"), "--records-url", "", "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert sum("skipped:" in line for line in err) == 20 and any("more skipped" in line for line in err)


def test_stats_of_a_user_the_store_does_not_hold_says_so(tmp_path, capsys):
    store = _store(tmp_path, "ann", 2)
    assert main(["stats", "--store", str(store), "--records-url", "", "--user", "bob"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds nothing for user 'bob'" in err[0] and "ann" in err[0]
    assert main(["stats", "--store", str(store), "--records-url", "", "--user", "ann"]) == 0


def test_export_is_readable_by_its_owner_only_also_over_an_older_file(tmp_path):
    store = _store(tmp_path, "ann", 2)
    target = tmp_path / "out.jsonl"
    target.write_text("old")
    os.chmod(target, 0o644)
    assert main(["export", "--store", str(store), "--records-url", "", "--user", "ann", "-o", str(target)]) == 0
    assert os.stat(target).st_mode & 0o777 == 0o600
    assert json.loads(target.read_text().splitlines()[-1]) == {"memcompile_export_end": 2}


def test_a_skipped_locomo_turn_is_named_by_its_sample_and_dia_id(tmp_path, capsys):
    sample = _sample("conv-1", 3)
    sample["conversation"]["session_1"][1]["speaker"] = None
    path = _locomo(tmp_path, sample)
    assert main(["ingest", str(path), "--store", str(tmp_path / "s"), "--records-url", "", "--quiet"]) == 0
    skips = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert skips == [f"memcompile: {path}: conv-1 turn 2 (D1:2) skipped: missing_speaker"]


@pytest.fixture(scope="module")
def kept_store(tmp_path_factory) -> Path:
    return _store(tmp_path_factory.mktemp("kept"), "ann", 3, chars=10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(min_value=0, max_value=10**6), spelling=st.sampled_from(["as is", "dotdot", "link"]))
def test_an_export_into_the_store_folder_is_refused_and_the_store_kept(kept_store, tmp_path, capsys, pick, spelling):
    files = sorted(p for p in kept_store.rglob("*") if p.is_file())
    inside = files[pick % len(files)].relative_to(kept_store)
    run = tmp_path / uuid.uuid4().hex
    run.mkdir()
    if spelling == "link":  # a folder outside that is the store under another name
        (run / "alias").symlink_to(kept_store)
        target = run / "alias" / inside
    else:
        target = (kept_store / ".." / kept_store.name if spelling == "dotdot" else kept_store) / inside
    before = target.resolve().read_bytes()
    capsys.readouterr()
    code = main(["export", "--store", str(kept_store), "--records-url", "", "--user", "ann", "-o", str(target)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "inside the store" in err[0], err
    assert target.resolve().read_bytes() == before
    assert _users(kept_store) == ["ann"]


def test_an_export_into_a_missing_folder_names_the_path_given(tmp_path, capsys):
    store = _store(tmp_path, "ann", 1)
    target = tmp_path / "no" / "such" / "ann.jsonl"
    assert main(["export", "--store", str(store), "--records-url", "", "--user", "ann", "-o", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"memcompile: error: {target}: cannot write (No such file or directory); nothing written"]
