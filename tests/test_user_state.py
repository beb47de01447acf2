"""One owner for each user's derived state: the Stamp checks (the package's only freshness checks) against any head,
and a UserState's lifecycle in the cache (dropping a user leaves nothing; pending vectors are waited for)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from hypothesis import given
from hypothesis import strategies as st

from memcompile_langgraph.runtime.user_state import Repair, Stamp, UserState
from memcompile_langgraph.store.protocols import Head

digests = st.sampled_from(["", "a1", "b2", "c3"])
stamps = st.builds(Stamp, st.integers(-1, 6), st.integers(0, 3), digests, st.integers(-1, 6))
heads = st.builds(Head, st.integers(0, 6), st.integers(0, 3), digests)
chains = st.dictionaries(st.integers(-1, 6), digests)  # the records' digest at each packet seq they hold


@given(stamps, heads)
def test_a_stamp_is_the_same_as_a_head_exactly_when_version_epoch_and_digest_agree(stamp, head):
    assert stamp.same(head) == ((stamp.version, stamp.epoch, stamp.digest) == tuple(head))


@given(stamps, heads, chains)
def test_records_extend_a_stamp_when_they_hold_exactly_its_packets_and_maybe_more(stamp, head, chain):
    reads = []

    def digest_at(seq):
        reads.append(seq)
        return chain.get(seq)

    extends = stamp.extends(head, digest_at)
    same_so_far = head.version > 0 and stamp.epoch == head.epoch and stamp.version <= head.version
    assert extends == (same_so_far and chain.get(stamp.seq) == stamp.digest)
    assert reads == ([stamp.seq] if same_so_far else [])  # one indexed read, none when the head already differs


@given(stamps)
def test_a_stamp_is_never_extended_by_records_of_another_epoch_or_by_none(stamp):
    chain = {stamp.seq: stamp.digest}
    assert not stamp.extends(Head(stamp.version + 1, stamp.epoch + 1, "x"), chain.get)
    assert not stamp.extends(Head(0, stamp.epoch, ""), chain.get)  # the user is gone from the records


def test_settle_waits_for_the_pending_vectors_and_a_finished_job_costs_nothing():
    state, job, stored = UserState("u"), Future(), []
    state.leave_pending(job)
    assert state.busy()

    def store():
        time.sleep(0.2)
        stored.append(True)
        job.set_result(None)

    threading.Thread(target=store).start()
    state.settle()
    assert stored == [True] and not state.busy()
    failed: Future[None] = Future()
    failed.set_exception(RuntimeError("logged by its job"))
    state.leave_pending(failed)
    state.settle()  # done: nothing to wait for, and its error is not raised again at every later writer


def test_a_published_state_carries_its_stamp_and_a_drop_leaves_nothing(make_mem):
    mem = make_mem("store", dense=False, turns=[{"speaker": "Ann", "text": "I adopted a beagle named Biscuit."}])
    mem.compile("beagle", "u")
    cache = mem.host.cache
    state = cache.state("u")
    index = mem.index("u")
    assert state is not None and state.index is index and state.persisted == 0  # one record: no file yet
    assert state.published[1] == Stamp.of(index) and state.published[1].same(mem.engine.records.head("u"))
    cache.persist(state, index, force=True)
    assert state.persisted == len(index.packets) and cache.files.path("u").exists()
    cache.drop("u")
    assert cache.state("u") is None and len(cache) == 0 and not cache.files.path("u").exists()
    assert mem.index("u").packets  # loaded again from the records
    mem.forget("u")
    assert cache.state("u") is None and mem.index("u").packets == {}


def test_a_user_dropped_while_it_loads_keeps_only_its_load_lock(make_mem):
    mem = make_mem("store", dense=False, turns=[{"speaker": "Ann", "text": "I adopted a beagle named Biscuit."}])
    cache = mem.host.cache
    mem.index("u")
    with cache._loading("u") as state:  # as if another thread were loading it
        state.repair = Repair.BUSY
        cache.drop("u")
        assert cache.state("u") is state  # the lock others wait for stays theirs
        assert state.published is None and state.persisted == 0 and state.repair is Repair.DONE
    assert cache.state("u") is None  # and goes with the last holder


def test_a_reader_retries_a_repair_a_busy_writer_kept_it_from(make_mem):
    mem = make_mem("store", dense=False, turns=[{"speaker": "Ann", "text": "I adopted a beagle named Biscuit."}])
    first = mem.index("u")
    cache = mem.host.cache
    cache.state("u").repair = Repair.BUSY
    again = mem.index("u")
    assert again is not first and again.version == first.version  # a fork got the repair, the published one kept
    assert cache.state("u").repair is Repair.DONE and mem.index("u") is again
