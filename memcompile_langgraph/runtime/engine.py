"""Engine: the stores and stage components of one memory, which graph runs reach through their runtime context."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from langchain_core.embeddings import Embeddings

from ..address.intent import offline_intent
from ..config import MemCompileConfig
from ..evidence.reader import PoolReader, reader_for
from ..evidence.scheduler import Scheduler
from ..extract.base import Extractor
from ..index.user import UserIndex, packet_document
from ..model import Descriptor, Intent, SourcePacket
from ..store.llm_file import LLMStore
from ..store.protocols import RecordsStore, StoreError, VectorsStore, VectorStoreError
from ..store.stats import user_stats
from .writer_clock import WriterClock

if TYPE_CHECKING:
    from ..address.llm_intent import LLMIntent
    from ..evidence.llm_updates import LLMUpdates

log = logging.getLogger(__name__)
WARNED_KEYS = 1024  # warnings a memory remembers having said (most are per user)
Bundles = list[tuple[SourcePacket, list[Descriptor]]]  # packets with their claim bundles: what z(p) is made of


class Embedded(NamedTuple):
    """Packets' vectors and their sources (Engine.sources), in the packets' order."""

    vectors: list[list[float]]
    sources: list[str]


@dataclass(frozen=True, eq=False)
class Engine:
    """What a graph run works with, fixed when the memory opens: the stores, the model and the stage components.
    What changes while the memory runs (its users' states, the writers' threads) is its host's (runtime/host.py)."""

    config: MemCompileConfig
    records: RecordsStore
    vectors: VectorsStore
    embeddings: Embeddings | None
    extractor: Extractor
    scheduler: Scheduler
    llm_intent: LLMIntent | None = None  # when a model runs the intent stage
    llm_store: LLMStore | None = None
    path: Path | None = None  # the store directory (None: in memory, or records in PostgreSQL)
    llm_updates: LLMUpdates | None = None  # when a model decides knowledge-update marks
    reader: PoolReader | None = None  # the fitted pool reader config.pool_reader names, when it loads
    store_id: str = ""  # what the derived state was named after when the store opened
    embedding_id: str | None = field(init=False)
    clock: WriterClock = field(default_factory=WriterClock, init=False, repr=False)  # writers' time by part
    _warned: OrderedDict[str, None] = field(default_factory=OrderedDict, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "embedding_id", embedding_identity(self.embeddings))  # frozen: set once, here

    def close(self) -> None:
        self.records.close()
        if self.llm_store is not None:
            self.llm_store.close()

    def check_store(self) -> None:
        """Refuses to write when the records got another store id since this memory opened them (a restored or cloned
        database opened by another worker was re-keyed): this process's snapshot folder and Chroma collections are
        named after the old id, and writing or forgetting there would split the store's vectors."""
        if self.records.store_id() != self.store_id:
            raise StoreError(
                "the records were given a new store id since this memory opened them (a copy, clone or restore was "
                "opened by another worker): close this memory and open the store again"
            )

    def drop_removed(self, user_id: str, packet_ids: list[str]) -> None:
        """What is derived from removed packets (a delete, a replace): their vectors and the cached LLM replies that
        may quote them. Their removal, pending since its records transaction, is done then (the caller holds the
        writer lock)."""
        self.vectors.delete(user_id, packet_ids)
        if self.llm_store is not None:
            self.llm_store.delete_user(user_id, whole_user=False)
        self.records.removal_done(user_id)

    def stats(self, user_id: str) -> dict[str, Any]:
        """The user's counts (Host.stats first waits for vectors its last add left pending)."""
        problems: list[str] = []

        def count(user: str) -> int | None:
            try:
                return len(self.vectors.ids(user))
            except VectorStoreError as exc:  # the records still answer: say what is wrong with the vectors
                problems.append(str(exc))
                return None

        out = user_stats(self.records, count, self.llm_store, user_id, self.embedding_id)
        if problems:
            out["vectors_error"] = problems[0]
        return out

    def usage(self, user_id: str) -> dict[str, Any]:
        store = self.llm_store
        return store.usage(user_id) if store is not None else {"stages": {}, "total_tokens": 0}

    def intent(self, query: str, known_people: Sequence[str], user_id: str) -> Intent:
        if self.llm_intent is not None:
            return self.llm_intent(query, known_people, user_id)
        return offline_intent(query, known_people, self.config.max_keywords)

    def embed_packets(self, user_id: str, items: Bundles, index: UserIndex | None = None) -> int:
        """Embeds packet documents z(p) and stores them; with index, its matrix gains them too."""
        if self.embeddings is None or not items:
            return 0
        self.store_vectors(user_id, items, self.packet_vectors(items), index)
        return len(items)

    def documents(self, items: Bundles) -> list[str]:
        """The packet documents as they are embedded (config.dense_document; the paper's z(p) by default)."""
        cfg = self.config
        return [packet_document(p, claims, cfg.dense_document)[: cfg.embed_max_chars] for p, claims in items]

    def packet_vectors(self, items: Bundles) -> Embedded:
        """The packets' vectors with their sources, from one build of their documents."""
        if self.embeddings is None:
            raise ValueError("this memory has no dense channel: no vectors to make")
        docs = self.documents(items)
        return Embedded(self.embeddings.embed_documents(docs), source_digests(docs))

    def sources(self, items: Bundles) -> list[str]:
        """What each packet's vector is built from, as a digest stored with the vector: one whose digest is not its
        packet's now was embedded from other content (a row edited by hand) and is made again (consistency.py)."""
        return source_digests(self.documents(items))

    def sources_match(self, index: UserIndex, ids: list[str], sources: list[str | None]) -> list[bool]:
        """Whether each stored vector (of a packet of `index`, with its stored source digest) may be served: it was
        built from the packet's document as the records hold it now. This is about a vector's content, not about
        whether a snapshot is the records' newest (that is Stamp's, runtime/user_state.py). A vector with no digest was written before
        digests were; it is served as it was then, and made again once by the user's repair (consistency.py)."""
        current = self.sources(bundles(index, ids))
        return [s is None or s == c for s, c in zip(sources, current)]

    def store_vectors(self, user_id: str, items: Bundles, embedded: Embedded, index: UserIndex | None = None) -> None:
        ids = [p.packet_id for p, _ in items]
        self.vectors.upsert(user_id, ids, embedded.vectors, [p.dia_id for p, _ in items], embedded.sources)
        if index is not None:
            index.set_vectors(ids, embedded.vectors)

    def foreign_vectors(self, user_id: str) -> bool:
        """The user's stored vectors were not made by this memory's model (or their maker is not recorded yet, or a
        re-embed is under way): they are never compared with this model's query vectors."""
        return self.embeddings is not None and self.records.embedding(user_id) != self.embedding_id

    def makes_vectors(self, claim: bool = False) -> bool:
        """Whether this memory's model is the store's, so its writers make vectors (and replace another model's):
        one model per store at a time, changed only by MemCompile.switch_model, or two workers on two models would
        undo each other's vectors. claim (a writer): a store with no model yet gets this one."""
        if self.embedding_id is None:
            return False
        store_model = self.records.store_model(self.embedding_id if claim else None)
        return store_model is None or store_model == self.embedding_id

    def warn_foreign(self, user_id: str) -> None:
        if not self.makes_vectors():
            self.warn_other_model()
            return
        made_by = self.records.embedding(user_id) or "an unrecorded model"
        self.warn_once(
            f"foreign:{user_id}",
            f"dense channel off for user {user_id!r}: its vectors were made by {made_by}; "
            "they are made again in the background from its next add_turns (or by `memcompile repair`)",
        )

    def warn_other_model(self) -> None:
        """Said once per memory: this worker is not on the store's model (makes_vectors)."""
        self.warn_once(
            "store-model",
            f"this memory's embedding model ({self.embedding_id}) is not the store's ({self.records.store_model()}): "
            "it answers from the lexical channels for users whose vectors are the store's model, and stores turns "
            "without vectors; `memcompile reembed` (MemCompile.switch_model) makes this model the store's",
        )

    def warn_once(self, key: str, message: str) -> None:
        """One warning per key and memory (a condition that holds for every query of a user is said once). The keys
        kept are the most recent WARNED_KEYS: a worker serving many users holds a bounded number of them."""
        if key in self._warned:
            with contextlib.suppress(KeyError):  # another thread's warning may have just dropped it
                self._warned.move_to_end(key)
            return
        self._warned[key] = None
        if len(self._warned) > WARNED_KEYS:
            self._warned.popitem(last=False)
        log.warning("%s", message)


def source_digests(documents: list[str]) -> list[str]:
    """The digests stored with vectors as their sources, of the documents they were embedded from."""
    return [hashlib.blake2b(doc.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest() for doc in documents]


def bundles(index: UserIndex, packet_ids: Iterable[str]) -> Bundles:
    """The packets of `index` with their claim bundles."""
    return [(index.packets[p], index.by_packet[p]) for p in packet_ids]


def embedding_identity(embeddings: Embeddings | None) -> str | None:
    """What the stored vectors are recorded as made by: the model's own identity, else its class and model name."""
    if embeddings is None:
        return None
    identity = getattr(embeddings, "identity", None)
    if identity:
        return str(identity)
    # the fields that change what a LangChain embedder returns (model, output size), where it has them
    fields = ("model", "model_name", "deployment", "dimensions", "size", "dim")
    named = [f"{f}={getattr(embeddings, f)}" for f in fields if getattr(embeddings, f, None) not in (None, "")]
    return ":".join([f"{type(embeddings).__module__}.{type(embeddings).__qualname__}", *named])


def build_engine(
    path: Path | None,
    config: MemCompileConfig,
    *,
    embeddings: Embeddings | None,
    llm: Any,
    answer_llm: Any,
    chroma_url: str | None,
    records_url: str | None,
    extractor: Extractor | None,
    scheduler: Scheduler | None,
    dense: bool,
    open_indexes: int = 64,
) -> Engine:
    """The stores and components of one memory: SQLite records and Chroma vectors under `path` (or in memory), the
    offline stages, and the paper's LLM stages through `llm` where one is given. open_indexes: the users' vector
    indexes a local Chroma keeps loaded (the memory's cache_size)."""
    from ..evidence.mmr import DeterministicScheduler
    from ..extract.heuristic import HeuristicExtractor
    from ..store.open import open_records, open_vectors

    reader, config = reader_for(config)
    records = open_records(path, records_url)  # PostgreSQL by URL or $MEMCOMPILE_RECORDS_URL, else SQLite
    # opened at its first use: writes, repairs, reads of vectors
    vectors = open_vectors(path, records, chroma_url, open_indexes)
    if dense and embeddings is None:
        from ..embeddings.minilm import default_embeddings

        embeddings = default_embeddings()
    # cache and usage ledger of the LLM stages (llm.sqlite3 in the store dir), kept when a model is given or exists
    llm_store = LLMStore.open(path, create=answer_llm is not None or llm is not None)
    offline_extractor, offline_scheduler = HeuristicExtractor(config.max_keywords), DeterministicScheduler(config)
    llm_intent: LLMIntent | None = None
    llm_updates: LLMUpdates | None = None
    if llm is not None and llm_store is not None:
        from ..address.llm_intent import LLMIntent
        from ..evidence.llm_scheduler import LLMScheduler
        from ..evidence.llm_updates import LLMUpdates
        from ..extract.llm import LLMExtractor

        client, count = llm_store.client(llm, config), records.add_counts
        extractor = extractor or LLMExtractor(client, config, offline_extractor, count)
        scheduler = scheduler or LLMScheduler(client, config, offline_scheduler, count)
        llm_intent = LLMIntent(client, config, count)
        llm_updates = LLMUpdates(client, config, count)
    return Engine(
        config,
        records,
        vectors,
        embeddings if dense else None,
        extractor or offline_extractor,
        scheduler or offline_scheduler,
        llm_intent,
        llm_store,
        path,
        llm_updates,
        reader,
        records.store_id(),
    )
