"""recall -> model -> remember over the store in $MEMCOMPILE_STORE; ChatOpenAI with OPENAI_API_KEY, else offline.

Set the user in Studio's run context: {"user_id": "tom", "user_name": "Tom"}.
"""

from memcompile_langgraph.integrations.chat_agent import build_chat_agent
from memcompile_langgraph.integrations.studio import studio_memory

graph = build_chat_agent(studio_memory())
