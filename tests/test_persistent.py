"""Persistent containers: a fork's writes never reach the snapshot it came from, and both forms hold the same."""

import ast
import pathlib
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from immutables import Map

import memcompile_langgraph
from memcompile_langgraph import MemCompile
from memcompile_langgraph.bench.synthetic import generate
from memcompile_langgraph.index.codec import decode_index, encode_index
from memcompile_langgraph.index.persistent import (
    LAYERED_FROM,
    Column,
    Forkable,
    Layered,
    drop,
    persistent,
    plain,
    push,
    push_all,
    put,
)
from memcompile_langgraph.index.user import UserIndex

keys = st.text(min_size=1, max_size=4)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, st.integers()),
        st.tuples(st.just("drop"), keys),
        st.tuples(st.just("push"), st.integers()),
        st.tuples(st.just("push_all"), st.lists(st.integers(), max_size=4)),
        st.tuples(st.just("set"), st.integers(min_value=0), st.integers()),
    ),
    max_size=40,
)


def apply(d, seq, op):
    if op[0] == "put":
        return put(d, op[1], op[2]), seq
    if op[0] == "drop":
        return (drop(d, op[1]) if op[1] in d else d), seq
    if op[0] == "push":
        return d, push(seq, op[1])
    if op[0] == "push_all":
        return d, push_all(seq, op[1])
    return d, put(seq, op[1] % len(seq), op[2]) if len(seq) else seq


@given(st.dictionaries(keys, st.integers(), max_size=20), st.lists(st.integers(), max_size=20), ops)
def test_plain_and_persistent_agree_and_the_original_is_untouched(d, seq, script):
    frozen_d, frozen_seq = persistent(dict(d)), persistent(list(seq))
    before = (dict(frozen_d.items()), list(frozen_seq))
    a, b = dict(d), list(seq)
    x, y = frozen_d, frozen_seq
    for op in script:
        a, b = apply(a, b, op)
        x, y = apply(x, y, op)
    assert plain(x) == a and plain(y) == b
    assert (dict(frozen_d.items()), list(frozen_seq)) == before  # shared, never changed


@given(st.lists(st.integers(), max_size=700), st.lists(st.integers(), max_size=600), st.data())
def test_a_column_reads_like_the_list_it_was_made_from(start, more, data):
    column, expected = Column(start), list(start)
    grown = column.extend(more)
    assert list(column) == expected and len(column) == len(expected)  # extend gave a new version
    expected += more
    assert list(grown) == expected == grown and len(grown) == len(expected)
    if expected:
        i = data.draw(st.integers(min_value=-len(expected), max_value=len(expected) - 1))
        assert grown[i] == expected[i]
        changed = grown.set(i % len(expected), "x")
        assert changed[i] == "x" and grown[i] == expected[i]


def round_trip(index: UserIndex) -> UserIndex:
    """The index as a snapshot file gives it back."""
    return decode_index(encode_index(index), UserIndex(index.user_id, index.cfg))


def contents(index) -> dict:
    out = {name: plain(getattr(index, name)) for name in UserIndex.SHARED}
    out["of_descriptor"] = plain(index.layout.of_descriptor)
    out["members"] = {c: [d.descriptor_id for d in m] for c, m in index.layout.members.items()}
    out["cells"] = {c: (list(x.descriptor_ids), x.tokens) for c, x in index.layout.cells.items()}
    out["vector_ids"] = plain(index.vectors.ids)
    return out


def test_writes_after_a_snapshot_never_change_it_and_the_file_form_is_plain():
    turns = generate(160, seed=5).turns
    mem = MemCompile(None, dense=False)
    mem.add_turns(turns[:120], user_id="u")
    published = mem.index("u")
    seen = contents(published)
    for t in turns[120:]:  # each write forks the last snapshot (the first one converts it to persistent form)
        mem.add_turns([t], user_id="u")
    assert contents(published) == seen
    latest = mem.index("u")
    assert len(latest.packets) == 160 and len(latest.descriptors) > len(published.descriptors)
    copied = round_trip(latest)
    assert all(type(getattr(copied, name)) in (dict, list) for name in UserIndex.SHARED)
    assert contents(copied) == contents(latest)
    # what a fork copied is not saved: the loaded index owns everything it holds
    route = copied.layout.route
    owners = [copied.layout._owned, copied.bm25._owned, copied.packet_bm25._owned, route._owned]
    assert owners + [p._owned for p in (route.key_post, route.people_post, route.title_post)] == [None] * 7
    assert type(copied.bm25._term_ids) is dict and type(route.ids) is list


def test_a_snapshot_loads_with_its_query_columns_and_answers_alike():
    mem = MemCompile(None, dense=False)
    mem.add_turns(generate(120, seed=3).turns, user_id="u")
    index = mem.index("u")
    who = [index.packet_speakers[0]]
    expected = (index.session_array().tolist(), index.timed_array().tolist(), index.speaker_mask(who).tolist())
    assert 0 < sum(expected[2]) < len(expected[2])
    loaded = round_trip(index)
    assert len(loaded._timed) == len(loaded._speakers) == len(loaded.packets)  # made by the load, not on use
    got = (loaded.session_array().tolist(), loaded.timed_array().tolist(), loaded.speaker_mask(who).tolist())
    assert got == expected


def test_a_snapshot_file_form_rebuilds_records_cells_and_their_maps_equal_and_shared():
    mem = MemCompile(None, dense=False)
    mem.add_turns(generate(150, seed=11).turns, user_id="u")
    index = mem.index("u")
    loaded = round_trip(index)
    assert dict(loaded.packets.items()) == dict(index.packets.items())
    assert list(loaded.descriptors) == list(index.descriptors)
    for name in ("by_packet", "position", "packet_position"):
        assert dict(getattr(loaded, name).items()) == dict(getattr(index, name).items())
    for cid, cell in index.layout.cells.items():
        again = loaded.layout.cells[cid]
        assert again == cell and type(again.keyword_counts) is Counter and again.keyword_counts == cell.keyword_counts
        assert [d.descriptor_id for d in loaded.layout.members[cid]] == [
            d.descriptor_id for d in index.layout.members[cid]
        ]
    # one object per record, as in the index it was saved from
    first = {id(d) for d in loaded.descriptors}
    assert {id(d) for ds in loaded.by_packet.values() for d in ds} == first
    assert {id(d) for ds in loaded.layout.members.values() for d in ds} == first


class _Tables(Forkable):
    """A class declared as the index containers are: a shared map and list, a copied dict, sets owned per key."""

    SHARED = ("names", "rows", "members")
    COPIED = ("small",)
    OWN = {"members": set}

    def __init__(self):
        self.names, self.rows, self.members, self.small = {}, [], {}, {}

    def write(self, op):
        kind, key, value = op
        if kind == "name":
            self._put("names", key, value)
        elif kind == "row":
            self._push("rows", value)
        elif kind == "member":
            self._own("members", key, set).add(value)
        elif kind == "unmember" and key in self.members:
            self._own("members", key).discard(value)
        else:
            self.small[key] = value

    def contents(self):
        return plain(self.names), list(self.rows), {k: set(v) for k, v in plain(self.members).items()}, dict(self.small)


writes = st.lists(
    st.tuples(
        st.sampled_from(["name", "row", "member", "unmember", "small"]), st.sampled_from("abc"), st.integers(0, 5)
    ),
    max_size=30,
)


@given(writes, st.lists(writes, max_size=4))
def test_a_declared_class_takes_writes_alike_before_and_after_forks_and_its_sources_never_change(first, later):
    """The writes of each version, replayed on one never-forked object, give what the chain of forks gives; every
    earlier version keeps what it held."""
    chained, replayed, versions = _Tables(), _Tables(), []
    for script in [first, *later]:
        for op in script:
            chained.write(op)
            replayed.write(op)
        versions.append((chained, chained.contents()))
        assert chained.contents() == replayed.contents()
        chained = chained.fork()
    for version, held in versions:
        assert version.contents() == held


@given(st.lists(st.sampled_from(["Ava", "Ben", "hiking", "golden tent", "2021-01-06T11:34:00", ""]), min_size=1))
def test_records_built_apart_share_one_string_per_repeated_value(words):
    from memcompile_langgraph.model import Descriptor, SourcePacket

    def fresh(s: str) -> str:  # a string object of its own, as a parser or an extractor makes one
        return "".join(list(s))

    def descriptor(i: int) -> Descriptor:
        w = [fresh(x) for x in words]
        return Descriptor(f"d{i}", "p", "claim", "D1:1", w[0], 1, w[-1], tuple(w), tuple(w), w[0], w[-1], 3, i)

    a, b = descriptor(0), descriptor(1)
    assert a.keywords == tuple(words) and a.people == tuple(words)  # values unchanged
    for x, y in [(a.speaker, b.speaker), (a.session_time, b.session_time), (a.event_time, b.event_time)]:
        assert x is y
    assert all(x is y for x, y in zip(a.keywords + a.people, b.keywords + b.people))
    p, q = (
        SourcePacket(f"p{i}", "u", f"D1:{i}", fresh(words[0]), 1, fresh("s1"), None, fresh("t"), "x", i) for i in (0, 1)
    )
    assert p.speaker is q.speaker and p.session_label is q.session_label and p.session_time_raw is q.session_time_raw


map_ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, st.integers()),
        st.tuples(st.just("update"), st.dictionaries(keys, st.integers(), max_size=4)),
        st.tuples(st.just("delete"), keys),
    ),
    max_size=40,
)


@given(st.dictionaries(keys, st.integers(), max_size=30), st.lists(map_ops, min_size=1, max_size=4))
def test_a_layered_map_reads_like_the_dict_it_stands_for_and_never_changes_its_base_or_earlier_versions(base, scripts):
    frozen = dict(base)
    layered, expected, versions = Layered(base), dict(base), []
    for script in scripts:
        for op in script:
            if op[0] == "set":
                layered, expected[op[1]] = layered.set(op[1], op[2]), op[2]
            elif op[0] == "update":
                layered = layered.update(op[1])
                expected.update(op[1])
            elif op[1] in expected:
                layered = layered.delete(op[1])
                del expected[op[1]]
            else:
                with pytest.raises(KeyError):
                    layered.delete(op[1])
        versions.append((layered, dict(expected)))
    for version, held in versions:
        assert plain(version) == held and len(version) == len(held) and sorted(version) == sorted(held)
        assert all(version[k] == v and k in version and version.get(k) == v for k, v in held.items())
        gone = set(frozen) - set(held)
        assert all(k not in version and version.get(k, "none") == "none" for k in gone)
        for k in gone:
            with pytest.raises(KeyError):
                version[k]
    assert base == frozen  # the base, shared with the snapshot it came from, is never written


def test_a_fork_layers_a_large_dict_instead_of_copying_it_and_writes_alike():
    big = {f"k{i}": i for i in range(LAYERED_FROM)}
    tables = _Tables()
    tables.names = dict(big)
    fork = tables.fork()
    assert type(fork.names) is Layered and fork.names._base is tables.names  # shared, not copied
    fork.write(("name", "k0", -1))
    fork.write(("name", "new", 7))
    assert tables.names == big and plain(fork.names) == {**big, "k0": -1, "new": 7}
    again = fork.fork()
    again.write(("name", "k1", -2))
    assert fork.names["k1"] == 1 and again.names["k1"] == -2 and again.names["k0"] == -1


def _forkable_parts(obj, seen):
    """Every Forkable reachable from obj through CHILDREN, with what each declares."""
    if id(obj) in seen:
        return
    seen[id(obj)] = obj
    for name in obj.CHILDREN:
        child = getattr(obj, name)
        assert isinstance(child, Forkable), f"{type(obj).__name__}.{name} forks outside the one mechanism"
        _forkable_parts(child, seen)


def test_every_part_of_an_index_forks_through_forkable_and_nothing_else_defines_a_fork():
    mem = MemCompile(dense=False)
    turns = generate(40, seed=3).turns
    mem.add_turns(turns[:30], user_id="u")
    mem.add_turns(turns[30:], user_id="u")  # a fork's writes
    for index in (mem.index("u"), mem.index("u").fork()):
        seen: dict[int, object] = {}
        _forkable_parts(index, seen)
        kinds = {type(part).__name__ for part in seen.values()}
        assert {"UserIndex", "CellLayout", "BM25Index", "PacketVectors", "TermRows", "GrowArray"} <= kinds
        for part in seen.values():
            for name in part.SHARED:  # a plain container until a fork, persistent from then on
                assert type(getattr(part, name)) in (dict, list, Map, Layered, Column), (type(part).__name__, name)
    mem.close()
    # no class of the package forks in a way of its own: a fork() is only defined by a Forkable subclass
    root = pathlib.Path(memcompile_langgraph.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(f, ast.FunctionDef) and f.name == "fork" for f in node.body
            ):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                assert "Forkable" in bases or node.name == "Forkable", (path.name, node.name)
