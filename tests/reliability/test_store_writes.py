"""MemCompileStore's writes on SQLite and PostgreSQL: a replace is one transaction (no reader ever sees the key
empty, a put that fails midway keeps the old value), every write of an item is ordered against forget (a forget
that lands inside a put leaves no byte), concurrent puts of one key leave one whole value, and an expired item is
forgotten as delete forgets it."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from memcompile_langgraph.integrations.base_store import MemCompileStore
from memcompile_langgraph.store.protocols import StoreError

NS = ("ann",)
SECRET = "zqxwv PIN 4321"  # in the forgotten item only


def _open(backend, tmp_path):
    where = backend.where(tmp_path / "store")
    return where, MemCompileStore(where.memory(dense=False))


def _hits(where, *needles: str) -> list[str]:
    """Tables of the records, and for SQLite the files of the store directory, that hold any of the needles."""
    found = [t for t, rows in where.tables().items() for n in needles if n in json.dumps(rows, default=repr)]
    if where.url is None:
        raw = [n.encode() for n in needles]
        found += [str(p) for p in where.path.rglob("*") if p.is_file() for n in raw if n in p.read_bytes()]
    return found


def test_readers_never_see_a_replaced_key_missing(backend, tmp_path):
    where, store = _open(backend, tmp_path)
    values = [{"text": f"version {n} of the note, about topic {n}"} for n in range(7)]
    store.put(NS, "note", values[0])
    seen, stop = [], threading.Event()

    def read() -> None:
        while not stop.is_set():
            item = store.get(NS, "note")
            seen.append(None if item is None else item.value)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for value in values[1:]:
            store.put(NS, "note", value)
    finally:
        stop.set()
        reader.join()
    assert seen and all(v in values for v in seen)  # never missing, never half of a replace
    assert store.get(NS, "note").value == values[-1]
    assert len(store.memory.turns("ann")) == 1
    store.memory.close()


def test_a_put_that_fails_midway_keeps_the_old_value(backend, tmp_path, monkeypatch):
    where, store = _open(backend, tmp_path)
    store.put(NS, "note", {"text": "The old value of the note."})
    records = store.memory.engine.records

    def failing_commit(*args, **kwargs):
        raise StoreError("the disk is full")

    monkeypatch.setattr(records, "commit", failing_commit)
    with pytest.raises(StoreError):
        store.put(NS, "note", {"text": "A new value that never arrives."})
    monkeypatch.undo()
    assert store.get(NS, "note").value == {"text": "The old value of the note."}
    assert [i.key for i in store.search(NS, query="old value of the note")] == ["note"]
    store.memory.close()


def test_a_forget_landing_inside_a_put_leaves_no_byte(backend, tmp_path, monkeypatch):
    where, store = _open(backend, tmp_path)
    mem = store.memory
    store.put(NS, "other", {"text": "I like tea."})
    records = mem.engine.records
    commit, put_items = records.commit, records.put_items
    forgetting: list[threading.Thread] = []

    def commit_then_forget(*args, **kwargs):
        version = commit(*args, **kwargs)
        if not forgetting:  # the forget starts while the put is under way, and gets as far as it can
            forgetting.append(threading.Thread(target=mem.forget, args=("ann",)))
            forgetting[0].start()
            forgetting[0].join(0.5)
        return version

    def items_after_forget(*args, **kwargs):
        if forgetting:
            forgetting[0].join(5)  # whatever the put writes after its packet goes in after the forget
        return put_items(*args, **kwargs)

    monkeypatch.setattr(records, "commit", commit_then_forget)
    monkeypatch.setattr(records, "put_items", items_after_forget)
    store.put(NS, "pin", {"text": f"My bank {SECRET}.", "tag": SECRET})
    forgetting[0].join()
    monkeypatch.undo()
    assert store.get(NS, "pin") is None and mem.turns("ann") == []
    assert _hits(where, SECRET, "zqxwv") == []
    mem.close()


def test_concurrent_puts_of_one_key_leave_one_whole_value_threads_and_asyncio(backend, tmp_path):
    where, store = _open(backend, tmp_path)
    values = [{"v": i, "text": f"Note number {i} says {'abcd'[i]}."} for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda v: store.put(("t",), "k", v), values))  # none raises
    assert store.get(("t",), "k").value in values and len(store.memory.turns("t")) == 1

    async def puts() -> None:
        await asyncio.gather(*(store.aput(("t",), "k", {**v, "async": True}) for v in values))

    asyncio.run(puts())
    assert store.get(("t",), "k").value in [{**v, "async": True} for v in values]
    assert len(store.memory.turns("t")) == 1
    store.memory.close()


def _put_in_process(path: str, url: str | None, i: int) -> None:
    from memcompile_langgraph import MemCompile

    mem = MemCompile(path, records_url=url or "", dense=False)
    try:
        MemCompileStore(mem).put(("t",), "k", {"v": i, "text": f"Note number {i} from process {i}."})
    finally:
        mem.close()


def test_concurrent_puts_of_one_key_from_processes(backend, tmp_path):
    where, store = _open(backend, tmp_path)
    store.memory.close()
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=_put_in_process, args=(str(where.path), where.url, i)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    mem = where.memory(dense=False)
    value = MemCompileStore(mem).get(("t",), "k").value
    assert value["v"] in range(3) and value["text"] == f"Note number {value['v']} from process {value['v']}."
    assert len(mem.turns("t")) == 1
    mem.close()


def test_an_expired_item_is_forgotten_as_delete_forgets(backend, tmp_path):
    where, store = _open(backend, tmp_path)
    mem = store.memory
    store.put(NS, "pin", {"text": f"My bank {SECRET}."}, ttl=0.05)  # 3 seconds
    assert store.get(NS, "pin", refresh_ttl=False) is not None
    store.put(NS, "kept", {"text": "I like tea."})
    turn = {"speaker": "Ann", "text": "A zqxwv turn that lives three seconds.", "time": "2024-03-04"}
    mem.add_turns([turn], "ann", ttl=0.05)
    time.sleep(3.5)
    assert store.get(NS, "pin") is None  # hidden once expired, before any sweep
    assert [i.key for i in store.search(NS)] == ["kept"]
    assert store.sweep_ttl() == 2
    assert [t.packet.text for t in mem.turns("ann")] == ["I like tea."]
    assert _hits(where, SECRET, "zqxwv") == []
    mem.close()
