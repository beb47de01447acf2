"""Optional dependencies: which extra of the package installs a module, and the one line that says so."""

from __future__ import annotations

PACKAGE = "memcompile-langgraph"
# the top-level module -> the extra (pyproject's optional-dependencies) that installs it
EXTRA_OF = {
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "mcp": "mcp",
    "rank_bm25": "eval",
    "matplotlib": "plots",
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def missing_extra(exc: ImportError, needed_for: str) -> MissingExtra | None:
    """The MissingExtra to raise for an ImportError of a module an extra installs (None for any other module)."""
    module = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return None
    return MissingExtra(f"{needed_for} needs {module}: pip install '{PACKAGE}[{extra}]'", name=exc.name)
