"""``hlo-opt ablate --plot FILE``: the slowdown per disabled pass as a bar chart (the
seed's figures 7-8), with matplotlib (the ``plot`` extra) drawing off-screen."""
from __future__ import annotations

import os

from ..errors import HloError
from .report import MARK_STRONG, MARK_WEAK, table_order

__all__ = ["check_plot_path", "plot_slowdowns"]

_FORMATS = (".png", ".svg", ".pdf")


def check_plot_path(path: str):
    """Fail before a long sweep, not after it: the format and matplotlib.  Returns pyplot."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in _FORMATS:
        raise HloError(f"--plot {path}: the file name must end in {', '.join(_FORMATS)}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise HloError("--plot needs matplotlib: pip install 'hlo-opt[plot]'") from None
    return plt


def plot_slowdowns(document: dict, path: str) -> None:
    plt = check_plot_path(path)
    rows = [r for r in table_order(document["passes"]) if r["status"] != "no_change"]
    rows.reverse()  # the largest slowdown at the top
    labels, values, colors = [], [], []
    for r in rows:
        name = r["pass"] if r.get("occurrence") is None else r["occurrence"]
        s = r.get("slowdown")
        if s is None:
            labels.append(f"DIS_{name} ({r['status']})")
            values.append(0.0)
            colors.append("#888888")
            continue
        labels.append(f"DIS_{name}" + (" (wrong result)" if r["status"] == "wrong_result"
                                       else ""))
        values.append(s)
        colors.append("#d62728" if s > MARK_STRONG else "#ff7f0e" if s > MARK_WEAK
                      else "#1f77b4")
    height = max(2.5, 0.28 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(8, height))
    try:
        ax.barh(range(len(rows)), values, color=colors)
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("time with the pass disabled / baseline time")
        base = document["baseline"]
        ax.set_title(f"{document['module']}: {document['pipeline']} on {document['backend']}"
                     f" (baseline {base['time_s'] * 1e3:.3g} ms, {base['kernels']} kernels)",
                     fontsize=9)
        fig.tight_layout()
        try:
            fig.savefig(path)
        except OSError as e:
            raise HloError(f"{path}: error: cannot write ({e.strerror})") from None
    finally:
        plt.close(fig)
