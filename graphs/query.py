"""The query plane (one node per stage) over the store in $MEMCOMPILE_STORE, served to LangGraph Studio."""
from memcompile_langgraph.integrations.studio import studio_memory

graph = studio_memory().query_graph
