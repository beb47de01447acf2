"""The query plane (one node per stage); runs read the memory in $MEMCOMPILE_STORE for context {"user_id": ...}."""

from memcompile_langgraph.served import served_query_graph

graph = served_query_graph()
