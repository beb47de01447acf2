"""Snapshot payloads are data (index_codec): a round trip gives back an index that answers and grows exactly as the
live one, and any malformed payload is refused (FormatError), so the file is removed and rebuilt from the records."""

import ast
import io
import json
import logging
import pickle
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memcompile_langgraph
from memcompile_langgraph import MemCompile, MemCompileConfig
from memcompile_langgraph.bench.synthetic import generate
from memcompile_langgraph.index.codec import FormatError, decode_index, decode_tail, encode_index, encode_tail
from memcompile_langgraph.index.persistent import plain
from memcompile_langgraph.index.user import UserIndex
from memcompile_langgraph.runtime import cache as cache_module
from memcompile_langgraph.runtime import snapshot_file

TURNS = generate(200, seed=13).turns
QUESTIONS = ["Where did she travel last summer?", "What is the dog called?", "Who started a new job?", "pottery"]
TERMS = ["trip", "dog", "job", "pottery", "kayak", "sister", "work", "paint"]


def view(index: UserIndex) -> dict:
    """Everything an index holds, as plain values (sets of the inverted maps without the empty ones: a key whose
    set emptied answers as an absent key)."""
    layout, route = index.layout, index.layout.route
    n = len(route)

    def inverted(m):
        return {k: set(v) for k, v in plain(m).items() if v}

    return {
        "head": (index.user_id, index.version, index.epoch, index.last_session, index.last_seqs),
        "packets": [index.packets[p] for p in index.packet_order],
        "maps": [plain(getattr(index, name)) for name in ("by_dia", "hashes", "position", "packet_position")],
        "lists": [list(getattr(index, name)) for name in ("descriptors", "claim_packets", "claim_terms", "key_terms")]
        + [list(getattr(index, name)) for name in ("packet_sessions", "packet_speakers", "packet_timed")],
        "small": (list(index.people), dict(index.sessions), dict(index.session_packets)),
        "by_packet": {p: [d.descriptor_id for d in ds] for p, ds in plain(index.by_packet).items()},
        "cells": sorted(plain(layout.cells).values(), key=lambda c: c.seq),
        "members": {c: [d.descriptor_id for d in m] for c, m in plain(layout.members).items()},
        "placement": (plain(layout.of_descriptor), inverted(layout._by_key), inverted(layout._by_person), layout._next),
        "route": (list(route.ids), route._cols[:, :n].tolist(), route.key_terms(), list(route._title_terms)),
        "postings": [inverted(p._cells) for p in (route.key_post, route.people_post, route.title_post)],
        "bm25": [(len(b), b._total_len, b._open_len, plain(b._term_ids)) for b in (index.bm25, index.packet_bm25)],
        "vector_ids": list(index.vectors.ids),
    }


def assert_same(a: UserIndex, b: UserIndex) -> None:
    assert view(a) == view(b)
    for x, y in ((a.bm25, b.bm25), (a.packet_bm25, b.packet_bm25)):
        np.testing.assert_allclose(x.scores(TERMS), y.scores(TERMS), rtol=1e-12, atol=0)
    np.testing.assert_allclose(a.vectors.matrix(), b.vectors.matrix(), rtol=1e-6, atol=0)


def round_trip(index: UserIndex) -> UserIndex:
    return decode_index(encode_index(index), UserIndex(index.user_id, index.cfg))


def answers(mem: MemCompile) -> list:
    return [(c.text, c.dia_ids) for c in (mem.compile(q, "u") for q in QUESTIONS)]


def with_vectors(mem: MemCompile, seed: int, dim: int) -> None:
    """Gives the published index vectors for most packets (a fork, as a writer would)."""
    index = mem.index("u").fork()
    rng = np.random.default_rng(seed)
    ids = [p for p in index.packet_order if rng.random() < 0.8]
    index.vectors.set(ids, rng.standard_normal((len(ids), dim)).astype(np.float32))
    mem.host.cache.publish(index)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=len(TURNS)), min_size=1, max_size=6),
    at=st.integers(min_value=0, max_value=6),
    seed=st.integers(min_value=0, max_value=2**16),
    dim=st.sampled_from([1, 5, 16]),
)
def test_any_history_of_writes_and_forks_round_trips_and_grows_as_the_live_index(cuts, at, seed, dim):
    """Batches of turns (each write forks the published index), vectors set on a fork, then the file form: it equals
    the live index, answers the same, and writes after it give what writes on the live index give."""
    bounds = sorted(set(cuts))
    batches = [TURNS[a:b] for a, b in zip([0, *bounds], bounds)]
    at = min(at, len(batches))
    live, loaded = MemCompile(None, dense=False), MemCompile(None, dense=False)
    for i, batch in enumerate(batches):
        if i == at:
            with_vectors(live, seed, dim)
            with_vectors(loaded, seed, dim)
            decoded = round_trip(loaded.index("u"))
            assert_same(decoded, live.index("u"))
            loaded.host.cache.publish(decoded)
            assert answers(loaded) == answers(live)
        for mem in (live, loaded):
            mem.add_turns(batch, user_id="u")
    assert_same(loaded.index("u"), live.index("u"))
    assert answers(loaded) == answers(live)
    assert_same(round_trip(loaded.index("u")), live.index("u"))


def test_an_empty_index_round_trips():
    empty = UserIndex("u", MemCompile(None, dense=False).engine.config)
    assert_same(round_trip(empty), empty)


# --- malformed payloads --------------------------------------------------------------------------------------------


def explode(payload: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    stream = io.BytesIO(payload)
    doc = json.loads(bytes(np.load(stream)))
    return doc, {name: np.load(stream) for name in doc["arrays"]}


def assemble(doc: dict, arrays: dict[str, np.ndarray], allow_pickle: bool = False) -> bytes:
    out = io.BytesIO()
    np.save(out, np.frombuffer(json.dumps(doc).encode(), np.uint8))
    for name in doc["arrays"] if isinstance(doc.get("arrays"), list) else arrays:  # the named order, else any
        if name in arrays:
            np.save(out, arrays[name], allow_pickle=allow_pickle)
    return out.getvalue()


@pytest.fixture(scope="module")
def sample() -> tuple[UserIndex, bytes]:
    mem = MemCompile(None, dense=False)
    mem.add_turns(TURNS[:150], user_id="u")
    for turn in TURNS[150:160]:
        mem.add_turns([turn], user_id="u")
    with_vectors(mem, 1, 8)
    index = mem.index("u")
    return index, encode_index(index)


# integer arrays whose values are data (any value is a valid index); every other integer array holds ids or offsets
VALUES = {"packets.session", "packets.seq", "descriptors.session", "descriptors.n_tokens", "descriptors.seq"}
VALUES |= {"cells.tokens", "cells.keyword_counts.counts", "cells.person_counts.counts", "cells.dia_counts.counts"}


def damaged(doc: dict, arrays: dict[str, np.ndarray]):
    """(what, payload) for every way of breaking one part: an array missing, of another dtype, one row short, an id
    out of range; a JSON value missing or of another type; the document itself."""
    for name, a in arrays.items():
        yield f"{name} missing", assemble(doc, {k: v for k, v in arrays.items() if k != name})
        other = {"b": np.int8, "i": np.float64 if a.dtype == np.int64 else np.int64, "f": np.float16}[a.dtype.kind]
        yield f"{name} as {np.dtype(other)}", assemble(doc, {**arrays, name: a.astype(other)})
        if len(a):
            yield f"{name} one row short", assemble(doc, {**arrays, name: a[:-1]})
            if a.dtype.kind == "i" and name not in VALUES:
                for bad in (-2, 2**30):
                    broken = a.copy()
                    broken.flat[len(broken) // 2] = bad
                    yield f"{name} holding {bad}", assemble(doc, {**arrays, name: broken})
        yield f"{name} as a matrix", assemble(doc, {**arrays, name: a.reshape(1, *a.shape)})
    for key, value in doc.items():
        yield f"{key} missing", assemble({k: v for k, v in doc.items() if k != key}, arrays)
        yield f"{key} as a float", assemble({**doc, key: 1.5}, arrays)
        for inner in value if isinstance(value, dict) else ():
            yield (
                f"{key}.{inner} missing",
                assemble({**doc, key: {k: v for k, v in value.items() if k != inner}}, arrays),
            )
            yield f"{key}.{inner} as a float", assemble({**doc, key: {**value, inner: 1.5}}, arrays)
    yield "another version", assemble({**doc, "version": doc["version"] + 1}, arrays)
    yield "a tail", assemble({**doc, "kind": "tail"}, arrays)
    yield "a string table with a number", assemble({**doc, "strings": [*doc["strings"], 7]}, arrays)


def test_every_damaged_part_is_refused_or_changes_nothing(sample):
    index, payload = sample
    doc, arrays = explode(payload)
    assert_same(decode_index(assemble(doc, arrays), index), index)  # the test's reassembly is faithful
    refused = 0
    for what, broken in damaged(doc, arrays):
        try:
            again = decode_index(broken, index)
        except FormatError:
            refused += 1
            continue
        try:  # accepted only when it reads as the same index (a key whose value was null anyway)
            assert_same(again, index)
        except AssertionError as exc:
            raise AssertionError(f"{what}: accepted as another index") from exc
    assert refused > 300


def test_a_truncated_or_extended_payload_is_refused(sample):
    index, payload = sample
    cuts = sorted({*range(0, 200, 7), *range(0, len(payload), max(1, len(payload) // 97)), len(payload) - 1})
    for cut in cuts:
        with pytest.raises(FormatError):
            decode_index(payload[:cut], index)
    with pytest.raises(FormatError):
        decode_index(payload + b"\x93NUMPY", index)
    with pytest.raises(FormatError):
        decode_index(b"\x80\x05not npy at all", index)


class _Trap:
    """Unpickling it would leave a file behind."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (self.path, "unpickled"))


def test_object_arrays_and_pickles_are_never_unpickled(sample, tmp_path):
    index, payload = sample
    doc, arrays = explode(payload)
    marker = tmp_path / "marker"
    trap = np.empty(1, dtype=object)
    trap[0] = _Trap(marker)
    for broken in (
        assemble(doc, {**arrays, "packets.seq": trap}, allow_pickle=True),
        pickle.dumps(_Trap(marker)),
        pickle.dumps((["p"], _Trap(marker))),
    ):
        with pytest.raises(FormatError):
            decode_index(broken, index)
        with pytest.raises(FormatError):
            decode_tail(broken)
    assert not marker.exists()


def test_a_tail_round_trips_and_refuses_malformed_ones(sample):
    index, payload = sample
    ids, matrix = ["a", "b", "c"], np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    got_ids, got = decode_tail(encode_tail(ids, matrix))
    assert got_ids == ids and got.dtype == np.float32
    assert decode_tail(encode_tail(["a lone \ud83d surrogate", "ü"], matrix[:2]))[0] == ["a lone \ud83d surrogate", "ü"]
    np.testing.assert_allclose(got, matrix, rtol=1e-7)
    doc, arrays = explode(encode_tail(ids, matrix))
    for broken in (
        payload,  # an index where a tail belongs
        assemble({**doc, "ids": ["a", "b"]}, arrays),
        assemble({**doc, "ids": ["a", "a", "c"]}, arrays),
        assemble({**doc, "ids": ["a", 2, "c"]}, arrays),
        assemble(doc, {"matrix": matrix.astype(np.float64)}),
        assemble(doc, {"matrix": matrix.ravel()}),
        assemble(doc, {"matrix": np.where(matrix > 1, np.nan, matrix).astype(np.float32)}),
        assemble(doc, {}),
    ):
        with pytest.raises(FormatError):
            decode_tail(broken)


# --- files -------------------------------------------------------------------------------------------------------


@pytest.fixture()
def stored(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "PERSIST_EVERY", 1)
    path = tmp_path / "store"
    mem = MemCompile(path, dense=False)
    mem.add_turns(TURNS[:120], user_id="u")
    expected = answers(mem)
    files = mem.host.cache.files
    target = files.path("u")
    assert target.is_file()
    index = mem.index("u")
    mem.close()
    return path, files, target, index, expected


def _kinds_of_damage(index: UserIndex, tmp_path: Path):
    doc, arrays = explode(encode_index(index))
    good = encode_index(index)
    yield "truncated", good[: len(good) // 2]
    yield "wrong dtype", assemble(doc, {**arrays, "descriptors.packet": arrays["descriptors.packet"].astype(np.int64)})
    yield "ids out of range", assemble(doc, {**arrays, "cells.descriptors": arrays["cells.descriptors"] + 10**6})
    yield "a tail payload", encode_tail(["p"], np.ones((1, 3), np.float32))
    yield "another version", assemble({**doc, "version": doc["version"] + 1}, arrays)
    yield "a pickle of an earlier release", pickle.dumps(_Trap(tmp_path / "marker"))


def test_a_signed_file_with_a_malformed_payload_is_removed_and_rebuilt_with_the_same_answers(stored, tmp_path, caplog):
    path, files, target, index, expected = stored
    for what, payload in _kinds_of_damage(index, tmp_path):
        files._write(target, index, payload)  # signed with the store's key: only the payload is wrong
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            mem = MemCompile(path, dense=False)
            assert answers(mem) == expected, what
        assert "could not be loaded" in caplog.text, what
        mem.close()
        assert decode_index(target.read_bytes().split(b"\n", 2)[2], index) is not None, what  # written again
    assert not (tmp_path / "marker").exists()


def test_a_pickle_file_of_the_previous_format_is_removed_unread(stored, tmp_path, monkeypatch):
    path, files, target, index, expected = stored
    monkeypatch.setattr(snapshot_file, "FORMAT", 4)  # the header an earlier release wrote
    files._write(target, index, pickle.dumps(_Trap(tmp_path / "marker")))
    monkeypatch.undo()
    mem = MemCompile(path, dense=False)
    assert answers(mem) == expected
    mem.close()
    assert not (tmp_path / "marker").exists()
    assert json.loads(target.read_bytes().split(b"\n", 2)[1])["format"] == snapshot_file.FORMAT


def test_the_sweep_removes_files_of_a_release_with_other_config_fields_and_keeps_other_configs(stored, monkeypatch):
    """A config field renamed or added makes another build: the earlier release's files are never read again."""
    path, files, target, index, expected = stored
    # this release's fields at other values: another process's file, kept
    other = MemCompile(path, dense=False, config=MemCompileConfig.paper())
    other.index("u")  # rebuilt from the records and saved under its own build
    other.close()
    kept = [f for f in target.parent.glob("*.snapshot") if f != target]
    earlier = target.with_name(target.name.replace(files._build, "0123456789ab"))
    renamed = {"llm_table6_sampling": "llm_table6_settings"}
    with monkeypatch.context() as patch:  # the header the release before the rename wrote
        patch.setattr(snapshot_file, "asdict", lambda cfg: {renamed.get(k, k): v for k, v in asdict(cfg).items()})
        files._write(earlier, index, encode_index(index))
    assert earlier.is_file() and kept
    mem = MemCompile(path, dense=False)  # sweeps at open
    assert not earlier.exists() and all(f.is_file() for f in kept) and target.is_file()
    assert answers(mem) == expected
    mem.close()


def test_a_malformed_tail_is_removed_and_its_vectors_read_elsewhere(stored):
    path, _, _, index, _ = stored
    mem = MemCompile(path, dense=False)  # the files are checked against open records
    try:
        files, head = mem.host.cache.files, mem.engine.records.head("u")
        tail = files.path("u", snapshot_file.TAIL)
        files._write(tail, index, encode_index(index))  # an index where the tail belongs
        assert files.read_tail("u", head, index) == {} and not tail.exists()
        files._write(tail, index, encode_tail(["p1"], np.ones((1, 4), np.float32)))
        assert list(files.read_tail("u", head, index)) == ["p1"]
    finally:
        mem.close()


# --- the package -------------------------------------------------------------------------------------------------


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
        "__import__",
        "import_module",
    ):
        return [a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return []


def test_the_package_imports_no_object_serializer_and_never_loads_pickles():
    banned = {"pickle", "_pickle", "cPickle", "dill", "marshal", "shelve", "cloudpickle", "joblib", "copyreg"}
    found = []
    for file in Path(memcompile_langgraph.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            found += [f"{file}:{node.lineno} {n}" for n in _imported(node) if n.split(".")[0] in banned]
            for k in node.keywords if isinstance(node, ast.Call) else ():
                if k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False):
                    found.append(f"{file}:{node.lineno} allow_pickle")
    assert found == []
