"""The ingest graph run batch by batch inside one writer unit of work (what MemCompile.add_turns does)."""

from __future__ import annotations

from .ingest.progress import IngestProgress
from .ingest.turn_input import Occurrence
from .ingest_graph import ingest_graph
from .process import release_free_memory
from .runtime.context import MemoryContext
from .runtime.host import Host
from .runtime.unit_of_work import PacketRows, UnitOfWork

INGEST_BATCH = 256  # turns per ingest-graph run (one records transaction each)


def ingest_turns(
    host: Host, user_id: str, turns: list[Occurrence], progress: bool = False, rows: PacketRows | None = None
) -> dict[str, int]:
    engine = host.engine
    totals: dict[str, int] = {"stored": 0, "descriptors": 0}
    bulk = len(turns) >= INGEST_BATCH  # its freed blocks go back to the system batch by batch (not a single turn's)
    bars = IngestProgress(len(turns), progress, engine.embeddings is not None)
    if hasattr(engine.extractor, "progress"):
        engine.extractor.progress = progress
    try:
        with UnitOfWork(host, user_id, bars.embedded, rows) as unit:
            context = MemoryContext(user_id=user_id, host=host, writer=unit)
            for start in range(0, len(turns), INGEST_BATCH):
                batch = turns[start : start + INGEST_BATCH]
                out = ingest_graph.invoke({"turns": batch}, context=context)
                totals["stored"] += len(out.get("packets", []))
                totals["descriptors"] += len(out.get("descriptors", []))
                for k, v in out.get("counts", {}).items():
                    totals[k] = totals.get(k, 0) + v
                bars.extracted(len(batch), len(out.get("packets", [])))
                if bulk:
                    release_free_memory()
    finally:
        bars.close()
    if bulk:  # the unit's publish and its last batch's vectors
        release_free_memory()
    return totals
