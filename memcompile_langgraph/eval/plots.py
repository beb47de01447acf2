"""PNG plots of a run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .baselines import BASELINES

log = logging.getLogger(__name__)

RECALL_BY_CATEGORY = "recall_by_category.png"
RECALL_BY_BUDGET = "recall_by_budget.png"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _recalls(per_category: dict[str, Any], overall: dict[str, Any], categories: list[str]) -> list[float]:
    return [per_category.get(c, {}).get("gold_recall", 0.0) for c in categories] + [overall["gold_recall"]]


def _legend_below(ax, columns: int) -> None:
    """Under the axes, where it can cover no bar or curve."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=columns, fontsize=8, frameon=False)


def category_figure(report: dict[str, Any]):
    """Grouped bars: Gold Recall per category and overall, the system beside each top-12 raw-turn baseline."""
    plt = _pyplot()
    categories = [c for c, f in report["by_category"].items() if f.get("questions")]
    groups = [*categories, "overall"]
    series = {"MemCompile": _recalls(report["by_category"], report["overall"], categories)}
    for name, label in BASELINES.items():
        b = report["baselines"].get(f"{name}_top12")
        if b:
            series[f"{label} top-12"] = _recalls(b["by_category"], b, categories)
    fig, ax = plt.subplots(figsize=(8, 4.6))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [100 * v for v in values], width, label=label)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel("Gold Recall (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"Gold Recall by category, this run ({report['overall']['questions']} questions, <= 12 packets)")
    _legend_below(ax, len(series))
    fig.tight_layout()
    return fig, ax


def budget_figure(report: dict[str, Any]):
    """Gold Recall of the first k packets along the selection order and along each baseline ranking, k = 1..12."""
    plt = _pyplot()
    curves = report["budget_curve"]
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    ax.plot(curves["k"], [100 * v for v in curves["system"]], marker="o", label="MemCompile (selection order)")
    for name, label in BASELINES.items():
        if name in curves:
            ax.plot(curves["k"], [100 * v for v in curves[name]], marker=".", label=label)
    ax.set_xlabel("packet budget k")
    ax.set_ylabel("Gold Recall (%)")
    ax.set_ylim(0, 100)
    ax.set_xticks(curves["k"])
    ax.grid(alpha=0.3)
    ax.set_title(f"Gold Recall of the first k packets, this run ({report['overall']['questions']} questions)")
    _legend_below(ax, 3)
    fig.tight_layout()
    return fig, ax


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)


def recall_by_category(report: dict[str, Any], path: Path) -> None:
    _save(category_figure(report)[0], path)


def recall_by_budget(report: dict[str, Any], path: Path) -> None:
    _save(budget_figure(report)[0], path)


def write_plots(report: dict[str, Any], out: Path) -> list[str]:
    """The PNG file names written into out (none when no question has a result)."""
    if not report["overall"].get("questions"):
        return []
    try:
        import matplotlib  # noqa: F401 - an optional dependency (extra "plots")
    except ImportError:
        log.warning("matplotlib is not installed: no plots (pip install 'memcompile-langgraph[plots]')")
        return []
    recall_by_category(report, out / RECALL_BY_CATEGORY)
    recall_by_budget(report, out / RECALL_BY_BUDGET)
    return [RECALL_BY_CATEGORY, RECALL_BY_BUDGET]
