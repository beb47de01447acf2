"""Derived state anchored to the records (issue 25): snapshot files, cached indexes, Chroma collections and lock
files never outlive or outrank the records they came from, whatever an operator does to the records (restore from
a backup, clone, copy), and hold nothing private where it does not belong. Real PostgreSQL, real `chroma run`."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.pg_server import BINDIR

from memcompile_langgraph import MemCompile
from memcompile_langgraph.runtime import cache as cache_module
from memcompile_langgraph.runtime import consistency, upgrade
from memcompile_langgraph.runtime.engine import bundles
from memcompile_langgraph.store import sqlite as sqlite_records
from memcompile_langgraph.store.layout import user_key
from memcompile_langgraph.store.protocols import StoreError


def turn(text: str, n: int) -> dict:
    return {"speaker": "Ann", "text": text, "time": "2024-05-01", "dia_id": f"D1:{n}"}


def held(mem: MemCompile, user: str) -> set[str]:
    return {t.packet.dia_id for t in mem.turns(user)}


def served(mem: MemCompile, user: str) -> set[str]:
    """The turns the memory's published index answers from (what every query reads)."""
    return set(mem.index(user).by_dia)


def worker(cache_dir: Path, monkeypatch, url: str, chroma_url: str, **kwargs) -> MemCompile:
    """A worker of a served store with its own machine cache (where its snapshot files go)."""
    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(cache_dir))
    return MemCompile(None, records_url=url, chroma_url=chroma_url, dense=False, **kwargs)


@contextlib.contextmanager
def database(server_url: str):
    """A database of its own on the session's server (a clone needs no other session on its template)."""
    name = f"d_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield name, server_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pg(tool: str, *args: str) -> None:
    subprocess.run([str(BINDIR / tool), *args], check=True, capture_output=True, timeout=120)


def db_args(db_url: str) -> list[str]:
    """pg_dump/pg_restore connection options for a database URL of the test server."""
    parts = psycopg.conninfo.conninfo_to_dict(db_url)
    return ["-h", parts["host"], "-p", str(parts["port"]), "-U", parts["user"], "-d", parts["dbname"]]


# --- finding 1: restore from backup -------------------------------------------------------------------------------


def test_a_restored_database_never_serves_what_the_restore_removed(tmp_path, monkeypatch, postgres_url, chroma_url):
    with database(postgres_url) as (_, db_url):
        url = f"{db_url}?schema=mem"
        a = worker(tmp_path / "a", monkeypatch, url, chroma_url)
        a.add_turns([turn("We adopted a beagle named Biscuit.", 1)], "u")
        b = worker(tmp_path / "b", monkeypatch, url, chroma_url)
        assert served(b, "u") == {"D1:1"}
        backup = tmp_path / "backup.dump"
        pg("pg_dump", "-Fc", "-n", "mem", "-f", str(backup), *db_args(db_url))
        a.add_turns([turn("My bank PIN is 4711.", 2)], "u")
        assert served(b, "u") == {"D1:1", "D1:2"}
        b.close()  # its snapshot file holds the PIN
        # the operator restores the backup into the same database (same cluster, database and schema)
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA mem CASCADE")
        pg("pg_restore", *db_args(db_url), str(backup))
        for n in range(3, 6):  # new writes push the version counter past the file's
            a.add_turns([turn(f"New turn {n} about the kayak trip.", n)], "u")
        assert held(a, "u") == {"D1:1", "D1:3", "D1:4", "D1:5"}
        again = worker(tmp_path / "b", monkeypatch, url, chroma_url)
        assert served(again, "u") == served(a, "u") == held(a, "u")
        assert "4711" not in again.compile("What is my PIN?", "u").text
        for mem in (a, again):
            mem.close()


# --- finding 2: clone ---------------------------------------------------------------------------------------------


def test_a_cloned_database_gets_its_own_identity_and_serves_only_its_records(
    tmp_path, monkeypatch, postgres_url, chroma_url
):
    with database(postgres_url) as (orig_name, orig_url), database(postgres_url) as (_, spare):
        url = f"{orig_url}?schema=mem"
        first = worker(tmp_path / "cache", monkeypatch, url, chroma_url)
        first.add_turns([turn("We adopted a beagle named Biscuit.", 1)], "u")
        original_id = first.engine.records.store_id()
        first.close()
        clone_name = spare.rsplit("/", 1)[1]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {clone_name}")
            conn.execute(f"CREATE DATABASE {clone_name} TEMPLATE {orig_name}")
        clone_url = f"{spare}?schema=mem"
        orig = worker(tmp_path / "cache", monkeypatch, url, chroma_url)  # one machine, one cache folder
        clone = worker(tmp_path / "cache", monkeypatch, clone_url, chroma_url)
        orig.add_turns([turn("My salary is 90k.", 2)], "u")
        clone.add_turns([turn("I signed up for a pottery class.", 3)], "u")
        for mem in (orig, clone):
            mem.close()
        clone = worker(tmp_path / "cache", monkeypatch, clone_url, chroma_url)
        orig = worker(tmp_path / "cache", monkeypatch, url, chroma_url)
        assert served(clone, "u") == {"D1:1", "D1:3"} and served(orig, "u") == {"D1:1", "D1:2"}
        assert "salary" not in clone.compile("What is my salary?", "u").text
        # the clone got an identity of its own on open: its own snapshot folder and Chroma collections
        assert orig.engine.records.store_id() == original_id != clone.engine.records.store_id()
        for mem in (orig, clone):
            mem.close()


def test_a_running_worker_refuses_to_write_once_another_re_keyed_the_records(
    tmp_path, monkeypatch, postgres_url, chroma_url
):
    with database(postgres_url) as (name, db_url):
        url = f"{db_url}?schema=mem"
        a = worker(tmp_path / "a", monkeypatch, url, chroma_url)
        a.add_turns([turn("We adopted a beagle named Biscuit.", 1)], "u")
        backup = tmp_path / "backup.dump"
        pg("pg_dump", "-Fc", "-n", "mem", "-f", str(backup), *db_args(db_url))
        with psycopg.connect(postgres_url, autocommit=True) as conn:  # restored into a database made anew
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        pg("pg_restore", *db_args(db_url), str(backup))
        b = worker(tmp_path / "b", monkeypatch, url, chroma_url)
        assert b.engine.records.store_id() != a.engine.store_id  # re-keyed when b opened it
        for write in (lambda: a.add_turns([turn("My bank PIN is 4711.", 2)], "u"), lambda: a.forget("u")):
            with pytest.raises(StoreError) as err:
                write()
            assert "open the store again" in str(err.value) and "\n" not in str(err.value)
        assert served(a, "u") == served(b, "u") == held(b, "u") == {"D1:1"}  # reading stays right
        for mem in (a, b):
            mem.close()


# --- finding 3: copy of a store directory on a shared Chroma server -----------------------------------------------


def test_a_copied_store_never_touches_the_originals_collections(tmp_path, chroma_url, embeddings):
    turns = [turn(f"Turn {n}: the kayak trip to lake {n}.", n) for n in range(1, 6)]
    original = MemCompile(tmp_path / "store", embeddings=embeddings, chroma_url=chroma_url)
    original.add_turns(turns, "u")
    original.close()
    shutil.copytree(tmp_path / "store", tmp_path / "copy")
    copy = MemCompile(tmp_path / "copy", embeddings=embeddings, chroma_url=chroma_url)
    original = MemCompile(tmp_path / "store", embeddings=embeddings, chroma_url=chroma_url)
    assert copy.compile("kayak trip", "u").packets  # its vectors are made again from its own records
    assert len(copy.engine.vectors.ids("u")) == 5
    copy.forget("u")
    assert len(original.engine.vectors.ids("u")) == 5 and served(original, "u") == held(original, "u")
    assert copy.engine.records.store_id() != original.engine.records.store_id()  # re-keyed when opened
    for mem in (original, copy):
        mem.close()


# --- finding 4: in memory is in memory ----------------------------------------------------------------------------


def test_an_in_memory_store_writes_nothing_to_disk(tmp_path, monkeypatch, embeddings):
    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 1)
    monkeypatch.chdir(tmp_path)
    mem = MemCompile(None, embeddings=embeddings)
    mem.add_turns([turn("My bank PIN is 4711.", 1), turn("We adopted a beagle.", 2)], "u")
    assert mem.compile("PIN", "u").packets
    mem.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --- finding 5: private data, private files -----------------------------------------------------------------------


def test_derived_files_are_private_whatever_the_umask(tmp_path, monkeypatch, postgres_url, chroma_url):
    old = os.umask(0o002)
    try:
        url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
        mem = worker(tmp_path / "cache", monkeypatch, url, chroma_url)
        mem.add_turns([turn("My bank PIN is 4711.", 1)], "u")
        mem.close()
        local = MemCompile(tmp_path / "store", dense=False)
        local.add_turns([turn("My bank PIN is 4711.", 1)], "u")
        local.close()
    finally:
        os.umask(old)
    snapshots = tmp_path / "cache" / "snapshots"
    derived = [snapshots, *snapshots.rglob("*"), tmp_path / "store" / "snapshots"]
    derived += [*(tmp_path / "store" / "snapshots").iterdir(), *(tmp_path / "store" / "locks").glob("writers-*")]
    assert any(p.is_file() for p in derived) and any(p.name.endswith(".snapshot") for p in derived)
    modes = {str(p): oct(p.stat().st_mode & 0o777) for p in derived}
    assert modes == {str(p): "0o700" if p.is_dir() else "0o600" for p in derived}


# --- finding 6: forget leaves no traces ---------------------------------------------------------------------------


def test_no_file_names_a_user_and_forget_leaves_nothing_of_it(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 1)
    mem = MemCompile(tmp_path / "store", dense=False)
    user = "alice@example.com"
    mem.add_turns([turn("My bank PIN is 4711.", 1)], user)
    names = [p.name for p in (tmp_path / "store").rglob("*")]
    assert not any(user_key(user) in n for n in names if not n.endswith(".snapshot"))  # locks name no user
    mem.forget(user)
    names = [p.name for p in (tmp_path / "store").rglob("*")]
    assert not any(user_key(user) in n for n in names)
    mem.close()


def test_a_running_worker_drops_the_files_of_a_user_forgotten_elsewhere(
    tmp_path, monkeypatch, postgres_url, chroma_url
):
    url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
    a = worker(tmp_path / "a", monkeypatch, url, chroma_url)
    a.add_turns([turn("My bank PIN is 4711.", 1)], "u")
    b = worker(tmp_path / "b", monkeypatch, url, chroma_url)
    assert served(b, "u") == {"D1:1"}
    b.close()
    b = worker(tmp_path / "b", monkeypatch, url, chroma_url)  # running, its file of the user read
    assert served(b, "u") == {"D1:1"}
    assert [p for p in (tmp_path / "b").rglob("*.snapshot") if user_key("u") in p.name]
    a.forget("u")  # on another machine
    assert b.compile("PIN", "u").packets == []
    assert not [p for p in (tmp_path / "b").rglob("*") if user_key("u") in p.name]
    assert b.host.cache.state("u") is None
    for mem in (a, b):
        mem.close()


# --- finding 7: no leftovers, no growth ---------------------------------------------------------------------------


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]).returncode == 0


def test_a_snapshot_write_on_a_full_disk_leaves_no_temporary_file(tmp_path, monkeypatch, postgres_url, chroma_url):
    full = tmp_path / "full"
    if not _mount_tmpfs(full, "96k"):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
        mem = worker(full, monkeypatch, url, chroma_url)
        mem.add_turns([turn(f"Turn {n}: " + "the long kayak trip to the lake " * 20, n) for n in range(1, 80)], "u")
        before = shutil.disk_usage(full).free
        mem.close()  # the snapshot file does not fit: logged, and the next start rebuilds from the records
        assert not list(full.rglob("*.tmp")) and shutil.disk_usage(full).free >= before
        again = worker(full, monkeypatch, url, chroma_url)
        assert served(again, "u") == held(again, "u") and len(held(again, "u")) == 79
        again.close()
    finally:
        subprocess.run(["umount", str(full)], check=False)


def test_a_read_only_cache_folder_is_read_and_never_an_error(tmp_path, monkeypatch, postgres_url, chroma_url):
    folder = tmp_path / "ro"
    if not _mount_tmpfs(folder, "4m"):
        pytest.skip("needs root to mount a tmpfs")
    try:
        url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
        mem = worker(folder, monkeypatch, url, chroma_url)
        for user in ("u", "v"):
            mem.add_turns([turn(f"{user}: we adopted a beagle named Biscuit.", 1)], user)
        mem.close()  # both users' files are saved there
        elsewhere = worker(tmp_path / "other", monkeypatch, url, chroma_url)
        elsewhere.forget("u")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        again = worker(folder, monkeypatch, url, chroma_url)  # its sweep cannot remove u's file: logged, not raised
        assert again.compile("beagle", "u").packets == [] and served(again, "v") == {"D1:1"}
        again.add_turns([turn("v: Biscuit learned to swim.", 2)], "v")
        assert served(again, "v") == {"D1:1", "D1:2"}
        for m in (again, elsewhere):
            m.close()  # a file that cannot be saved is logged, and rebuilt from the records next time
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_the_sweep_removes_abandoned_temporary_files_and_earlier_formats_of_a_local_store(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 1)
    mem = MemCompile(tmp_path / "store", dense=False)
    mem.add_turns([turn("We adopted a beagle named Biscuit.", 1)], "u")
    files = mem.host.cache.files
    current = files.path("u")
    mac, head, payload = current.read_bytes().split(b"\n", 2)
    earlier = json.dumps({**json.loads(head), "format": 1}).encode()
    (files.folder / "u.earlier.snapshot").write_bytes(mac + b"\n" + earlier + b"\n" + payload)
    dead = _dead_pid()
    (files.folder / f"{current.name}.{dead}.tmp").write_bytes(b"half a file")
    mine = files.folder / f"{current.name}.{os.getpid()}.tmp"
    mine.write_bytes(b"being written by a live process")
    mem.close()
    again = MemCompile(tmp_path / "store", dense=False)
    assert sorted(p.name for p in files.folder.iterdir()) == sorted([current.name, mine.name])
    assert served(again, "u") == {"D1:1"}
    again.close()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_writer_locks_of_users_are_not_kept_after_their_writes(tmp_path):
    mem = MemCompile(tmp_path / "store", dense=False)
    for n in range(40):
        mem.add_turns([turn(f"Turn of user {n}.", 1)], f"user-{n}")
    assert len(mem.engine.records._writers._locks) == 0
    assert len(list((tmp_path / "store" / "locks").glob("writers-*.lock"))) <= sqlite_records.WRITER_STRIPES
    mem.close()


def test_users_on_one_stripe_wait_on_each_other_across_store_objects_only(tmp_path):
    """Within one store object the per-user locks keep writers apart; a stripe's file lock is shared by its users
    there, and excludes them only where the per-user locks do not reach (another object, another process)."""
    mine = MemCompile(tmp_path / "store", dense=False).engine.records
    other = MemCompile(tmp_path / "store", dense=False).engine.records
    stripe = mine.writer_lock_path("u")
    same = next(f"v{n}" for n in range(100_000) if mine.writer_lock_path(f"v{n}") == stripe)
    apart = next(f"w{n}" for n in range(100_000) if mine.writer_lock_path(f"w{n}") != stripe)
    results: dict[str, bool] = {}

    def try_lock(records, user: str, name: str) -> None:
        with records.write_lock(user, blocking=False) as held:
            results[name] = held

    with mine.write_lock("u"):
        for records, user, name in ((mine, same, "same stripe, same object"), (mine, "u", "same user")):
            t = threading.Thread(target=try_lock, args=(records, user, name))
            t.start()
            t.join()
        try_lock(other, same, "same stripe, other object")
        try_lock(other, apart, "other stripe, other object")
    try_lock(other, same, "same stripe, other object, released")
    assert results == {
        "same stripe, same object": True,
        "same user": False,
        "same stripe, other object": False,
        "other stripe, other object": True,
        "same stripe, other object, released": True,
    }
    assert not mine._stripes._stripes[stripe].users  # the last user of the stripe let its file lock go


def test_a_hand_restored_sqlite_file_is_seen_by_a_running_worker(tmp_path):
    """A restore under a running worker (the SQLite backup API writes the old pages into the live file)."""
    mem = MemCompile(tmp_path / "store", dense=False)
    mem.add_turns([turn("We adopted a beagle named Biscuit.", 1)], "u")
    backup = sqlite3.connect(tmp_path / "backup.sqlite3")
    live = sqlite3.connect(tmp_path / "store" / sqlite_records.FILE)
    live.backup(backup)
    mem.add_turns([turn("My bank PIN is 4711.", 2)], "u")
    assert served(mem, "u") == {"D1:1", "D1:2"}
    backup.backup(live)
    for conn in (backup, live):
        conn.close()
    other = MemCompile(tmp_path / "store", dense=False)
    for n in range(3, 5):
        other.add_turns([turn(f"New turn {n} about the kayak trip.", n)], "u")
    assert served(mem, "u") == held(mem, "u") == {"D1:1", "D1:3", "D1:4"}
    for m in (mem, other):
        m.close()


# --- the property: whatever the operator does, a worker serves exactly what its records hold ----------------------

USERS = ("u", "v")
WRITE = st.tuples(st.just("write"), st.integers(0, 1), st.sampled_from(USERS), st.integers(1, 3))
STEP = st.one_of(
    WRITE,
    WRITE,  # thrice as likely: restored versions are overtaken only by writes
    WRITE,
    st.tuples(st.just("forget"), st.integers(0, 1), st.sampled_from(USERS)),
    st.tuples(st.just("backup"), st.integers(0, 1)),
    st.tuples(st.just("restore"), st.integers(0, 1)),
    st.tuples(st.just("clone"), st.integers(0, 1)),
    st.tuples(st.just("restart"), st.integers(0, 1)),
    st.tuples(st.just("swap"), st.integers(0, 1)),
)


class Workers:
    """Two workers, each with a cache folder of its own (as two machines), on SQLite records that an operator backs
    up, restores under them (the backup API writes the old pages into the live file) and clones (copies the store
    directory); `models` is what each store's records hold, per user."""

    def __init__(self, root: Path):
        self.root, self.turns = root, 0
        first = root / "store-0"
        self.models: dict[Path, dict[str, set[str]]] = {first: {u: set() for u in USERS}}
        self.backups: dict[Path, tuple[Path, dict[str, set[str]]]] = {}
        self.stores = [first, first]
        self.mems = [self.open(0), self.open(1)]

    def open(self, i: int) -> MemCompile:
        mem = MemCompile(self.stores[i], dense=False)
        # the worker's own cache folder, the same whichever store it serves: files of a clone's original or of a
        # restored store's past meet it there
        mem.host.cache.files.folder = self.root / f"cache-{i}"
        return mem

    def run(self, step: tuple) -> None:
        kind, i = step[0], step[1]
        store, mem = self.stores[i], self.mems[i]
        if kind == "write":
            user, n = step[2], step[3]
            new = [turn(f"Turn {self.turns + k} about lake {self.turns + k}.", self.turns + k) for k in range(n)]
            self.turns += n
            mem.add_turns(new, user)
            self.models[store][user] |= {t["dia_id"] for t in new}
        elif kind == "forget":
            mem.forget(step[2])
            self.models[store][step[2]] = set()
        elif kind == "backup":
            target = self.root / f"backup-{len(self.backups)}-{uuid.uuid4().hex[:6]}.sqlite3"
            with contextlib.closing(sqlite3.connect(store / sqlite_records.FILE)) as live:
                with contextlib.closing(sqlite3.connect(target)) as copy:
                    live.backup(copy)
            self.backups[store] = (target, {u: set(t) for u, t in self.models[store].items()})
        elif kind == "restore" and store in self.backups:
            source, model = self.backups[store]
            with contextlib.closing(sqlite3.connect(source)) as backup:
                with contextlib.closing(sqlite3.connect(store / sqlite_records.FILE)) as live:
                    backup.backup(live)
            self.models[store] = {u: set(t) for u, t in model.items()}
        elif kind == "clone":
            mem.close()
            with contextlib.closing(sqlite3.connect(store / sqlite_records.FILE)) as live:
                live.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            copy = self.root / f"store-{len(self.models)}"
            shutil.copytree(store, copy, ignore=shutil.ignore_patterns("*-shm", "*-wal"))
            self.models[copy] = {u: set(t) for u, t in self.models[store].items()}
            self.stores[i] = copy
            self.mems[i] = self.open(i)
        elif kind in ("restart", "swap"):  # swap: the worker moves to the other's store (a redeploy)
            mem.close()
            if kind == "swap":
                self.stores[i] = self.stores[1 - i]
            self.mems[i] = self.open(i)

    def check(self) -> None:
        for store, mem in zip(self.stores, self.mems):
            for user in USERS:
                assert served(mem, user) == self.models[store][user], (store.name, user)

    def close(self) -> None:
        for mem in self.mems:
            mem.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=20))
# two the search may take long to meet: a restore overtaken by new writes under a running worker's cache; a
# worker whose cache folder holds a clone's file of the same versions as the original's records
@example([("write", 0, "u", 1), ("backup", 0), ("write", 0, "u", 1), ("restore", 0), ("write", 0, "u", 1)])
@example([("write", 0, "u", 1), ("clone", 1), ("write", 1, "u", 1), ("restart", 1), ("write", 0, "u", 1), ("swap", 1)])
def test_no_artefact_serves_a_turn_its_records_do_not_hold_and_every_held_turn_is_served(steps):
    with tempfile.TemporaryDirectory() as tmp:
        workers = Workers(Path(tmp))
        try:
            for step in steps:
                workers.run(step)
                workers.check()
        finally:
            workers.close()


def test_a_hand_edited_row_is_never_served_from_a_cache_or_a_file(backend, tmp_path):
    from support.record_backends import Where

    where = Where(backend.path or tmp_path / "vectors", backend.url)
    mem = where.memory(dense=False)
    texts = ["We adopted a beagle named Biscuit.", "We bought a red kayak.", "I signed up for a pottery class."]
    mem.add_turns([turn(t, n) for n, t in enumerate(texts, 1)], "u")

    def text(m: MemCompile, dia_id: str) -> str:
        index = m.index("u")
        return index.packets[index.by_dia[dia_id]].text

    assert text(mem, "D1:2") == texts[1]
    backend.sql("UPDATE packets SET text = 'We sold the kayak.' WHERE dia_id = 'D1:2'")
    assert text(mem, "D1:2") == "We sold the kayak."
    backend.sql("DELETE FROM descriptors WHERE dia_id = 'D1:1'", "DELETE FROM packets WHERE dia_id = 'D1:1'")
    assert served(mem, "u") == held(mem, "u") == {"D1:2", "D1:3"}
    mem.close()  # its snapshot file is current
    backend.sql("UPDATE packets SET text = 'The pottery class was cancelled.' WHERE dia_id = 'D1:3'")
    again = where.memory(dense=False)
    assert text(again, "D1:3") == "The pottery class was cancelled."
    again.add_turns([turn("Biscuit learned to swim.", 4)], "u")  # the chain goes on from the edited records
    assert served(again, "u") == {"D1:2", "D1:3", "D1:4"}
    again.close()


# --- vectors built from what the records hold ---------------------------------------------------------------------

KAYAK = ["We adopted a beagle named Biscuit.", "We bought a red kayak.", "I signed up for a pottery class."]
EDIT = "UPDATE packets SET text = 'Grandma knitted me a green scarf.' WHERE dia_id = 'D1:2'"


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def dense_vector(mem: MemCompile, dia_id: str):
    """The vector the dense channel compares queries with for a turn of user u (None: it has none)."""
    index = mem.index("u")
    pid = index.by_dia[dia_id]
    return index.vectors.matrix()[index.vectors.row[pid]] if pid in index.vectors.row else None


def stored_vector(mem: MemCompile, dia_id: str):
    ids, vectors = mem.engine.vectors.vectors("u", [mem.index("u").by_dia[dia_id]])
    return vectors[0] if ids else None


def embedded_now(mem: MemCompile, embeddings, dia_id: str):
    """The embedding of the turn's packet document as the records hold it now."""
    index = mem.index("u")
    pid = index.by_dia[dia_id]
    document = mem.engine.documents(bundles(index, [pid]))[0]
    assert "green scarf" in document
    return embeddings.embed_documents([document])[0]


def test_a_hand_edited_packet_is_served_with_a_vector_of_its_new_text(backend, tmp_path, chroma_url, embeddings):
    from support.record_backends import Where

    where = Where(backend.path or tmp_path / "store", backend.url)
    mem = where.memory(embeddings=embeddings, chroma_url=chroma_url)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    old = dense_vector(mem, "D1:2")
    mem.close()  # its snapshot file (vectors included) is current
    backend.sql(EDIT)
    again = where.memory(embeddings=embeddings, chroma_url=chroma_url)
    new = embedded_now(again, embeddings, "D1:2")
    assert cosine(new, old) < 0.9  # the two texts are far apart: a tolerance cannot mistake one for the other
    assert cosine(dense_vector(again, "D1:2"), new) > 0.999 and cosine(stored_vector(again, "D1:2"), new) > 0.999
    again.close()


def test_a_reader_leaves_many_edited_vectors_to_the_writer_and_serves_none_of_them(
    tmp_path, monkeypatch, chroma_url, embeddings
):
    monkeypatch.setattr(consistency, "READER_REPAIR_LIMIT", 0)  # as for a user with many edited rows
    mem = MemCompile(tmp_path / "store", embeddings=embeddings, chroma_url=chroma_url)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    sqlite_sql(tmp_path / "store", EDIT)
    asked: list[str] = []
    start = upgrade.Jobs.start
    monkeypatch.setattr(upgrade.Jobs, "start", lambda jobs, user_id: asked.append(user_id))  # the job not run yet
    assert dense_vector(mem, "D1:2") is None and stored_vector(mem, "D1:2") is None  # neither index nor store
    assert mem.compile("green scarf", "u").trace["dense"]["hits"] == 2  # the query falls back on the store
    assert asked == ["u"]  # the read left the vector to the re-embed job
    monkeypatch.setattr(upgrade.Jobs, "start", start)
    mem.add_turns([turn("Biscuit learned to swim.", 4)], "u")  # the user's next writer starts the job again
    assert mem.host.cache.reembeds.wait(60)
    new = embedded_now(mem, embeddings, "D1:2")
    assert cosine(dense_vector(mem, "D1:2"), new) > 0.999 and cosine(stored_vector(mem, "D1:2"), new) > 0.999
    mem.close()


def test_a_vector_of_other_content_is_not_served_while_a_writer_holds_the_user(tmp_path, chroma_url, embeddings):
    mem = MemCompile(tmp_path / "store", embeddings=embeddings, chroma_url=chroma_url)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    sqlite_sql(tmp_path / "store", EDIT)
    holding, done = threading.Event(), threading.Event()

    def writer() -> None:
        with mem.engine.records.write_lock("u"):
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(30)
        # the reader cannot repair: the edited packet's old vector is still in the store, and the query asks it
        assert stored_vector(mem, "D1:2") is not None and dense_vector(mem, "D1:2") is None
        assert mem.compile("green scarf", "u").trace["dense"]["hits"] == 2
    finally:
        done.set()
        thread.join()
    new = embedded_now(mem, embeddings, "D1:2")  # the next read repairs
    assert cosine(dense_vector(mem, "D1:2"), new) > 0.999
    mem.close()


def test_vectors_written_before_sources_are_made_again_once(tmp_path, embeddings):
    mem = MemCompile(tmp_path / "store", embeddings=embeddings)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    vectors = mem.engine.vectors
    ids, stored = vectors.vectors("u")
    dia_ids = [mem.index("u").packets[i].dia_id for i in ids]
    vectors.drop("u")
    vectors.upsert("u", ids, stored, dia_ids)  # as an earlier version wrote them: no source
    assert set(vectors.sources("u").values()) == {None}
    mem.close()
    sqlite_sql(tmp_path / "store", EDIT)
    again = MemCompile(tmp_path / "store", embeddings=embeddings)
    new = embedded_now(again, embeddings, "D1:2")
    assert cosine(dense_vector(again, "D1:2"), new) > 0.999
    assert None not in again.engine.vectors.sources("u").values() and len(again.engine.vectors.ids("u")) == 3
    again.close()


def test_many_vectors_written_before_sources_are_left_to_repair_never_to_a_writer(
    tmp_path, embeddings, monkeypatch, caplog
):
    monkeypatch.setattr(consistency, "READER_REPAIR_LIMIT", 1)  # as for a large user stored before sources
    mem = MemCompile(tmp_path / "store", embeddings=embeddings)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    vectors = mem.engine.vectors
    ids, stored = vectors.vectors("u")
    dia_ids = [mem.index("u").packets[i].dia_id for i in ids]
    vectors.drop("u")
    vectors.upsert("u", ids, stored, dia_ids)  # as an earlier version wrote them: no source
    mem.close()
    for snapshot in (tmp_path / "store" / "snapshots").iterdir():
        snapshot.unlink()  # a full load, the one that checks the vectors
    again = MemCompile(tmp_path / "store", embeddings=embeddings)
    made = []
    real = again.engine.embeddings.embed_documents
    monkeypatch.setattr(
        again.engine.embeddings, "embed_documents", lambda texts: made.append(len(texts)) or real(texts)
    )
    with caplog.at_level(logging.WARNING):
        assert again.compile("green scarf", "u").trace["dense"]["hits"] == 3  # served as they are
        again.add_turns([turn("Biscuit learned to swim.", 4)], "u")
    assert "memcompile repair" in caplog.text
    assert sum(made) <= 3  # the query's and the new turn's documents: none of the old vectors made again
    assert list(again.engine.vectors.sources("u").values()).count(None) == 3
    again.repair("u")
    assert None not in again.engine.vectors.sources("u").values() and len(again.engine.vectors.ids("u")) == 4
    assert len(again.index("u").vectors) == 4
    again.close()


def sqlite_sql(store: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(store / sqlite_records.FILE)) as conn, conn:
        for s in statements:
            conn.execute(s)


# --- a running worker sweeps on its own ---------------------------------------------------------------------------


def test_a_running_worker_sweeps_users_forgotten_elsewhere_that_it_never_touches_again(
    tmp_path, monkeypatch, postgres_url, chroma_url
):
    url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
    a = worker(tmp_path / "a", monkeypatch, url, chroma_url)
    for user in ("u", "v"):
        a.add_turns([turn(f"{user}: my bank PIN is 4711.", 1)], user)
    b = worker(tmp_path / "b", monkeypatch, url, chroma_url)
    assert served(b, "u") == served(b, "v") == {"D1:1"}
    b.close()  # its files of both users are saved
    b = worker(tmp_path / "b", monkeypatch, url, chroma_url)
    # a period after the sweep at open, however long the open took: the next call sweeps (nothing to remove yet) and
    # the periods below count from that sweep
    now = [time.monotonic() + cache_module.SWEEP_EVERY]
    b.host.cache.clock = lambda: now[0]
    assert served(b, "u") == {"D1:1"}  # held in its cache too

    def traces(user: str) -> list[Path]:
        return [p for p in (tmp_path / "b").rglob("*") if user_key(user) in p.name]

    assert traces("u") and traces("v")
    a.forget("u")  # on another machine; b is never asked about u again
    now[0] += cache_module.SWEEP_EVERY - 1
    assert b.compile("PIN", "v").packets
    assert traces("u") and b.host.cache.state("u") is not None  # not swept on every call
    now[0] += 1
    assert b.compile("PIN", "v").packets  # an ordinary call for another user sweeps
    assert not traces("u") and b.host.cache.state("u") is None
    assert traces("v") and served(b, "v") == {"D1:1"}
    a.forget("v")
    now[0] += cache_module.SWEEP_EVERY
    b.add_turns([turn("w: we adopted a beagle.", 1)], "w")  # a write sweeps as well
    assert not traces("v") and b.host.cache.state("v") is None
    for mem in (a, b):
        mem.close()


# --- rows put back by hand, a schema renamed ----------------------------------------------------------------------


def test_rows_restored_by_hand_with_their_digests_are_served_by_every_worker(backend, tmp_path):
    """A backup's rows carry their digests: inserting them back must still tell every cached index and snapshot
    file that the records changed (on main only rows without a digest did, and descriptors never)."""
    from support.record_backends import Where

    where = Where(backend.path or tmp_path / "vectors", backend.url)
    mem = where.memory(dense=False)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    saved = {
        t: where.rows(f"SELECT * FROM {t} WHERE user_id = 'u' AND dia_id = 'D1:2'") for t in ("packets", "descriptors")
    }
    assert saved["packets"] and saved["descriptors"]
    backend.sql("DELETE FROM descriptors WHERE dia_id = 'D1:2'", "DELETE FROM packets WHERE dia_id = 'D1:2'")
    assert served(mem, "u") == {"D1:1", "D1:3"}
    other = where.memory(dense=False)  # a second worker, its index and snapshot file current without D1:2
    assert served(other, "u") == {"D1:1", "D1:3"}
    mem.close()

    def literal(value) -> str:
        return (
            "NULL"
            if value is None
            else repr(value)
            if isinstance(value, (int, float))
            else "'" + str(value).replace("'", "''") + "'"
        )

    backend.sql(
        *(
            f"INSERT INTO {t} VALUES ({', '.join(map(literal, row))})"
            for t in ("packets", "descriptors")
            for row in saved[t]
        )
    )
    assert served(other, "u") == {"D1:1", "D1:2", "D1:3"}
    assert "kayak" in other.compile("What did we buy?", user_id="u").text.lower()
    reopened = where.memory(dense=False)  # from the snapshot file the first worker left
    assert served(reopened, "u") == {"D1:1", "D1:2", "D1:3"}
    reopened.add_turns([turn("Biscuit learned to swim.", 4)], "u")
    assert served(reopened, "u") == served(other, "u") == {"D1:1", "D1:2", "D1:3", "D1:4"}
    other.close()
    reopened.close()


def test_a_store_whose_schema_is_renamed_keeps_writing(postgres_url, tmp_path, monkeypatch):
    schema = f"s_{uuid.uuid4().hex[:10]}"
    url = f"{postgres_url}?schema={schema}" if "?" not in postgres_url else f"{postgres_url}&schema={schema}"
    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(tmp_path / "cache"))
    mem = MemCompile(None, records_url=url, dense=False)
    mem.add_turns([turn(KAYAK[0], 1)], "u")
    mem.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"ALTER SCHEMA {schema} RENAME TO {schema}_moved")
    moved = MemCompile(None, records_url=url.replace(schema, f"{schema}_moved"), dense=False)
    moved.add_turns([turn(KAYAK[1], 2)], "u")  # on main: UndefinedTable from the trigger functions
    moved.delete_turns("u", ["D1:1"])
    assert held(moved, "u") == served(moved, "u") == {"D1:2"}
    moved.close()


# --- what a moved store leaves behind -----------------------------------------------------------------------------


def _collections(chroma_url: str, store_id: str) -> list[str]:
    import chromadb

    host, port = chroma_url.rsplit("/", 1)[-1].rsplit(":", 1)
    client = chromadb.HttpClient(host=host, port=int(port))
    names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
    return [n for n in names if n.startswith(f"mc{store_id[:12]}_")]  # the store's namespace on the server


def test_a_moved_schema_leaves_no_snapshot_folder_or_collections_under_its_old_id(
    tmp_path, monkeypatch, postgres_url, chroma_url, embeddings
):
    schema = f"s_{uuid.uuid4().hex[:10]}"
    url = f"{postgres_url}?schema={schema}"
    monkeypatch.setenv("MEMCOMPILE_CACHE_DIR", str(tmp_path / "cache"))
    first = MemCompile(None, records_url=url, chroma_url=chroma_url, embeddings=embeddings)
    first.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    old_id = first.engine.records.store_id()
    first.close()  # its snapshot file and its collection, under the old id
    old_folder = tmp_path / "cache" / "snapshots" / old_id
    assert list(old_folder.glob("*.snapshot")) and _collections(chroma_url, old_id)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"ALTER SCHEMA {schema} RENAME TO {schema}_moved")
    moved = MemCompile(
        None, records_url=url.replace(schema, f"{schema}_moved"), chroma_url=chroma_url, embeddings=embeddings
    )
    assert moved.engine.records.store_id() != old_id
    assert not old_folder.exists() and _collections(chroma_url, old_id) == []
    assert "kayak" in moved.compile("What did we buy?", "u").text.lower()
    assert moved.engine.records.moved() == []
    moved.close()


def test_a_sqlite_file_restored_into_place_leaves_nothing_under_its_old_id(tmp_path, chroma_url, embeddings):
    store = tmp_path / "store"
    mem = MemCompile(store, embeddings=embeddings, chroma_url=chroma_url)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    old_id = mem.engine.records.store_id()
    mem.close()
    records = store / sqlite_records.FILE
    shutil.copy2(records, tmp_path / "backup.sqlite3")
    records.rename(tmp_path / "damaged.sqlite3")  # kept: its inode is not given to the restored file
    shutil.copy2(tmp_path / "backup.sqlite3", records)  # a new file (inode) in the same place
    assert _collections(chroma_url, old_id) and list((store / "snapshots").glob("*.snapshot"))
    again = MemCompile(store, embeddings=embeddings, chroma_url=chroma_url)
    new_id = again.engine.records.store_id()
    assert new_id != old_id and _collections(chroma_url, old_id) == []
    assert served(again, "u") == {"D1:1", "D1:2", "D1:3"} and len(again.engine.vectors.ids("u")) == 3
    again.close()


def test_a_copied_sqlite_store_keeps_the_originals_collections(tmp_path, chroma_url, embeddings):
    mem = MemCompile(tmp_path / "store", embeddings=embeddings, chroma_url=chroma_url)
    mem.add_turns([turn(t, n) for n, t in enumerate(KAYAK, 1)], "u")
    old_id = mem.engine.records.store_id()
    mem.close()
    shutil.copytree(tmp_path / "store", tmp_path / "copy")
    copy = MemCompile(tmp_path / "copy", embeddings=embeddings, chroma_url=chroma_url)
    assert copy.engine.records.store_id() != old_id and copy.engine.records.moved() == []
    assert len(_collections(chroma_url, old_id)) == 1  # the original's, untouched
    copy.close()
