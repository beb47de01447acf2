"""Print the first code block after a heading of README.md or a docs page, so that CI runs it as written:
`python .ci/readme_block.py "### MCP server"` (a ```python block of README.md), or
`python .ci/readme_block.py "## Install" docs/inspector.md bash`."""

import re
import sys
from pathlib import Path

heading = sys.argv[1]
page = sys.argv[2] if len(sys.argv) > 2 else "README.md"
lang = sys.argv[3] if len(sys.argv) > 3 else "python"
text = Path(__file__).resolve().parents[1].joinpath(page).read_text()
if f"\n{heading}\n" not in text:
    sys.exit(f"{page} has no heading {heading!r}")
block = re.search(rf"```{lang}\n(.*?)```", text.split(f"\n{heading}\n", 1)[1], re.S)
if block is None:
    sys.exit(f"{page} has no {lang} block after {heading!r}")
print(block.group(1), end="")
