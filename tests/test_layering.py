"""The package's module-level imports form no cycle, and runtime/'s modules none at all; every import, also one inside a function, goes down the layers
(LAYERS) or stays in its layer, but for the few upward ones named in UPWARD with why; nothing decides by reference
counts or steers runs through module-level context variables."""

import ast
from pathlib import Path

import memcompile_langgraph

ROOT = Path(memcompile_langgraph.__file__).parent
PACKAGE = "memcompile_langgraph"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# lowest first: a module may import from its own layer and the ones before it
LAYERS = (
    ("model", "config", "settings", "extras", "users", "text", "process", "index.growarray", "index.persistent"),
    ("address", "evidence", "extract", "ingest", "index", "llm"),
    ("store", "embeddings"),
    ("runtime",),
    ("query_graph", "ingest_graph", "stage_graph", "state"),
    ("memory", "upkeep", "surfaces", "add_turns", "warm", "served"),
    ("integrations", "cli", "eval", "bench", "__main__"),
)
# imports that go up, each inside a function, each for a reason
UPWARD = {
    # MemCompile offers its LangChain / LangGraph surfaces, each imported on first use
    ("surfaces", "integrations.retriever"),
    ("surfaces", "integrations.memory_nodes"),
    ("surfaces", "integrations.tool"),
}


def _layer(module: str) -> int:
    name = module.removeprefix(f"{PACKAGE}.")
    found = [
        (len(prefix), i) for i, names in enumerate(LAYERS) for prefix in names if f"{name}.".startswith(f"{prefix}.")
    ]
    assert found, f"{module} is in no layer of LAYERS"
    return max(found)[1]


def _imports(path: Path, everywhere: bool) -> set[str]:
    """Package modules imported at module level (with everywhere, also inside functions)."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if everywhere else tree.body:
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


def _graph(everywhere: bool = False) -> dict[str, set[str]]:
    files = {_module(p): p for p in ROOT.rglob("*.py")}
    return {m: {t for t in _imports(p, everywhere) if t in files and t != m} for m, p in files.items()}


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


def test_runtime_modules_import_each_other_in_no_cycle():
    """Inside runtime/ not even a cycle through imports made for type checking or inside functions: each module can
    be read knowing only the ones below it (user_state, then engine, consistency, cache, host, the writers)."""
    runtime = f"{PACKAGE}.runtime."
    graph = {
        m: {t for t in ts if t.startswith(runtime)}
        for m, ts in _graph(everywhere=True).items()
        if m.startswith(runtime)
    }
    assert sorted(m for m in graph if m in _reaches(graph, m)) == []


def test_every_import_goes_down_the_layers_but_the_named_few():
    upward = set()
    for module, targets in _graph(everywhere=True).items():
        if module == PACKAGE:
            continue  # the package root re-exports the public names of every layer
        upward |= {(module, t) for t in targets if t != PACKAGE and _layer(t) > _layer(module)}
    named = {(f"{PACKAGE}.{a}", f"{PACKAGE}.{b}") for a, b in UPWARD}
    assert upward == named


def test_runtime_imports_nothing_above_it():
    """What runs a graph (add_turns.py, warm.py, served.py) sits beside the facade, above the graphs: the runtime
    the graphs' nodes read is below them, and nothing in it reaches up, not even inside a function."""
    runtime = _layer(f"{PACKAGE}.runtime")
    upward = {
        (m, t)
        for m, ts in _graph(everywhere=True).items()
        if m.startswith(f"{PACKAGE}.runtime")
        for t in ts
        if t != PACKAGE and _layer(t) > runtime
    }
    assert upward == set()


def test_graphs_and_runtime_sit_below_the_facade_and_integrations_above_it():
    graph = _graph()
    below = [m for m in graph if m != PACKAGE and _layer(m) <= _layer(f"{PACKAGE}.query_graph")]
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
