"""MemCompile for LangGraph: query-conditioned memory compilation for long-term agent memory."""

__version__ = "0.1.0"  # the package's version (pyproject.toml reads it from here)

from .config import DEFAULT_CONFIG, MemCompileConfig
from .model import (
    Candidate,
    Cell,
    CompiledContext,
    Descriptor,
    Intent,
    PacketScore,
    SelectedPacket,
    SourcePacket,
    TurnInput,
)

__all__ = [
    "__version__",
    "MemCompile",
    "MemCompileConfig",
    "DEFAULT_CONFIG",
    "CompiledContext",
    "SelectedPacket",
    "SourcePacket",
    "Descriptor",
    "Cell",
    "Candidate",
    "Intent",
    "PacketScore",
    "TurnInput",
]


def __getattr__(name: str):
    # MemCompile pulls in LangGraph, Chroma and onnxruntime; load them only when it is used
    if name == "MemCompile":
        from .memory import MemCompile

        return MemCompile
    raise AttributeError(name)
