"""The memory `graphs/` serves in LangGraph Studio (see runtime/served.py)."""

from ..runtime.served import DEFAULT_STORE
from ..runtime.served import served_memory as studio_memory

__all__ = ["DEFAULT_STORE", "studio_memory"]
