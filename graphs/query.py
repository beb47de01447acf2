"""The query plane (one node per stage); runs read the memory in $MEMCOMPILE_STORE for context {"user_id": ...}."""

from memcompile_langgraph.query_graph import query_graph as graph

__all__ = ["graph"]
