"""MemCompile as the server's long-term store (graphs/langgraph.store.json: "store" -> "./graphs/store.py:store").

It shares the graphs' memory ($MEMCOMPILE_STORE): what the chat graph remembers for user "tom" is the namespace
("tom",) of /store/items, and what is put there is recalled by the chat graph. One memory per namespace of one label,
the user's (a "." in a user id is "%2E" there): no namespace lies below another user's. The `ttl` section of the
store in langgraph.json applies (the server runs no sweeper for a custom store: this one runs its own).
"""

from memcompile_langgraph.integrations.base_store import (
    MemCompileStore,
    one_label_namespace,
    one_label_user,
    served_ttl,
)
from memcompile_langgraph.integrations.studio import studio_memory

store = MemCompileStore(
    studio_memory(), namespace_to_user=one_label_user, user_to_namespace=one_label_namespace, ttl=served_ttl()
)
store.start_ttl_sweeper()
