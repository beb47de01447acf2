"""docs/concepts.md's code map is the tree's: every module in its layer with what its docstring says it holds. A module
added, moved or removed without `python tests/support/code_map.py --write` fails here."""

from support.code_map import BEGIN, END, PAGE, made, page_with_map


def test_the_code_map_of_the_concepts_page_is_made_from_the_tree():
    page = PAGE.read_text()
    assert page.count(BEGIN) == 1 and page.count(END) == 1
    assert page_with_map(page) == page, "the code map is stale: python tests/support/code_map.py --write"


def test_every_module_is_on_the_map_once():
    from support.code_map import PACKAGE

    lines = made().splitlines()
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            rel = path.relative_to(PACKAGE).as_posix()
            assert sum(line.startswith(f"- `{rel}`:") for line in lines) == 1, rel
