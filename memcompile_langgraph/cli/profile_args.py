"""`--profile default|paper`: the project's best measured setting or the paper's choices (MemCompileConfig.paper())."""

from __future__ import annotations

import argparse
from typing import Any

from ..config import DENSE_DOCUMENTS, PROFILES


def add_profile_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="default",
        help="default: the best measured setting; paper: every choice as MemCompile's paper makes it "
        "(without a model its LLM-free path, A2); docs/configuration.md's 'Deviations from the paper' lists "
        "the differences",
    )
    p.add_argument(
        "--dense-document",
        choices=DENSE_DOCUMENTS,
        default=None,
        help="what the dense channel embeds per packet (default: the config's); docs/configuration.md",
    )


def profile_config(args: argparse.Namespace) -> Any:
    from ..config import MemCompileConfig

    config = MemCompileConfig.profile_named(getattr(args, "profile", None) or "default")
    document = getattr(args, "dense_document", None)
    return config.with_overrides(dense_document=document) if document else config
