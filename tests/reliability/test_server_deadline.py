"""A Chroma server that accepts connections and never answers: with the default setting, a query answers from the
lexical channels within a few seconds, saying why in one line, and the calls after it fail at once instead of each
waiting again. A PostgreSQL server that stops answering: each call fails within its deadline in one line. Real hung
sockets and a real stopped server, no mock."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from memcompile_langgraph import MemCompile
from memcompile_langgraph.store.protocols import StoreError, VectorStoreError

from .harness import synthetic_turns
from .test_chroma_server_faults import _silent_listener

pytestmark = pytest.mark.slow  # waits out the default deadline a few times
DEFAULT_TIMEOUT = 5  # seconds: the documented default of MEMCOMPILE_CHROMA_TIMEOUT


def test_a_query_against_a_hung_server_answers_within_the_default_deadline(tmp_path, embeddings, caplog, monkeypatch):
    monkeypatch.delenv("MEMCOMPILE_CHROMA_TIMEOUT", raising=False)  # the default is what is promised
    store = tmp_path / "store"
    turns = synthetic_turns("ann", 8)
    first = MemCompile(store, embeddings=embeddings)
    first.add_turns(turns, user_id="ann")  # the model is recorded
    first.close()
    shutil.rmtree(store / "snapshots")  # a worker with no snapshot file: the load asks the server for the vectors
    with _silent_listener() as url:
        mem = MemCompile(store, embeddings=embeddings, chroma_url=url)
        try:
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                started = time.monotonic()
                ctx = mem.compile(turns[0]["text"], user_id="ann")
                took = time.monotonic() - started
            assert took < 2 * DEFAULT_TIMEOUT + 3, took  # one deadline, not one per request or per stage
            assert ctx.packets, "the lexical channels answer without the vector store"
            said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(said) == 1 and "\n" not in said[0] and url in said[0], said
            # the next call within the deadline is not made to wait again
            started = time.monotonic()
            with pytest.raises(VectorStoreError):
                mem.engine.vectors.ids("ann")
            assert time.monotonic() - started < 1.0
        finally:
            mem.close()


@contextlib.contextmanager
def _stopped(cluster: dict[str, str]):
    """Every process of a running PostgreSQL cluster stopped (SIGSTOP): connections are still accepted and
    acknowledged by the kernel, and no answer ever comes, as from a server beyond a link that drops packets."""
    postmaster = int((Path(cluster["root"]) / "data" / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout.split()
    pids = [postmaster, *map(int, children)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # a backend that ended meanwhile
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _within(seconds: float, call):
    """call() in a thread: (what it returned or raised, how long it took), or a failure when it still waits after
    `seconds` (the thread is left to the server's return)."""
    done: dict = {}

    def run() -> None:
        started = time.monotonic()
        try:
            done["out"] = call()
        except Exception as exc:  # noqa: BLE001 - handed to the test to look at
            done["out"] = exc
        done["took"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert "took" in done, f"still waiting for the server after {seconds} s"
    return done["out"], done["took"]


@pytest.fixture
def own_cluster():
    """A PostgreSQL cluster of this test's own: it is stopped mid-test, which the shared one must never be."""
    from support.pg_server import missing, start_cluster, stop_cluster

    why = missing()
    if why:
        pytest.skip(why)
    cluster = start_cluster()
    yield cluster
    stop_cluster(cluster)


@pytest.fixture
def ann_on_own_cluster(tmp_path, own_cluster, monkeypatch):
    """(records URL, turns, memory): ann's turns stored on a cluster of this test's own, each statement bounded at
    2 s."""
    from support.pg_server import new_database

    monkeypatch.setenv("MEMCOMPILE_PG_TIMEOUT", "2")
    url = new_database(own_cluster["url"])
    turns = synthetic_turns("ann", 6)
    mem = MemCompile(tmp_path / "store", dense=False, records_url=url)
    try:
        mem.add_turns(turns, user_id="ann")
        yield url, turns, mem
    finally:
        mem.close()


def test_a_postgresql_server_that_stops_answering_fails_each_call_within_the_deadline(
    tmp_path, own_cluster, ann_on_own_cluster
):
    url, turns, mem = ann_on_own_cluster
    with _stopped(own_cluster):
        for call in (
            lambda: mem.compile(turns[0]["text"], user_id="ann"),
            lambda: mem.add_turns(synthetic_turns("bob", 2, seed=3), user_id="bob"),
            lambda: MemCompile(tmp_path / "other", dense=False, records_url=url),
        ):
            failed, took = _within(30, call)
            assert isinstance(failed, StoreError) and "\n" not in str(failed) and "PostgreSQL at" in str(failed)
            assert took < 2 * 2 + 3, took
    # the server answers again: so does the memory, with nothing lost
    assert mem.compile(turns[0]["text"], user_id="ann").packets and mem.users() == ["ann"]


def test_a_postgresql_server_frozen_while_a_memory_opens_fails_the_open_within_the_deadline(
    tmp_path, ann_on_own_cluster
):
    import psycopg

    url, turns, _ = ann_on_own_cluster
    # the schema statements start with the store's setup lock: held here, the opener's backend is found asking for
    # it again and again, inside its schema statements, and frozen there
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtextextended('memcompile/setup', 0))")
        frozen: list[int] = []

        def freeze() -> None:
            for _ in range(200):
                row = holder.execute(
                    "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE "
                    "'%advisory_xact_lock(hashtextextended%'"
                ).fetchone()
                if row:
                    os.kill(row[0], signal.SIGSTOP)
                    frozen.append(row[0])
                    return
                time.sleep(0.05)

        freezer = threading.Thread(target=freeze, daemon=True)
        freezer.start()
        try:
            failed, took = _within(15, lambda: MemCompile(tmp_path / "other", records_url=url))
        finally:
            freezer.join()
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
    assert frozen, "the open never reached its schema statements"
    said = str(failed)
    assert isinstance(failed, StoreError), failed
    assert "\n" not in said and "PostgreSQL at" in said and "MEMCOMPILE_PG_TIMEOUT" in said, said
    assert took < 2 * 2 + 3, took
    # the server answers again: the memory opens, with nothing lost
    mem = MemCompile(tmp_path / "other", dense=False, records_url=url)
    try:
        assert mem.users() == ["ann"] and mem.compile(turns[0]["text"], user_id="ann").packets
    finally:
        mem.close()


def test_a_memory_opening_while_another_process_sets_the_store_up_waits_for_it_past_the_deadline(
    tmp_path, ann_on_own_cluster
):
    import psycopg

    url, turns, _ = ann_on_own_cluster
    with psycopg.connect(url, autocommit=True) as holder:  # another process setting the store up, for 3 s
        holder.execute("SELECT pg_advisory_lock(hashtextextended('memcompile/setup', 0))")
        ends = threading.Timer(3, lambda: holder.execute("SELECT pg_advisory_unlock_all()"))
        ends.start()
        started = time.monotonic()
        mem = MemCompile(tmp_path / "other", dense=False, records_url=url)
        took = time.monotonic() - started
        ends.join()
    try:
        assert took > 2.5, took  # waited for it, though no statement may wait more than 2 s for its answer
        assert mem.compile(turns[0]["text"], user_id="ann").packets
    finally:
        mem.close()


def test_a_statement_the_server_does_not_answer_in_time_is_ended_in_one_line(postgres_url, monkeypatch):
    from support.pg_server import new_database

    from memcompile_langgraph.store.postgres import PostgresRecords

    monkeypatch.setenv("MEMCOMPILE_PG_TIMEOUT", "1")
    records = PostgresRecords(new_database(postgres_url))
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"no answer within 1 s \(MEMCOMPILE_PG_TIMEOUT\)"):
            with records.transaction() as tx:
                tx.run("SELECT pg_sleep(20)")
        assert time.monotonic() - started < 4
        with records.transaction() as tx:  # the ended connection was replaced
            assert tx.row("SELECT 1")[0] == 1
    finally:
        records.close()


def test_a_postgresql_timeout_that_is_no_number_of_seconds_is_one_line(monkeypatch):
    from memcompile_langgraph.store.postgres import PostgresRecords

    monkeypatch.setenv("MEMCOMPILE_PG_TIMEOUT", "-1")
    with pytest.raises(StoreError, match="MEMCOMPILE_PG_TIMEOUT='-1'"):
        PostgresRecords("postgresql://nobody@127.0.0.1:1/none")


@contextlib.contextmanager
def _dripping_proxy(upstream: str):
    """A loopback proxy to the Chroma server at `upstream`; once `drip` is set, every request it is sent gets an
    answer that starts at once and then comes one byte a second: each read is quick, the whole answer never ends."""
    host, port = upstream.rsplit("//", 1)[1].split(":")
    drip, stop = threading.Event(), threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    opened: list[socket.socket] = []

    def pump(src: socket.socket, dst: socket.socket, to_server: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if to_server and drip.is_set():
                    src.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 99999\r\n\r\n")
                    while not stop.is_set():
                        src.sendall(b" ")
                        time.sleep(1)
                    return
                dst.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                client = listener.accept()[0]
            except (TimeoutError, OSError):
                continue
            server = socket.create_connection((host, int(port)))
            opened.extend((client, server))
            threading.Thread(target=pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=pump, args=(server, client, False), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", drip
    finally:
        stop.set()
        thread.join()
        for sock in opened:
            sock.close()
        listener.close()


def test_a_chroma_server_that_answers_a_byte_at_a_time_is_bounded_by_the_deadline(
    tmp_path, embeddings, chroma_url, monkeypatch
):
    monkeypatch.setenv("MEMCOMPILE_CHROMA_TIMEOUT", "2")
    turns = synthetic_turns("ann", 6)
    with _dripping_proxy(chroma_url) as (url, drip):
        mem = MemCompile(tmp_path / "store", embeddings=embeddings, chroma_url=url)
        try:
            mem.add_turns(turns, user_id="ann")
            drip.set()
            for call in (
                lambda: mem.add_turns(synthetic_turns("ann", 2, seed=5), user_id="ann"),
                lambda: mem.engine.vectors.ids("ann"),
            ):
                failed, took = _within(30, call)
                assert isinstance(failed, VectorStoreError) and "no answer within 2 s" in str(failed), failed
                assert took < 2 * 2 + 2, took
        finally:
            mem.close()
        # opening a memory on it, its first question included, is bounded too
        opened, took = _within(30, lambda: MemCompile(tmp_path / "other", embeddings=embeddings, chroma_url=url))
        assert took < 3 * 2 + 2, took
        if not isinstance(opened, Exception):
            opened.close()


def _heartbeat_only(conn: socket.socket) -> None:
    """Answers a connection's request if it is the heartbeat, else never: a server that passes the opening check,
    then holds chromadb's client as it is constructed (identity, tenant and database requests)."""
    with contextlib.suppress(OSError):
        head = b""
        while b"\r\n\r\n" not in head and (data := conn.recv(65536)):
            head += data
        if b"/heartbeat " in head.split(b"\r\n", 1)[0]:
            body = b'{"nanosecond heartbeat": 1}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n")
            conn.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            conn.close()


def test_a_chroma_server_that_stalls_once_past_the_opening_check_is_bounded_by_the_deadline(
    tmp_path, embeddings, monkeypatch
):
    monkeypatch.setenv("MEMCOMPILE_CHROMA_TIMEOUT", "1")
    store = tmp_path / "store"
    turns = synthetic_turns("ann", 6)
    MemCompile(store, embeddings=None, dense=False).add_turns(turns, user_id="ann")
    with _silent_listener(_heartbeat_only) as url:
        mem = MemCompile(store, embeddings=embeddings, chroma_url=url)
        try:
            failed, took = _within(10, lambda: mem.engine.vectors.ids("ann"))
            said = str(failed)
            assert isinstance(failed, VectorStoreError), failed
            assert "\n" not in said and url in said and "MEMCOMPILE_CHROMA_TIMEOUT" in said, said
            assert took < 2 * 1 + 2, took
            # the records are intact and still answer, from the lexical channels
            assert mem.users() == ["ann"]
            assert mem.compile(turns[0]["text"], user_id="ann").packets
        finally:
            mem.close()
