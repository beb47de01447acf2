"""Print the first ```python block after a heading of README.md (`python .ci/readme_block.py "### MCP server"`), so
CI runs the README's example as written."""

import re
import sys
from pathlib import Path

text = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
heading = sys.argv[1]
if f"\n{heading}\n" not in text:
    sys.exit(f"README.md has no heading {heading!r}")
block = re.search(r"```python\n(.*?)```", text.split(f"\n{heading}\n", 1)[1], re.S)
if block is None:
    sys.exit(f"README.md has no python block after {heading!r}")
print(block.group(1), end="")
