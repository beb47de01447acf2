"""Table 6's sampling parameters (temperature 0, 2,048 completion tokens) for a chat model someone else built."""

from __future__ import annotations

import logging
from typing import Any

from ..config import MemCompileConfig

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, str]] = set()  # (model class and name, what differs): each said once per process


class SamplingParametersError(ValueError):
    """The paper profile was given a model whose sampling parameters differ from Table 6 and cannot be set."""


def parameter_gap(model: Any, cfg: MemCompileConfig) -> dict[str, tuple[Any, Any]]:
    """parameter -> (the model's value, Table 6's value), for each one that differs."""
    wanted = {"temperature": cfg.llm_temperature, "max_tokens": cfg.llm_max_tokens}
    return {k: (getattr(model, k, None), v) for k, v in wanted.items() if getattr(model, k, None) != v}


def _describe(gap: dict[str, tuple[Any, Any]]) -> str:
    return ", ".join(f"{k} {have!r} (Table 6: {want!r})" for k, (have, want) in gap.items())


def table6_model(model: Any, cfg: MemCompileConfig) -> Any:
    """The model at Table 6's parameters when cfg.llm_table6_sampling (a copy with them set, or SamplingParametersError
    naming what differs and cannot be set); else the model as given, with one warning when its parameters differ."""
    gap = parameter_gap(model, cfg)
    if not gap:
        return model
    name = f"{type(model).__name__} {getattr(model, 'model_name', None) or getattr(model, 'model', '')}".strip()
    if not cfg.llm_table6_sampling:
        if (name, _describe(gap)) not in _WARNED:
            _WARNED.add((name, _describe(gap)))
            log.warning("chat model %s runs with its own sampling parameters: %s", name, _describe(gap))
        return model
    fields = getattr(type(model), "model_fields", {})
    missing = [k for k in gap if k not in fields]
    if missing or not hasattr(model, "model_copy"):
        raise SamplingParametersError(
            f"the paper profile runs its models at Table 6's sampling parameters, but {name} differs and has no "
            f"{' or '.join(missing or list(gap))} parameter to set: {_describe(gap)}"
        )
    return model.model_copy(update={k: want for k, (_, want) in gap.items()})
