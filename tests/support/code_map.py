"""The code map of docs/concepts.md, made from the tree: every module of the package by layer (the layering test's
LAYERS), each with the first sentence of its docstring. `python tests/support/code_map.py --write` puts it in the
page; tests/test_code_map.py fails while the page's map is not what the tree gives."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memcompile_langgraph"
PAGE = ROOT / "docs" / "concepts.md"
BEGIN, END = "<!-- code map: made by tests/support/code_map.py -->", "<!-- end of code map -->"


ABBREVIATIONS = ("Sec", "Eq", "Eqs", "App", "e.g", "i.e")  # the paper's references, which no sentence ends at


def _sentence(path: Path) -> str:
    """The docstring's first sentence: up to a . : or ; before a space, outside parentheses and code."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    depth, code = 0, False
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        code ^= ch == "`"
        if ch in ".:;" and depth <= 0 and not code and text[i + 1 : i + 2] in ("", " "):
            if not text[:i].endswith(ABBREVIATIONS):
                return text[:i]
    return text


def made() -> str:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_layering import LAYERS, _layer

    by_layer: dict[int, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py":
            continue  # the root is the public API (the page says what it offers); a subpackage's only re-exports
        module = ".".join(("memcompile_langgraph", *rel.with_suffix("").parts))
        line = f"- `{rel.as_posix()}`: {_sentence(path)}"
        by_layer.setdefault(_layer(module), []).append(line)
    out = [BEGIN]
    for i in sorted(by_layer):
        out += ["", f"**Layer {i + 1}** ({', '.join(f'`{n}`' for n in LAYERS[i])})", "", *by_layer[i]]
    return "\n".join([*out, "", END])


def page_with_map(page: str) -> str:
    if BEGIN not in page:
        return f"{page.rstrip()}\n\n{made()}\n"
    head, rest = page.split(BEGIN, 1)
    return head + made() + rest.split(END, 1)[1]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page_with_map(PAGE.read_text()))
    else:
        print(made())
