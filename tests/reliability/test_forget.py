"""Forgetting: `forget(user)` and `memcompile forget` remove every record, vector, counter and LLM cache or
ledger entry of a user; `delete_turns` removes single turns with their descriptors and Cell memberships.
Proof: no table of the records (SQLite, then PostgreSQL) or of the LLM file, no byte of any file in the store
directory, and no Chroma collection holds them; and no reader, however long-lived, serves them again."""

from __future__ import annotations

import ctypes
import json
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from memcompile_langgraph.store.layout import user_key
from memcompile_langgraph.store.llm_file import LLMStore

from .harness import cli_env, memcompile, packet_ids, synthetic_turns, vector_view, write_json

MARK = "zqxwvmarker"  # in every turn of the forgotten user, nowhere else


def _marked_turns(n: int) -> list[dict]:
    return [
        {**t, "text": f"{t['text']} {MARK}{i:03d}x"} for i, t in enumerate(synthetic_turns("gone", n))
    ]  # no marker prefixes another


def _table_hits(tables: dict[str, list[tuple]], needles: list[str]) -> list[tuple[str, str]]:
    """(table, needle) for every needle found in any column of any row of any table."""
    hits = []
    for name, table_rows in tables.items():
        blob = json.dumps(table_rows, default=repr)
        hits += [(name, n) for n in needles if n in blob]
    return hits


def _llm_tables(store) -> dict[str, list[tuple]]:
    """Every row of the LLM file (cache and ledger), which stays SQLite in the store directory."""
    conn = sqlite3.connect(f"file:{store.path / 'llm.sqlite3'}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in names}
    finally:
        conn.close()


def write_bytes(path, data: bytes):
    path.write_bytes(data)
    return path


def _byte_hits(store, *needles: str | bytes) -> list[str]:
    raw = [n.encode() if isinstance(n, str) else n for n in needles]
    root = store.path
    return sorted(
        {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() for n in raw if n in p.read_bytes()}
    )


def _vector_bytes(mem, user: str, ids: set[str]) -> list[bytes]:
    """The start of each stored float32 vector, as Chroma writes it into its log and index files."""
    return [v[:64] for v in _whole_vectors(mem, user, ids)]


def _whole_vectors(mem, user: str, ids: set[str]) -> list[bytes]:
    """Each stored float32 vector (1,536 bytes) as Chroma writes it."""
    got_ids, vectors = mem.engine.vectors.vectors(user)
    return [np.asarray(v, dtype=np.float32).tobytes() for i, v in zip(got_ids, vectors) if i in ids]


WINDOW = 16  # bytes: a piece of a vector or of a text this long is found, wherever in a file it lies


def _vector_windows(vectors: list[bytes]) -> set[bytes]:
    """Every 16-byte window of the vectors starting at a float: any copy of 19 bytes or more of one holds one."""
    return {v[at : at + WINDOW] for v in vectors for at in range(0, len(v) - WINDOW + 1, 4)}


def _text_windows(removed: list[str], kept: list[str]) -> set[bytes]:
    """Every 16-byte window of the removed texts that no text still stored holds (those may stay, e.g. " I talked
    about"), at every byte offset."""
    kept_bytes = "\n".join(kept).encode()
    return {
        w
        for t in removed
        for b in [t.encode()]
        for at in range(len(b) - WINDOW + 1)
        if (w := b[at : at + WINDOW]) not in kept_bytes
    }


def _files_holding(store, windows: set[bytes]) -> dict[str, int]:
    """Each file under the store directory holding any of the windows, with how many of them; read as 8-byte words at
    each of the 8 byte offsets, whose matches of a window's first word are then compared whole."""
    assert windows and all(len(w) == WINDOW for w in windows)
    firsts = np.unique(np.frombuffer(b"".join(w[:8] for w in windows), dtype="<u8"))
    out = {}
    for path in sorted(p for p in store.path.rglob("*") if p.is_file()):
        data = path.read_bytes()
        raw = np.frombuffer(data, dtype=np.uint8)
        found = set()
        for shift in range(8):
            words = (len(raw) - shift) // 8
            if words < 2:
                continue
            at = np.flatnonzero(np.isin(raw[shift : shift + words * 8].view("<u8"), firsts)) * 8 + shift
            found |= {w for a in at.tolist() if (w := data[a : a + WINDOW]) in windows}
        if found:
            out[str(path.relative_to(store.path))] = len(found)
    return out


libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]


def _heap_full_of(mem, vectors: list[bytes]) -> None:
    """This process's heap as a long-lived one may have it before a removal: the vectors in a collection built and
    dropped (its HNSW buffers freed), and in freed blocks of the sizes Chroma's index buffers take (capacity 100:
    167,600 bytes of vectors, 400 of lengths; and larger) that malloc hands out again."""
    floats = [np.frombuffer(v, dtype=np.float32) for v in vectors]
    ids = [f"decoy-{i}" for i in range(len(floats))]
    mem.engine.vectors.upsert("heap-decoy", ids, floats, ids)
    mem.engine.vectors.drop("heap-decoy")
    pattern = b"".join(vectors)
    for size in (167_600, 400, 1_676_000):
        libc.free(libc.malloc(size))  # a freed mapped block raises malloc's mapping threshold: the next are heap
        blocks = []
        for _ in range(16):
            block = libc.malloc(size)
            ctypes.memmove(block, (pattern * (size // len(pattern) + 1))[:size], size)
            blocks.append(block)
            libc.malloc(64)  # kept: each freed block stays apart in the bins, not merged into the top and trimmed
        for block in blocks:
            libc.free(block)


@pytest.fixture
def two_users(tmp_path, embeddings, backend):
    store = backend.where(tmp_path / "store")
    mem = store.memory(embeddings=embeddings)
    mem.add_turns(_marked_turns(24), user_id="gone")
    mem.add_turns(synthetic_turns("kept", 24), user_id="kept")
    return store, mem


def test_forget_removes_every_trace_of_the_user(two_users, embeddings):
    store, mem = two_users
    gone_ids = packet_ids(store, "gone")
    gone_vectors = _vector_bytes(mem, "gone", gone_ids)
    assert len(gone_vectors) == 24 and _byte_hits(store, *gone_vectors)
    whole = _whole_vectors(mem, "gone", gone_ids)
    removed = _vector_windows(whole) | _text_windows(
        [t["text"] for t in _marked_turns(24)], [t["text"] for t in synthetic_turns("kept", 24)]
    )
    assert "chroma/chroma.sqlite3" in _files_holding(store, removed)  # the finder finds them (and the records)
    kept_before = mem.stats("kept")
    llm = LLMStore(store.path)  # the LLM side of the store: cache and ledger rows of both users
    for user in ("gone", "kept"):
        llm.cache.put(user, f"key-{user}", "fact", f'["{MARK if user == "gone" else "other"} reply"]', 10, 5)
        llm.ledger.add(user, "fact", calls=1, prompt_tokens=10)
    llm.close()
    mem.close()
    mem = store.memory(embeddings=embeddings)  # the store as reopened later, with its LLM file
    reader = store.memory(embeddings=embeddings)  # another reader with the user's index cached
    assert reader.compile(f"{MARK}003x kayak trip", user_id="gone").packets
    assert mem.engine.llm_store is not None
    _heap_full_of(mem, whole)

    mem.forget("gone")

    assert _files_holding(store, removed) == {}  # no 16 bytes of a vector or a text, whatever the heap held

    assert "gone" not in mem.users()
    stats = mem.stats("gone")
    assert (stats["packets"], stats["descriptors"], stats["cells"], stats["vectors"], stats["counters"]) == (
        0,
        0,
        0,
        0,
        {},
    )
    assert stats["usage"]["stages"] == {}
    assert mem.compile(f"{MARK}003x kayak trip", user_id="gone").packets == []
    needles = [MARK, "gone", *gone_ids]
    assert _table_hits(store.tables(), needles) == []
    assert _table_hits(_llm_tables(store), needles) == []
    assert _byte_hits(store, MARK, *gone_ids, *gone_vectors) == []  # nor in free pages, the WAL or index files
    assert mem.engine.vectors.name("gone") not in {c.name for c in mem.engine.vectors.client.list_collections()}
    view = vector_view(store, "gone")
    assert view["vector_ids"] == view["indexed_ids"] == set()
    assert reader.compile(f"{MARK}003x kayak trip", user_id="gone").packets == []  # gone for every reader
    assert "gone" not in reader.users() and reader.stats("gone")["packets"] == 0
    reader.close()
    # the other user is untouched
    assert mem.stats("kept")["packets"] == kept_before["packets"] == mem.stats("kept")["vectors"]
    assert mem.engine.llm_store.cache.size("kept") == 1
    # and nothing comes back when the store is opened again (reconcile must not resurrect)
    mem.close()
    again = store.memory(embeddings=embeddings)
    assert again.compile("kayak trip", user_id="gone").packets == [] and again.stats("gone")["vectors"] == 0


def test_delete_turns_removes_turns_descriptors_cells_and_vectors(two_users, embeddings):
    store, mem = two_users
    index = mem.index("gone")
    victims = ["D1:2", "D2:3"]
    victim_pids = {index.by_dia[d] for d in victims}
    victim_dids = {d.descriptor_id for p in victim_pids for d in index.by_packet[p]}
    texts = [index.packets[p].text.split()[-1] for p in victim_pids]  # their unique marker words
    victim_vectors = _vector_bytes(mem, "gone", victim_pids)
    removed_texts = [index.packets[p].text for p in victim_pids]
    stored_texts = [t.packet.text for t in mem.turns("gone") if t.packet.dia_id not in victims] + [
        t.packet.text for t in mem.turns("kept")
    ]
    removed = _vector_windows(_whole_vectors(mem, "gone", victim_pids)) | _text_windows(removed_texts, stored_texts)
    before = mem.stats("gone")
    _heap_full_of(mem, _whole_vectors(mem, "gone", packet_ids(store, "gone")))

    assert mem.delete_turns("gone", victims + ["D9:9"]) == 2
    assert _files_holding(store, removed) == {}  # before any reopen
    assert mem.delete_turns("gone", "D1:2") == 0  # already gone; a bare string is one id

    after = mem.stats("gone")
    assert after["packets"] == before["packets"] - 2 == after["vectors"]
    assert after["descriptors"] == before["descriptors"] - len(victim_dids)
    for reopened in (mem, store.memory(embeddings=embeddings)):
        idx = reopened.index("gone")
        assert not victim_pids & set(idx.packets) and not set(victims) & set(idx.by_dia)
        members = {did for cell in idx.layout.cells.values() for did in cell.descriptor_ids}
        assert not victim_dids & members and not victim_dids & set(idx.layout.of_descriptor)
        for word in texts:
            ctx = reopened.compile(f"{word} trip", user_id="gone")
            assert word not in ctx.text and not victim_pids & {p.packet_id for p in ctx.packets}
    assert _table_hits(store.tables(), [*texts, *victim_pids]) == []
    assert _byte_hits(store, *texts, *victim_pids, *victim_vectors) == [] == list(_files_holding(store, removed))
    view = vector_view(store, "gone")
    assert not victim_pids & (view["vector_ids"] | view["indexed_ids"])
    assert view["vector_ids"] == packet_ids(store, "gone")


def test_forget_interrupted_between_records_and_vectors_is_finished(two_users, embeddings):
    store, mem = two_users
    mem.engine.records.forget("gone")  # a crash right after the records transaction
    assert len(vector_view(store, "gone")["vector_ids"]) == 24
    mem.forget("gone")  # re-running completes it
    assert vector_view(store, "gone")["vector_ids"] == set()
    mem.add_turns(_marked_turns(3), user_id="gone2")
    mem.engine.records.forget("gone2")
    store.memory(embeddings=embeddings).compile("kayak", user_id="gone2")  # or the next open of the user does
    assert vector_view(store, "gone2")["vector_ids"] == set()


# The heap as a long-lived process may have it: freed memory full of the user's vectors (their copies from reads, a
# dropped or rebuilt index). With one malloc arena, Chroma's threads allocate from the blocks freed here right before
# each vector write or read: the HNSW buffers of an index Chroma makes or loads then (capacity 100: 167,600 bytes
# of vectors, 400 of lengths) come from them.
WITH_HEAP_FULL_OF_VECTORS = """
import ctypes, sys
from pathlib import Path
from memcompile_langgraph import MemCompile
from memcompile_langgraph.embeddings.minilm import default_embeddings
from memcompile_langgraph.store.chroma import ChromaVectors

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
pattern = Path(sys.argv[3]).read_bytes()


def fill_freed_heap():
    for size in (167_600, 400):
        libc.free(libc.malloc(size))  # a freed mapped block raises malloc's mapping threshold: the next come from the heap
        blocks = []
        for _ in range(16):
            block = libc.malloc(size)
            ctypes.memmove(block, (pattern * (size // len(pattern) + 1))[:size], size)
            blocks.append(block)
            libc.malloc(64)  # kept: the freed block stays in the arena's bins, not merged into its top and trimmed
        for block in blocks:
            libc.free(block)


def filled_first(write):
    def run(*args, **kwargs):
        fill_freed_heap()  # right before Chroma writes, so that nothing else takes the blocks first
        return write(*args, **kwargs)

    return run


for name in ("upsert", "query", "ids", "vectors"):
    setattr(ChromaVectors, name, filled_first(getattr(ChromaVectors, name)))
mem = MemCompile(sys.argv[1], records_url=sys.argv[2], embeddings=default_embeddings())
if sys.argv[4] == "read":  # a process that loads the indexes anew (Chroma writes an unsaved one's files again)
    for user in ("kept", "late"):
        mem.engine.vectors.query(user, [0.05] * 384, 3)
        mem.engine.vectors.ids(user)
elif sys.argv[4] == "forget":
    mem.add_turns([{"speaker": "Lee", "text": "A user after the forgotten one.", "dia_id": "L:1"}], user_id="late")
    mem.forget("gone")  # the late user's index may hold the forgotten vectors in its unused capacity
else:
    mem.delete_turns("gone", sys.argv[4].split(","))  # the rebuilt index's capacity comes from the freed blocks
mem.close()
"""


def test_forget_and_delete_leave_no_vector_byte_whatever_the_heap_held(two_users, embeddings, tmp_path):
    """No 64-byte piece of a removed vector in any file of the store, however the process's heap was filled."""
    store, mem = two_users
    index = mem.index("gone")
    victims = ["D1:2", "D2:3"]
    victim_pids = {index.by_dia[d] for d in victims}
    vectors = _whole_vectors(mem, "gone", packet_ids(store, "gone"))
    removed = _whole_vectors(mem, "gone", victim_pids)
    texts = [index.packets[p].text for p in victim_pids]
    mem.close()
    pattern = write_bytes(tmp_path / "pattern.bin", b"".join(vectors))  # beside the store, not in it

    def run(what: str) -> None:
        env = {**cli_env(), "MALLOC_ARENA_MAX": "1"}  # one arena: the script's frees reach Chroma's threads
        args = [str(store.path), store.url or "", str(pattern), what]
        done = subprocess.run(
            [sys.executable, "-c", WITH_HEAP_FULL_OF_VECTORS, *args], env=env, capture_output=True, timeout=300
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]

    run(",".join(victims))
    assert len(removed) == 2 and _byte_hits(store, *texts) == [] == list(
        _files_holding(store, _vector_windows(removed))
    )
    run("forget")
    assert _byte_hits(store, MARK) == [] == list(_files_holding(store, _vector_windows(vectors)))
    run("read")
    assert _byte_hits(store, MARK) == [] == list(_files_holding(store, _vector_windows(vectors)))
    again = store.memory(embeddings=embeddings)
    assert again.stats("gone")["packets"] == 0 and again.stats("late")["vectors"] == 1
    assert again.stats("kept")["vectors"] == 24
    again.close()


@pytest.mark.slow  # a subprocess or a whole store build per case
def test_cli_forget(tmp_path, backend):
    path = write_json(tmp_path / "t.json", _marked_turns(6))
    store = backend.where(tmp_path / "store")
    assert memcompile("ingest", path, *store.cli, "--user", "gone", "--quiet").code == 0
    assert memcompile("ingest", path, *store.cli, "--user", "kept", "--quiet").code == 0

    run = memcompile("forget", *store.cli, "--user", "gone", "--turn", "D1:1", "--turn", "D7:7")
    assert run.code == 0 and "removed 1 turns" in run.out and "not stored: D7:7" in run.out, run.out + run.err
    run = memcompile("forget", *store.cli, "--user", "gone")
    assert run.code == 0 and "gone: forgot 5 turns" in run.out and "5 vectors" in run.out, run.out + run.err
    assert "nothing stored" in memcompile("forget", *store.cli, "--user", "gone").out

    stats = json.loads(memcompile("stats", *store.cli, "--json").out)
    assert set(stats) == {"kept"} and stats["kept"]["packets"] == 6 == stats["kept"]["vectors"]
    assert _table_hits(store.tables(), [f"{MARK}000x"]) != []  # the kept user has the same texts
    assert _table_hits(store.tables(), ['"gone"']) == []
    if backend.name == "sqlite":
        assert not [p for p in (store.path / "locks").iterdir() if user_key("gone") in p.name]  # nor names it

    nowhere = backend.where(tmp_path / "nowhere")
    run = memcompile("forget", *nowhere.cli, "--user", "gone")
    assert run.code == 2 and len(run.err_lines) == 1 and not nowhere.path.exists()
    run = memcompile("forget", *store.cli, "--user", "")
    assert run.code == 2 and len(run.err_lines) == 1


FORGET_AND_ADD = """
import json, sys
from memcompile_langgraph import MemCompile
mem = MemCompile(sys.argv[1], embeddings=None, dense=False, records_url=sys.argv[3])
mem.forget("bank")
for turn in json.loads(sys.argv[2]):  # one batch per turn: the user's writes reach the old process's version count
    mem.add_turns([turn], user_id="bank")
"""


@pytest.mark.slow
def test_a_long_lived_process_never_serves_what_another_process_forgot(tmp_path, embeddings, backend):
    """Versions never repeat for a user, forget included: a cache keyed by version cannot outlive a forget."""
    store = backend.where(tmp_path / "store")
    server = store.memory(embeddings=embeddings)  # an agent server that keeps its cached index
    secret = [
        {
            "speaker": "Ann",
            "text": f"My bank PIN is 4{i}71 and the safe code is {i}9{i}.",
            "time": f"2024-01-0{i + 1}",
        }
        for i in range(3)
    ]
    for turn in secret:
        server.add_turns([turn], user_id="bank")
    assert "PIN" in server.compile("What is my bank PIN?", "bank").text
    fresh = [
        {
            "speaker": "Ann",
            "text": f"I moved to Porto, note {i}.",
            "time": f"2024-02-0{i + 1}",
            "dia_id": f"N:{i}",
        }
        for i in range(4)
    ]
    done = subprocess.run(
        [sys.executable, "-c", FORGET_AND_ADD, str(store.path), json.dumps(fresh), store.url or ""],
        env=cli_env(),
        timeout=300,
    )
    assert done.returncode == 0
    ctx = server.compile("What is my bank PIN?", "bank")
    assert "PIN" not in ctx.text and all(p.dia_id.startswith("N:") for p in ctx.packets)
    counts = server.add_turns(
        fresh[:1] + [{"speaker": "Ann", "text": "And I adopted a cat.", "dia_id": "N:9"}], user_id="bank"
    )
    assert counts["already_stored"] == 1 and counts["stored"] == 1  # no IntegrityError from a stale index
    assert {t.packet.dia_id for t in server.turns("bank")} == {"N:0", "N:1", "N:2", "N:3", "N:9"}


def test_forget_after_repair_leaves_nothing_in_the_copy_repair_moved_aside(two_users, embeddings):
    """`repair` moves a damaged Chroma directory aside; it holds the user's vectors, and forget removes them there too."""
    store, mem = two_users
    whole = _whole_vectors(mem, "gone", packet_ids(store, "gone"))
    removed = _vector_windows(whole)
    mem.close()
    chroma_db = store.path / "chroma" / "chroma.sqlite3"
    with open(chroma_db, "r+b") as fh:  # a damaged page: its quick_check fails, so repair moves the folder aside
        fh.seek(chroma_db.stat().st_size // 2 // 4096 * 4096)
        fh.write(b"\0" * 16384)
    mem = store.memory(embeddings=embeddings)
    aside = mem.repair()["moved_aside"]
    assert aside and any(k.startswith(aside.rsplit("/", 1)[1]) for k in _files_holding(store, removed))
    assert mem.stats("gone")["vectors"] == 24

    mem.forget("gone")

    assert _files_holding(store, removed) == {}  # neither the live directory nor the copy holds them
    assert mem.stats("kept")["vectors"] == mem.stats("kept")["packets"] == 24  # made again by the repair
    mem.close()


def test_a_forget_while_another_connection_reads_the_log_scrubs_it_once_that_reader_is_gone(tmp_path, caplog):
    """A shell or a backup tool reading the records file holds the WAL open: the forget cannot empty it then, says
    so, and the next write after that reader left empties it, so the text does not wait for the store to close."""
    from memcompile_langgraph.memory import MemCompile

    mem = MemCompile(tmp_path / "store", dense=False)
    mem.add_turns(_marked_turns(6), user_id="gone")
    mem.add_turns(synthetic_turns("kept", 3), user_id="kept")
    database = tmp_path / "store" / "memcompile.sqlite3"
    mem.engine.records.conn.execute("PRAGMA busy_timeout=50")  # the store waits 60 s for such a reader
    outside = sqlite3.connect(database, isolation_level=None)
    outside.execute("BEGIN")
    outside.execute("SELECT COUNT(*) FROM packets").fetchone()  # its snapshot holds the log's frames
    try:
        with caplog.at_level("WARNING"):
            mem.forget("gone")
        assert [r for r in caplog.records if "write-ahead log" in r.getMessage()]
        assert mem.stats("gone")["packets"] == 0
    finally:
        outside.execute("COMMIT")
        outside.close()
    mem.add_turns(synthetic_turns("kept", 1, seed=1), user_id="kept")  # any later write
    hits = [f for f in _byte_hits_in(tmp_path / "store", MARK) if f.startswith("memcompile.sqlite3")]
    assert hits == []
    mem.close()


def test_the_llm_files_log_kept_by_an_outside_reader_is_emptied_at_the_next_write(tmp_path, caplog):
    """The same for the cached LLM replies, which quote the user's turns."""
    folder = tmp_path / "store"
    folder.mkdir()
    llm = LLMStore(folder)
    llm.cache.put("gone", "key-gone", "fact", f'["{MARK}001x reply"]', 10, 5)
    llm.db.conn.execute("PRAGMA busy_timeout=50")
    outside = sqlite3.connect(folder / "llm.sqlite3", isolation_level=None)
    outside.execute("BEGIN")
    outside.execute("SELECT COUNT(*) FROM responses").fetchone()
    try:
        with caplog.at_level("WARNING"):
            llm.delete_user("gone")
        assert [r for r in caplog.records if "write-ahead log" in r.getMessage()]
        assert llm.cache.size("gone") == 0
    finally:
        outside.execute("COMMIT")
        outside.close()
    llm.cache.put("kept", "key-kept", "fact", '["another reply"]', 10, 5)  # any later write
    assert _byte_hits_in(folder, MARK) == []
    llm.close()


def _byte_hits_in(root, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()
    )
