"""Draws the conformance matrix (conformance.json) as a heatmap PNG with matplotlib.

`python -m toolwire.check.chart conformance.json conformance.png`; rows are
implementation/format, columns properties, colour the share of cases passed.
"""

from __future__ import annotations

import json
import sys
from importlib import import_module
from pathlib import Path

from toolwire.check.properties import DEFECTS as PROPERTIES

__all__ = ["draw"]


def draw(data: Path, png: Path) -> None:
    """Render the matrix in `data` (written by `report.write_report`) to `png`."""
    matplotlib = import_module("matplotlib")
    matplotlib.use("Agg")
    plt = import_module("matplotlib.pyplot")
    rows = json.loads(data.read_text(encoding="utf-8"))["matrix"]
    labels = [f"{r['impl']} / {r['format']}" for r in rows]
    values = [[(r[p][0] / r[p][1]) if r[p][1] else float("nan") for p in PROPERTIES] for r in rows]
    fig, ax = plt.subplots(figsize=(1.3 * len(PROPERTIES) + 3, 0.45 * len(rows) + 1.6))
    image = ax.imshow(values, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(PROPERTIES)), PROPERTIES, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), labels)
    for y, row in enumerate(rows):
        for x, prop in enumerate(PROPERTIES):
            passed, total = row[prop]
            text = f"{passed}/{total}" if total else "—"
            ax.text(x, y, text, ha="center", va="center", fontsize=7)
    ax.set_title("toolwire check: cases passed per defect property")
    fig.colorbar(image, ax=ax, fraction=0.03, label="share passed")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    draw(Path(sys.argv[1]), Path(sys.argv[2]))
