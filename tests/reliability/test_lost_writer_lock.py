"""A PostgreSQL writer that lost its writer lock (its session ended: a server restart, idle_session_timeout,
pg_terminate_backend) writes nothing more: its next write fails in one line, whoever took the lock since writes on,
and the records stay whole: no packet seq twice, the digest chain valid, every committed turn there once."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memcompile_langgraph.model import SourcePacket
from memcompile_langgraph.store.postgres import PostgresRecords
from memcompile_langgraph.store.protocols import StoreError
from memcompile_langgraph.store.rows import DESC_COLS, PACKET_COLS, chain

from .harness import synthetic_turns
from .strategies import examples


@pytest.fixture(scope="module")
def pg_store(postgres_url):
    """One store (a schema of its own) for the module: each case writes users of its own."""
    url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
    stores = [PostgresRecords(url), PostgresRecords(url)]  # two workers of one store
    yield url, stores
    for s in stores:
        s.close()


def packet(user: str, seq: int, tag: str) -> SourcePacket:
    return SourcePacket(
        packet_id=f"{tag}-{seq}",
        user_id=user,
        dia_id=f"{tag}:{seq}",
        speaker="Ann",
        session=1,
        session_label="session_1",
        session_time=None,
        session_time_raw="",
        text=f"turn {seq} of {tag}",
        seq=seq,
        content_hash=f"h-{tag}-{seq}",
    )


def lock_session(url: str, schema: str, user: str) -> int | None:
    """The pid of the session holding the user's writer lock (None: nobody)."""
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
            "AND objid::text::bigint = hashtextextended(%s, 0) & 4294967295",
            (f"{schema}/{user}",),
        ).fetchone()
    return row[0] if row else None


def terminate(url: str, pid: int) -> None:
    """Ends the session and waits until it is gone: pg_terminate_backend only signals it, and until the backend
    exits it still holds its locks (a writer asking then is right to find its lock held)."""
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(200):
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None:
                return
            time.sleep(0.05)
    raise AssertionError(f"session {pid} still there 10 s after pg_terminate_backend")


def check_whole(store: PostgresRecords, user: str, committed: list[str]) -> None:
    """No seq twice, the chain recomputed from the rows is the stored one, each committed turn there once."""
    with store.transaction() as tx:
        prows = tx.all(f"SELECT {PACKET_COLS} FROM packets WHERE user_id=? ORDER BY seq", (user,))
        drows = tx.all(f"SELECT user_id, {DESC_COLS} FROM descriptors WHERE user_id=?", (user,))
        digests = [r[0] for r in tx.all("SELECT digest FROM packets WHERE user_id=? ORDER BY seq", (user,))]
    seqs = [r[9] for r in prows]
    assert len(seqs) == len(set(seqs))
    assert chain("", prows, drows) == digests
    assert store.head(user).digest == (digests[-1] if digests else "")
    assert sorted(r[2] for r in prows) == sorted(committed)


def test_a_writer_whose_lock_session_ended_fails_its_next_batch_in_one_line(pg_store):
    url, (a, b) = pg_store
    user = f"u{uuid.uuid4().hex[:8]}"
    with a.write_lock(user):
        a.commit(user, [packet(user, 0, "a"), packet(user, 1, "a")], [])
        terminate(url, lock_session(url, a.schema, user))  # between two batches of a's unit of work
        with b.write_lock(user):  # another worker takes the lock and writes the user
            b.commit(user, [packet(user, 2, "b")], [])
        with pytest.raises(StoreError) as err:
            a.commit(user, [packet(user, 2, "a")], [])  # a's next batch, numbered from what a knew
    msg = str(err.value)
    assert "writer lock" in msg and "lost" in msg and "\n" not in msg
    check_whole(a, user, ["a:0", "a:1", "b:2"])


def test_a_lost_lock_is_noticed_when_nobody_took_it_since(pg_store):
    url, (a, _) = pg_store
    user = f"u{uuid.uuid4().hex[:8]}"
    with a.write_lock(user):
        a.commit(user, [packet(user, 0, "a")], [])
        terminate(url, lock_session(url, a.schema, user))
        with pytest.raises(StoreError, match="lost"):
            a.commit(user, [packet(user, 1, "a")], [])
        for write in (lambda: a.delete_packets(user, ["a-0"]), lambda: a.forget(user)):
            with pytest.raises(StoreError, match="lost"):
                write()
    check_whole(a, user, ["a:0"])
    with a.write_lock(user):  # taken again: it writes
        a.commit(user, [packet(user, 1, "a")], [])
    check_whole(a, user, ["a:0", "a:1"])


def test_a_unit_of_work_whose_lock_is_lost_between_batches_stores_no_more(pg_store, tmp_path, monkeypatch):
    """Through add_turns: the batch after the loss fails with the one line, the batches before it stay."""
    from memcompile_langgraph import MemCompile

    url, _ = pg_store
    monkeypatch.setattr("memcompile_langgraph.add_turns.INGEST_BATCH", 4)
    mem = MemCompile(tmp_path / "store", records_url=url, embeddings=None, dense=False)
    user = f"u{uuid.uuid4().hex[:8]}"
    real_commit = PostgresRecords.commit
    calls = []

    def commit_then_lose(self, user_id, *args, **kwargs):
        version = real_commit(self, user_id, *args, **kwargs)
        calls.append(user_id)
        if len(calls) == 1:
            terminate(url, lock_session(url, self.schema, user_id))
        return version

    monkeypatch.setattr(PostgresRecords, "commit", commit_then_lose)
    with pytest.raises(StoreError) as err:
        mem.add_turns(synthetic_turns("lost", 12), user_id=user)
    assert "lost" in str(err.value) and "\n" not in str(err.value)
    assert len(calls) == 1
    monkeypatch.setattr(PostgresRecords, "commit", real_commit)
    assert len(mem.turns(user)) == 4  # the first batch, committed while the lock was held
    assert lock_session(url, mem.engine.records.schema, user) is None  # and the unit let go of the lock
    counts = mem.add_turns(synthetic_turns("lost", 12), user_id=user)  # the next writer stores the rest
    assert counts["stored"] == 8 and len(mem.turns(user)) == 12
    mem.close()


# a step of one of two writers: take the lock (without waiting), commit a batch numbered from what it knows, lose
# its lock (its session terminated), or let the lock go
STEPS = st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(["take", "commit", "lose", "release"])), max_size=24)


@examples(30)
@given(steps=STEPS)
@example(steps=[("a", "take"), ("a", "commit"), ("a", "lose"), ("b", "take"), ("b", "commit"), ("a", "commit")])
@example(steps=[("a", "take"), ("a", "lose"), ("a", "commit"), ("b", "take"), ("b", "commit")])
def test_any_interleaving_of_lock_loss_and_commits_keeps_the_records_whole(pg_store, steps):
    url, stores = pg_store
    user = f"u{uuid.uuid4().hex[:8]}"
    writers = {name: {"store": s, "hold": None, "next": 0} for name, s in zip("ab", stores)}
    committed: list[str] = []
    try:
        for name, step in steps:
            w = writers[name]
            if step == "take" and w["hold"] is None:
                hold = w["store"].write_lock(user, blocking=False)
                if hold.__enter__():
                    w["hold"] = hold
                    w["next"] = len(w["store"].load(user).packets)  # what it read when it took the lock
                    w["pid"] = lock_session(url, w["store"].schema, user)
                else:
                    hold.__exit__(None, None, None)
            elif step == "commit" and w["hold"] is not None:
                batch = [packet(user, w["next"] + i, f"{name}{len(committed)}") for i in range(2)]
                try:
                    w["store"].commit(user, batch, [])
                except StoreError:
                    continue  # lost its lock, or another writer went first: nothing of the batch stored
                committed += [p.dia_id for p in batch]
                w["next"] += 2
            elif step == "lose" and w["hold"] is not None:
                terminate(url, w["pid"])  # its own session (ended already, if it lost the lock before)
            elif step == "release" and w["hold"] is not None:
                w["hold"].__exit__(None, None, None)
                w["hold"] = None
    finally:
        for w in writers.values():
            if w["hold"] is not None:
                w["hold"].__exit__(None, None, None)
    check_whole(stores[0], user, committed)


def test_a_store_whose_lost_writers_repeated_seqs_is_migrated_whole(postgres_url):
    """Packets two writers gave one seq before it was unique move behind the user's last, chain recomputed."""
    url = f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}"
    store = PostgresRecords(url)
    store.commit("u", [packet("u", 0, "a"), packet("u", 1, "a")], [])
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # the store as the old writers left it
        conn.execute(f"SET search_path TO {store.schema}")
        conn.execute("DROP INDEX packets_seq")
        conn.execute("DROP TABLE writer_epochs")
        conn.execute(
            "INSERT INTO packets SELECT user_id, 'b-1', seq, 'b:1', speaker, session, session_label, session_time, "
            "session_time_raw, 'the other writer''s turn', image_caption, image_query, 'hb', created_at + 1, digest "
            "FROM packets WHERE packet_id = 'a-1'"
        )
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    store.close()
    again = PostgresRecords(url)
    check_whole(again, "u", ["a:0", "a:1", "b:1"])
    assert [p.dia_id for p in again.load("u").packets] == ["a:0", "a:1", "b:1"]
    again.commit("u", [packet("u", 3, "c")], [])
    check_whole(again, "u", ["a:0", "a:1", "b:1", "c:3"])
    again.close()
