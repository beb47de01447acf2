"""Run one function over many items on a bounded thread pool, results in input order, optional progress bar."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

A = TypeVar("A")
R = TypeVar("R")


def run_concurrently(fn: Callable[[A], R], items: Sequence[A], workers: int, progress: str | None = None) -> list[R]:
    """progress: a bar label, or None for no bar."""
    bar = None
    if progress and items:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc=progress, unit="call", leave=False)
    try:
        if workers <= 1 or len(items) <= 1:
            out = []
            for item in items:
                out.append(fn(item))
                if bar:
                    bar.update(1)
            return out
        with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="memcompile-llm") as pool:
            # each call in a copy of the caller's context: a tracing span or LangChain run stays its parent
            futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
            if bar:
                for f in futures:
                    f.add_done_callback(lambda _f: bar.update(1))
            return [f.result() for f in futures]
    finally:
        if bar:
            bar.close()
