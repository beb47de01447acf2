"""`python -m memcompile_langgraph ...`: the `memcompile` command, for environments without its script on PATH."""

import sys

from .cli import main

sys.exit(main())
