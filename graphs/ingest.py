"""The build plane (packetize -> extract -> place in Cells -> index) over the store in $MEMCOMPILE_STORE."""
from memcompile_langgraph.integrations.studio import studio_memory

graph = studio_memory().ingest_graph
