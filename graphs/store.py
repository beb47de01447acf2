"""MemCompile as the server's long-term store (graphs/langgraph.store.json: "store" -> "./graphs/store.py:store").

It shares the graphs' memory ($MEMCOMPILE_STORE): what the chat graph remembers for user "tom" is the namespace
("tom",) of /store/items, and what is put there is recalled by the chat graph.
"""

from memcompile_langgraph.integrations.base_store import MemCompileStore
from memcompile_langgraph.integrations.studio import studio_memory

store = MemCompileStore(studio_memory())
