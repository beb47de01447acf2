"""The package's module-level imports form no cycle; the graphs and the runtime sit below the facade, the
integrations above it; nothing decides by reference counts or steers runs through module-level context variables."""

import ast
from pathlib import Path

import memcompile_langgraph

ROOT = Path(memcompile_langgraph.__file__).parent
PACKAGE = "memcompile_langgraph"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path) -> set[str]:
    """Package modules imported at module level (imports inside functions are deliberate lazy ones)."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith(PACKAGE)}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith(PACKAGE):
                out.add(target)
                out |= {f"{target}.{a.name}" for a in node.names}  # `from . import x` names a module
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in ROOT.rglob("*.py")}
    return {m: {t for t in _top_level_imports(p) if t in files and t != m} for m, p in files.items()}


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_module_level_imports_have_no_cycle():
    graph = _graph()
    assert sorted(m for m in graph if m in _reaches(graph, m)) == []


def test_graphs_and_runtime_sit_below_the_facade_and_integrations_above_it():
    graph = _graph()
    below = [
        m
        for m in graph
        if m.split(".")[1:2] in (["query_graph"], ["ingest_graph"], ["runtime"], ["address"], ["evidence"])
    ]
    assert below
    for m in below:
        reached = _reaches(graph, m)
        assert f"{PACKAGE}.memory" not in reached, m
        assert not any(r.startswith(f"{PACKAGE}.integrations") for r in reached), m


def test_no_reference_counting_and_no_module_level_context_variables():
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        assert "getrefcount" not in text, path
        for node in ast.parse(text).body:
            value = getattr(node, "value", None)
            call = value.func if isinstance(value, ast.Call) else None
            name = getattr(call, "attr", None) or getattr(call, "id", None)
            assert name != "ContextVar", f"{path}: module-level ContextVar"
