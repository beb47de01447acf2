"""The SQL records stores (store/sql.py over SQLite and PostgreSQL) beyond the contract's examples: deletes larger than
one statement binds, and both databases giving the same answers and digests for the same writes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memcompile_langgraph.model import Descriptor, SourcePacket
from memcompile_langgraph.store.sql import MAX_MEMBERS
from memcompile_langgraph.store.sqlite import SqliteRecords


def packets(user: str, seqs: range) -> tuple[list[SourcePacket], list[tuple[Descriptor, str]]]:
    ps = [
        SourcePacket(
            packet_id=f"p{s}", user_id=user, dia_id=f"D1:{s}", speaker="Ann", session=1, session_label="session_1",
            session_time=None, session_time_raw="", text=f"turn {s}", seq=s, image_caption="", image_query="",
            content_hash=f"h{s}",
        )
        for s in seqs
    ]  # fmt: skip
    placed = [
        (
            Descriptor(
                descriptor_id=f"d{p.seq}", packet_id=p.packet_id, claim=f"claim {p.seq}", dia_id=p.dia_id,
                speaker="Ann", session=1, session_time=None, people=("Ann",), keywords=("turn",), event_time="",
                interaction_time="", n_tokens=3, seq=p.seq, negated=False,
            ),
            f"cell{p.seq % 4}",
        )
        for p in ps
    ]  # fmt: skip
    return ps, placed


def test_a_delete_of_more_packets_than_one_statement_binds_rechains_from_the_first(backend):
    """The ids go to the database in several statements; the chain is recomputed from the lowest seq of all of
    them, here in the last statement's share: the digests equal those of a store that only ever held the rest."""
    n = 2 * MAX_MEMBERS + 10
    store, reference = backend.open(), SqliteRecords(None)
    try:
        store.commit("u", *packets("u", range(n)))
        epoch = store.head("u").epoch
        doomed = [f"p{s}" for s in reversed(range(1, n - 1))]  # the lowest seq comes last
        store.delete_packets("u", doomed)
        kept = packets("u", range(n))
        reference.commit("u", [kept[0][0], kept[0][-1]], [kept[1][0], kept[1][-1]])
        assert [p.seq for p in store.load("u").packets] == [0, n - 1]
        assert len(store.load("u").descriptors) == 2
        assert store.digest_at("u", n - 1) == reference.digest_at("u", n - 1) == store.head("u").digest
        assert store.digest_at("u", 0) == reference.digest_at("u", 0)
        assert store.head("u").epoch != epoch
    finally:
        store.close()
        reference.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    commits=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    deleted=st.sets(st.integers(0, 23)),
    wanted=st.lists(st.integers(0, 30), max_size=6),
)
def test_both_databases_answer_alike_for_the_same_writes(backend, commits, deleted, wanted):
    """The same commits and delete into the backend and into SQLite in memory: the same rows, digests, counts and
    turns come back (the queries are one text for both; only placeholders and dialect spellings differ)."""
    store, reference = backend.open(), SqliteRecords(None)
    user = f"u{len(commits)}-{sum(commits)}-{len(deleted)}"
    try:
        store.forget(user)
        seq = 0
        for size in commits:
            for s in (store, reference):
                s.commit(user, *packets(user, range(seq, seq + size)), counts={"stored": size})
            seq += size
        ids = [f"p{s}" for s in sorted(deleted)]
        for s in (store, reference):
            s.delete_packets(user, ids)
        got, want = store.load(user), reference.load(user)
        assert (got.packets, got.descriptors, got.digest) == (want.packets, want.descriptors, want.digest)
        assert store.counts(user) == reference.counts(user) and store.counters(user) == reference.counters(user)
        dia_ids = [f"D1:{w}" for w in wanted]
        assert [t.packet for t in store.turns(user, dia_ids)] == [t.packet for t in reference.turns(user, dia_ids)]
        assert [t.packet for t in store.turns(user, limit=2, offset=1)] == [
            t.packet for t in reference.turns(user, limit=2, offset=1)
        ]
        assert all(store.digest_at(user, p.seq) == reference.digest_at(user, p.seq) for p in want.packets)
    finally:
        store.forget(user)
        store.close()
        reference.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# no NUL in the parameter: PostgreSQL text cannot hold one (turn input removes it before anything is stored)
@given(
    text=st.text(alphabet=st.sampled_from("?%'\"ab s"), max_size=12),
    value=st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=8),
)
def test_question_marks_and_percent_signs_in_literals_reach_the_database_as_written(backend, text, value):
    """The records' SQL is written with `?` placeholders for both databases: a `?` inside a quoted literal is text,
    and a `%` anywhere is no placeholder of psycopg's, on either."""
    store = backend.open()
    literal = text.replace("'", "''")
    try:
        with store.transaction() as tx:
            assert tx.row(f"SELECT ?, '{literal}', ?", (value, 7)) == (value, text, 7)
    finally:
        store.close()
