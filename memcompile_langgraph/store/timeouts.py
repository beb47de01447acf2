"""Timeouts read from the environment: one rule for every server a store waits on (PostgreSQL, a Chroma server)."""

from __future__ import annotations

import math
import os


def env_seconds(env: str, default: float, what: str, error: type[Exception]) -> float:
    """Seconds from $env, else `default`: a positive finite number, or `error` in one line saying what to give."""
    raw = os.environ.get(env, "").strip()
    try:
        seconds = float(raw) if raw else default
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise error(f"{env}={raw!r}: give the seconds {what}, e.g. {default:g}")
    return seconds
