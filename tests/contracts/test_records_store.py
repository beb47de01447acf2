"""The RecordsStore contract (store/protocols.py), run against SQLite (a real file) and PostgreSQL (a real server)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import ROOT
from support.record_backends import SqliteBackend

from memcompile_langgraph.model import Descriptor, SourcePacket
from memcompile_langgraph.store.protocols import RecordsStore, StoredTurn, StoreError
from memcompile_langgraph.store.sqlite import SCHEMA_VERSION
from memcompile_langgraph.text.terms import clean_text


def packet(user: str, seq: int, text: str = "", speaker: str = "Ann", session: int = 1) -> SourcePacket:
    return SourcePacket(
        packet_id=f"p{seq}",
        user_id=user,
        dia_id=f"D{session}:{seq}",
        speaker=speaker,
        session=session,
        session_label=f"session_{session}",
        session_time=f"2024-05-0{session}T10:00:00" if seq % 2 else None,
        session_time_raw="10:00 am on 1 May, 2024",
        text=text or f"turn {seq}",
        seq=seq,
        image_caption="a dog" if seq == 1 else "",
        image_query="dog" if seq == 1 else "",
        content_hash=f"h{seq}",
    )


def descriptor(p: SourcePacket, seq: int, claim: str = "") -> Descriptor:
    return Descriptor(
        descriptor_id=f"d{seq}",
        packet_id=p.packet_id,
        claim=claim or f"claim of {p.packet_id}",
        dia_id=p.dia_id,
        speaker=p.speaker,
        session=p.session,
        session_time=p.session_time,
        people=("Ann", "Tom"),
        keywords=("dog", "Biscuit"),
        event_time="2024-05" if seq % 2 else "",
        interaction_time="2024-05-01",
        n_tokens=7 + seq,
        seq=seq,
        negated=seq % 3 == 0,
    )


def fill(store, user: str, seqs: range, counts: dict | None = None) -> tuple[list, list, int]:
    ps = [packet(user, s) for s in seqs]
    placed = [(descriptor(p, 2 * p.seq + k), f"cell{p.seq % 3}") for p in ps for k in (0, 1)]
    return ps, placed, store.commit(user, ps, placed, counts)


def test_implements_the_protocol(store):
    assert isinstance(store, RecordsStore)


def test_commit_and_load_round_trip_in_order(store):
    ps, placed, version = fill(store, "u", range(5, 10))
    ps2, placed2, _ = fill(store, "u", range(5))  # committed later, earlier in dialogue order
    got = store.load("u")
    assert got.packets == ps2 + ps and got.descriptors == sorted(placed + placed2, key=lambda x: x[0].seq)
    assert got.version == store.version("u") > version
    assert store.load("nobody").packets == [] and store.load("nobody").version == 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).map(clean_text).filter(bool),
        min_size=1,
        max_size=4,
    ),
    user=st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cf")), min_size=1, max_size=40).filter(str.strip),
)
def test_any_text_as_the_builder_cleans_it_comes_back_unchanged(store, texts, user):
    user = f"{user}-{uuid.uuid4().hex[:6]}"  # each example a fresh user of the one store
    ps = [packet(user, i, text=t, speaker=t[:200]) for i, t in enumerate(texts)]
    placed = [(descriptor(p, p.seq, claim=p.text), "c\u00e9ll") for p in ps]
    store.commit(user, ps, placed)
    got = store.load(user)
    assert got.packets == ps and got.descriptors == placed
    assert [t.packet for t in store.turns(user)] == ps and user in store.users()


def test_incremental_load_returns_only_rows_beyond_the_given_seqs(store):
    fill(store, "u", range(3))
    first = store.load("u")
    ps, placed, version = fill(store, "u", range(3, 6))
    after = (first.packets[-1].seq, first.descriptors[-1][0].seq)
    got = store.load("u", after=after)
    assert got.packets == ps and got.descriptors == placed and got.version == version
    assert store.load("u", after=(5, 11)).packets == [] and store.load("u", after=(5, 11)).version == version


def test_versions_strictly_increase_and_never_repeat_across_forget(store):
    seen = [store.version("u")]
    assert seen == [0]
    for rnd in range(3):
        for s in range(rnd * 10, rnd * 10 + 3):
            fill(store, "u", range(s, s + 1))
            seen.append(store.version("u"))
        store.delete_packets("u", [f"p{rnd * 10}"])
        seen.append(store.version("u"))
        seen.append(store.set_embedding("u", "model-x", bump=True))
        store.forget("u")
        assert store.version("u") == 0
    assert seen[1:] == sorted(set(seen[1:])) and len(set(seen[1:])) == len(seen) - 1


def test_epoch_changes_on_delete_bump_and_remake_but_not_on_commit(store):
    assert store.head("u") == (0, 0, "")
    fill(store, "u", range(2))
    v1, e1, _ = store.head("u")
    assert v1 > 0 and e1 > 0
    fill(store, "u", range(2, 4))
    v2, e2, _ = store.head("u")
    assert v2 > v1 and e2 == e1  # an append: a snapshot of epoch e1 extends with load(after=...)
    store.delete_packets("u", ["p0"])
    v3, e3, d3 = store.head("u")
    assert v3 > v2 and e3 > e2
    store.set_embedding("u", "m", bump=False)
    assert store.head("u") == (v3, e3, d3)
    v4 = store.set_embedding("u", "m2", bump=True)
    assert store.head("u")[:2] == (v4, v4) and v4 > v3
    store.forget("u")
    fill(store, "u", range(1))
    v5, e5, _ = store.head("u")
    assert v5 > v4 and e5 > v4  # made again after forget: no snapshot of the old user applies
    assert store.version("u") == v5 and store.head("other") == (0, 0, "")


def test_the_digest_chain_names_the_content_up_to_each_packet(store, tmp_path):
    fill(store, "u", range(3))
    fill(store, "u", range(3, 5))
    head = store.head("u")
    chain = [store.digest_at("u", s) for s in range(5)]
    assert head.digest == chain[-1] and len(set(chain)) == 5 and store.digest_at("u", -1) == ""
    assert store.digest_at("u", 9) is None and store.load("u").digest == head.digest
    # the same records give the same chain in either database, however they were batched
    other = SqliteBackend(tmp_path / "twin").open()
    fill(other, "u", range(5))
    assert [other.digest_at("u", s) for s in range(5)] == chain
    fill(other, "u", range(5, 6))
    fill(store, "v", range(5, 6))
    ps = [packet("u", 5, text="another turn 5")]
    store.commit("u", ps, [(descriptor(ps[0], 10), "cell2")])
    assert store.digest_at("u", 5) != other.digest_at("u", 5)  # same seq, other content
    other.close()
    # a delete changes the chain from the deleted packet on, and only there
    store.delete_packets("u", ["p2"])
    assert [store.digest_at("u", s) for s in (0, 1)] == chain[:2] and store.digest_at("u", 2) is None
    assert store.digest_at("u", 3) != chain[3] and store.head("u").digest == store.digest_at("u", 5)


def test_turns_select_by_dia_ids_limit_and_offset_with_created_at(store):
    before = time.time()
    ps, _, _ = fill(store, "u", range(6))
    after = time.time()
    turns = store.turns("u")
    assert [t.packet for t in turns] == ps and all(isinstance(t, StoredTurn) for t in turns)
    assert all(before - 1 <= t.created_at <= after + 1 for t in turns)
    assert len({t.created_at for t in turns}) == 1  # one commit, one time
    assert [t.packet.seq for t in store.turns("u", limit=2, offset=1)] == [1, 2]
    assert [t.packet.seq for t in store.turns("u", offset=4)] == [4, 5]
    assert [t.packet.seq for t in store.turns("u", dia_ids=["D1:4", "D1:1", "D9:9"])] == [1, 4]
    assert store.turns("u", dia_ids=[]) == [] and store.turns("nobody") == []
    time.sleep(0.02)
    fill(store, "u", range(6, 7))
    assert store.turns("u", offset=6)[0].created_at > turns[0].created_at


def test_counters_add_up_and_counts_describe_the_records(store):
    fill(store, "u", range(4), counts={"stored": 4, "skipped_empty": 0})
    store.add_counts("u", {"stored": 2, "cleaned_text": 1})
    store.add_counts("u", {"nothing": 0})
    assert store.counters("u") == {"cleaned_text": 1, "stored": 6}
    assert list(store.counters("u")) == ["cleaned_text", "stored"]
    store.commit("u", [packet("u", 10, session=2)], [])
    assert store.counts("u") == {"packets": 5, "descriptors": 8, "cells": 3, "sessions": 2}
    assert store.counts("nobody") == {"packets": 0, "descriptors": 0, "cells": 0, "sessions": 0}
    assert store.counters("nobody") == {}


def test_users_listed_in_code_point_order(store):
    names = ["b\u00e9a", "Zo\u00eb", "alice", "\u00c4rger", "bob", "\u65e5\u672c"]
    for n in names:
        fill(store, n, range(1))
    assert store.users() == sorted(names)


def test_delete_packets_removes_them_and_their_descriptors_only(store):
    fill(store, "u", range(4))
    fill(store, "v", range(4))
    store.delete_packets("u", ["p1", "p3", "p-unknown"])
    got = store.load("u")
    assert [p.packet_id for p in got.packets] == ["p0", "p2"]
    assert {d.packet_id for d, _ in got.descriptors} == {"p0", "p2"} and len(got.descriptors) == 4
    assert len(store.load("v").packets) == 4


def test_forget_leaves_nothing_of_the_user(store):
    fill(store, "u", range(3), counts={"stored": 3})
    fill(store, "v", range(2))
    store.set_embedding("u", "model-a")
    store.forget("u")
    got = store.load("u")
    assert (got.version, got.packets, got.descriptors) == (0, [], [])
    assert store.head("u") == (0, 0, "") and store.users() == ["v"] and store.turns("u") == []
    assert store.counters("u") == {} and store.embedding("u") is None
    assert store.counts("u") == {"packets": 0, "descriptors": 0, "cells": 0, "sessions": 0}
    assert len(store.load("v").packets) == 2
    store.forget("never-there")


def test_a_forget_is_pending_until_its_derived_state_is_gone(store):
    fill(store, "u", range(2))
    fill(store, "v", range(2))
    assert store.pending_forgets() == []
    store.forget("u")
    store.forget("u_")  # a name LIKE would match as a pattern
    assert store.pending_forgets() == ["u", "u_"] and store.users() == ["v"]
    store.forget_done("u")
    store.forget_done("never-there")
    assert store.pending_forgets() == ["u_"]


def test_a_removal_is_pending_until_its_derived_state_is_gone(store):
    ps = fill(store, "u", range(4))[0]
    p4 = packet("u", 4)
    store.delete_packets("u", [ps[0].packet_id])
    store.commit("u", [p4], [(descriptor(p4, 40), "c")], removed=[ps[1].packet_id])  # a replace
    assert store.pending_removals() == {"u": sorted([ps[0].packet_id, ps[1].packet_id])}
    store.removal_done("u")
    store.delete_packets("u", [ps[2].packet_id])
    store.forget("u")  # goes with the user's vectors and LLM cache
    assert store.pending_removals() == {}


def test_a_failed_commit_stores_nothing(store):
    fill(store, "u", range(2))
    head = store.head("u")
    dup = packet("u", 7)
    with pytest.raises((sqlite3.IntegrityError, psycopg.IntegrityError)):  # the same dia_id twice
        store.commit("u", [dup, dup], [(descriptor(dup, 70), "c")], {"stored": 2})
    assert store.head("u") == head and len(store.load("u").packets) == 2 and store.counters("u") == {}


def test_store_id_and_embedding_persist_across_reopen(backend):
    a = backend.open()
    sid = a.store_id()
    assert sid == a.store_id() and len(sid) == 32
    assert a.embedding("u") is None
    a.set_embedding("u", "model-a")
    fill(a, "u", range(2))
    a.close()
    b = backend.open(create=False)
    assert b.store_id() == sid and b.embedding("u") == "model-a" and len(b.load("u").packets) == 2
    b.close()


_NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20)


@given(first=_NAMES, later=_NAMES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_first_deployment_is_bound_and_any_other_name_is_apart(backend, first, later):
    """Whatever the names: the first one a store is reached under is bound (kept across reopen), and only
    another name is apart, with the bound one to say so."""
    a = backend.open()
    a.apart(None)  # binds the server's address where there is one (a file has none)
    bound = a.apart(first)
    name = first if bound is None else bound[1]
    assert a.apart(name) is None
    a.close()
    b = backend.open(create=False)
    assert b.apart(name) is None
    other = later if later != name else later + "x"
    assert b.apart(other) == (other, name)
    b.close()


def test_opening_a_missing_store_without_create_is_a_one_line_error(backend):
    with pytest.raises(StoreError) as err:
        backend.open(create=False)
    assert "no store" in str(err.value) and "\n" not in str(err.value)


V1 = [  # the layout of schema 1 (before epochs and created_at), as stores of 2026-11 and before hold it
    "CREATE TABLE users (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL DEFAULT 0)",
    (
        "CREATE TABLE packets (user_id TEXT NOT NULL, packet_id TEXT NOT NULL, seq INTEGER NOT NULL, dia_id TEXT NOT NULL,"
        " speaker TEXT NOT NULL, session INTEGER NOT NULL, session_label TEXT NOT NULL, session_time TEXT,"
        " session_time_raw TEXT NOT NULL, text TEXT NOT NULL, image_caption TEXT NOT NULL, image_query TEXT NOT NULL,"
        " content_hash TEXT NOT NULL, PRIMARY KEY (user_id, packet_id), UNIQUE (user_id, dia_id))"
    ),
    (
        "CREATE TABLE descriptors (user_id TEXT NOT NULL, descriptor_id TEXT NOT NULL, packet_id TEXT NOT NULL,"
        " seq INTEGER NOT NULL, claim TEXT NOT NULL, dia_id TEXT NOT NULL, speaker TEXT NOT NULL,"
        " session INTEGER NOT NULL,"
        " session_time TEXT, people TEXT NOT NULL, keywords TEXT NOT NULL, event_time TEXT NOT NULL,"
        " interaction_time TEXT NOT NULL, n_tokens INTEGER NOT NULL, negated INTEGER NOT NULL, cell_id TEXT NOT NULL,"
        " PRIMARY KEY (user_id, descriptor_id))"
    ),
    (
        "CREATE TABLE counters (user_id TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,"
        " PRIMARY KEY (user_id, name))"
    ),
    "INSERT INTO users VALUES ('u', 3)",
    "INSERT INTO packets VALUES ('u', 'p0', 0, 'D1:0', 'Ann', 1, 'session_1', NULL, 'then', 'old turn', '', '', 'h')",
    (
        "INSERT INTO descriptors VALUES ('u', 'd0', 'p0', 0, 'old claim', 'D1:0', 'Ann', 1, NULL, '[\"Ann\"]', '[]', '',"
        " '', 3, 0, 'c0')"
    ),
    "INSERT INTO counters VALUES ('u', 'stored', 1)",
]


def test_an_older_schema_is_migrated_on_open_keeping_its_records(backend):
    backend.sql(*V1)
    store = backend.open(create=False)
    assert store.head("u")[:2] == (3, 3)
    assert store.digest_at("u", 0) == store.head("u").digest != ""  # the chain computed once, on open
    got = store.load("u")
    assert [p.text for p in got.packets] == ["old turn"] and got.descriptors[0][0].people == ("Ann",)
    assert store.turns("u")[0].created_at == 0 and store.counters("u") == {"stored": 1}
    fill(store, "u", range(1, 2))
    assert store.version("u") > 3 and store.head("u")[1] == 3  # versions continue above the old ones
    store.close()
    again = backend.open(create=False)  # migrated once: the second open finds the current schema
    assert len(again.load("u").packets) == 2
    again.close()


def test_a_newer_schema_is_refused_with_one_line_and_left_as_it_is(backend):
    backend.open().close()
    backend.sql("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as err:
        backend.open()
    msg = str(err.value)
    assert "schema 99" in msg and "upgrade" in msg and "\n" not in msg
    backend.sql(f"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'")  # untouched: usable
    backend.open(create=False).close()


def test_a_schema_2_store_gains_the_indexes_incremental_loads_read(backend):
    fill(backend.open(), "u", range(3))
    backend.sql(
        "DROP INDEX packets_seq",
        "DROP INDEX descriptors_seq",
        "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
    )
    store = backend.open(create=False)
    assert len(store.load("u", after=(0, -1)).packets) == 2
    store.close()
    backend.sql("DROP INDEX packets_seq", "DROP INDEX descriptors_seq")  # fails unless the open made them again


def test_write_lock_is_reentrant_in_a_thread_and_exclusive_across_threads(store):
    results = []

    def other(user: str) -> None:
        with store.write_lock(user, blocking=False) as held:
            results.append(held)

    with store.write_lock("u") as held:
        assert held
        with store.write_lock("u", blocking=False) as again:
            assert again  # re-entrant: a unit of work may call code that takes it again
        for user in ("u", "v"):
            t = threading.Thread(target=other, args=(user,))
            t.start()
            t.join()
    assert results == [False, True]
    other("u")
    assert results[-1] is True


HOLDER = """
import sys, time
from memcompile_langgraph.store.open import open_records
path, url, user = sys.argv[1], sys.argv[2] or None, sys.argv[3]
store = open_records(None if url else path, url)
with store.write_lock(user) as held:
    print("held" if held else "busy", flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_write_lock_excludes_another_process_and_is_released_when_it_is_killed(backend):
    store = backend.open()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMCOMPILE_RECORDS_URL": ""}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(backend.path), backend.url or "", "u"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with store.write_lock("u", blocking=False) as held:
            assert not held
        with store.write_lock("v", blocking=False) as held:
            assert held  # one user's writer never blocks another's
        got = []

        def wait_for_it() -> None:
            with store.write_lock("u") as held:
                got.append(held)

        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive() and not got  # blocked behind the other process
        holder.send_signal(signal.SIGKILL)  # dies mid-write: no unlock runs
        waiter.join(30)
        assert got == [True]
    finally:
        holder.kill()
        holder.wait()
    store.close()
