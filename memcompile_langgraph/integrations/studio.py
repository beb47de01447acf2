"""The memory `graphs/` serves in LangGraph Studio (see served.py)."""

from ..served import DEFAULT_STORE
from ..served import served_memory as studio_memory

__all__ = ["DEFAULT_STORE", "studio_memory"]
