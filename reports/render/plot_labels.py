"""Text on the report's plots that overlaps nothing: point labels placed where they collide with
no other text, legends outside the data, and a check of a drawn figure for overlapping text.

Labels are placed after the figure's layout is final (`settle`): each tries a ring of offsets
around its point and takes the first whose box is inside the axes and clear of every legend and
every label already placed; labels of points at the same spot are merged into one. A label no
offset fits is left off and counted (the plotted line still shows the point).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import matplotlib.pyplot as plt
from matplotlib.transforms import Bbox

# Offsets (points) tried around a point, nearest first; the text's corner nearest the point
# sits at the offset.
OFFSETS = [(dx * r, dy * r) for r in (1, 2, 3, 4) for dx, dy in
           ((5, 4), (5, -4), (-5, 4), (-5, -4), (0, 8), (0, -8))]


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    color: str = "black"
    size: float = 7


def legend_outside(ax: plt.Axes, fontsize: float = 7) -> None:
    """The legend right of the axes (constrained layout makes room), never over the data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=fontsize, loc="upper left",
                  bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def settle(fig: plt.Figure) -> None:
    """Run the layout, so boxes measured from now on are where they will be drawn."""
    fig.canvas.draw()


def _merged(labels: list[Label], ax: plt.Axes) -> list[Label]:
    """Labels of points within 3 px of each other joined into one (same colour kept)."""
    out: list[Label] = []
    spots: list[tuple[float, float]] = []
    for lb in labels:
        px, py = ax.transData.transform((lb.x, lb.y))
        for i, (sx, sy) in enumerate(spots):
            if abs(px - sx) < 3 and abs(py - sy) < 3 and out[i].color == lb.color:
                out[i] = Label(out[i].x, out[i].y, f"{out[i].text}, {lb.text}", lb.color,
                               lb.size)
                break
        else:
            spots.append((px, py))
            out.append(lb)
    return out


def place(ax: plt.Axes, labels: list[Label]) -> int:
    """Annotate `labels` without overlapping each other, other placed text or any legend;
    the number left off because no offset fitted."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg canvas method
    frame = ax.get_window_extent(renderer)
    taken = [t.get_window_extent(renderer) for t in ax.texts if t.get_visible()]
    taken += [lg.get_window_extent(renderer) for a in fig.axes
              if (lg := a.get_legend()) is not None]
    skipped = 0
    for lb in _merged(labels, ax):
        for dx, dy in OFFSETS:
            ann = ax.annotate(lb.text, (lb.x, lb.y), xytext=(dx, dy), textcoords="offset points",
                              ha="left" if dx >= 0 else "right",
                              va="bottom" if dy >= 0 else "top", fontsize=lb.size,
                              color=lb.color)
            ann.set_in_layout(False)
            box = ann.get_window_extent(renderer)
            inside = (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
                      and box.y1 <= frame.y1)
            if inside and not any(box.overlaps(t) for t in taken):
                taken.append(box)
                break
            ann.remove()
        else:
            skipped += 1
    return skipped


def text_boxes(fig: plt.Figure) -> list[tuple[str, Bbox]]:
    """Every piece of text of a drawn figure and its box: titles, axis labels, point labels,
    legends (each as one box)."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg canvas method
    out = []
    sup = fig._suptitle  # type: ignore[attr-defined]  # private: no public getter of the Text
    if sup is not None and sup.get_text():
        out.append(("suptitle", sup.get_window_extent(renderer)))
    for i, ax in enumerate(fig.axes):
        for name, t in (("title", ax.title), ("xlabel", ax.xaxis.label),
                        ("ylabel", ax.yaxis.label), *((f"text {x.get_text()!r}", x)
                                                      for x in ax.texts)):
            if t.get_visible() and t.get_text():
                out.append((f"axes {i} {name}", t.get_window_extent(renderer)))
        if (lg := ax.get_legend()) is not None:
            out.append((f"axes {i} legend", lg.get_window_extent(renderer)))
    return out


def overlapping_text(fig: plt.Figure) -> list[tuple[str, str]]:
    """Pairs of text boxes of a drawn figure that overlap (by more than a pixel)."""
    settle(fig)
    boxes = text_boxes(fig)
    return [(a, b) for (a, ba), (b, bb) in combinations(boxes, 2)
            if (both := Bbox.intersection(ba, bb)) is not None
            and both.width > 1 and both.height > 1]
