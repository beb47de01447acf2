"""The build plane (packetize -> extract -> place in Cells -> index) over the memory in $MEMCOMPILE_STORE."""

from memcompile_langgraph.ingest_graph import ingest_graph as graph

__all__ = ["graph"]
