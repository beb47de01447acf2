"""Typed graph states. typing_extensions.TypedDict so `langgraph dev` can serve them on Python < 3.12."""

from __future__ import annotations

from typing import Annotated, Any

from langgraph.channels import UntrackedValue
from typing_extensions import TypedDict

from .address.dense import QuerySimilarities
from .address.routing import Routing
from .extract.base import TurnWindow
from .index.user import UserIndex
from .model import Candidate, DenseHit, Descriptor, Intent, PacketScore, SourcePacket


def merge(left: dict | None, right: dict | None) -> dict:
    return {**(left or {}), **(right or {})}


def add_counts(left: dict | None, right: dict | None) -> dict:
    out = dict(left or {})
    for k, v in (right or {}).items():
        out[k] = out.get(k, 0) + v
    return out


class IngestState(TypedDict, total=False):
    turns: list[Any]  # dicts {speaker, text, time, session?, dia_id?, image_caption?} or TurnInput, maybe Occurrence
    packets: list[SourcePacket]
    windows: list[TurnWindow]  # what the extractor sees of each packet
    facts: list[list[str]]
    descriptors: list[Descriptor]
    cells: list[str]  # Cell id of each descriptor, same order
    counts: Annotated[dict[str, int], add_counts]  # of the committed batch (skipped and warned turns included)
    trace: Annotated[dict[str, Any], merge]


class IngestWork(IngestState, total=False):
    """The ingest graph's own channels: what passes between its stages only."""

    base_version: int  # version of the snapshot the run forked
    pending_counts: dict[str, int]  # counts of this attempt, committed with its records
    attempt: int
    retry: bool
    # the private next index (a fork): never checkpointed; a resumed run has none and starts over
    work_index: Annotated[UserIndex, UntrackedValue(UserIndex)]


class QueryState(TypedDict, total=False):
    query: str
    view: str  # reader view: "bundle" (default), "raw" or "claim"
    max_tokens: int | None  # context budget in tokens (None: the config's context_max_tokens)
    # only what had been said by then ("YYYY-MM-DDTHH:MM:SS", text/timeparse.validate_as_of; None: everything)
    as_of: str | None
    intent: Intent
    bm25: list[tuple[int, float]]  # (descriptor position, raw BM25 score)
    routing: Routing
    candidates: list[Candidate]
    pool: list[PacketScore]  # U_q
    anchors: list[str]  # A_0
    dense: list[DenseHit]  # D_q
    fused: dict[str, float]  # offline fusion score of pool and D_q packets
    frontier_order: list[str]  # sigma_q
    selected: list[str]  # E_q
    context: str  # X_q
    packets: list[dict[str, Any]]  # the selected packets' JSON form (SelectedPacket.to_dict), in schedule order
    note: str  # set when nothing is stored for the user (users.nothing_stored_note)
    trace: Annotated[dict[str, Any], merge]


class QueryWork(QueryState, total=False):
    """The query graph's own channels: QueryState plus what passes between stages only (not input or output)."""

    # knowledge updates: older statement -> its supersession by the newest statement of its subject the frontier
    # stage called into the selection (evidence/updates.py newest_statements, as plain fields); the render stage
    # marks it
    newest: dict[str, dict[str, Any]]

    # e(q+), then e(q) when offline fusion uses the bare question too: 384 floats each, no use to a caller (a
    # served query's output would carry them)
    query_vectors: list[list[float]]

    # the cosine arrays of query_vectors, computed once by the dense stage; never checkpointed (O(packets) floats)
    similarities: Annotated[QuerySimilarities, UntrackedValue(QuerySimilarities)]


__all__ = ["IngestState", "IngestWork", "QueryState", "QueryWork", "merge", "add_counts"]
