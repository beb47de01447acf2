"""The build plane (packetize -> extract -> place in Cells -> index) over the memory in $MEMCOMPILE_STORE."""

from memcompile_langgraph.served import served_ingest_graph

graph = served_ingest_graph()
