"""``measure --plot FILE.png``: the context over the session, drawn with pillow.

The chart shows one point per recorded response (the context the provider counted: prompt +
output) against the model's window, a dashed line at the summary point and one where
compaction is due, a vertical line at each compaction, and at the right a stacked bar of
what fills the context now (the parts, estimated). The layout is a small object so tests can
read pixels at the places it drew.

pillow is imported inside :func:`draw` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from lookout_cli.meter.analysis import Meter

WIDTH, HEIGHT = 960, 540
BACKGROUND = (255, 255, 255)
AXIS = (90, 90, 90)
GRID = (232, 232, 232)
WINDOW = (40, 40, 40)
USAGE_LINE = (31, 94, 196)
USAGE_FILL = (190, 212, 245)
SUMMARY = (230, 140, 0)
DUE = (200, 30, 30)
COMPACTION = (128, 40, 160)
NOW = (31, 94, 196)
PART_COLOURS = {
    "system": (96, 96, 96),
    "tools": (140, 140, 140),
    "inferred": (120, 120, 120),
    "rules": (170, 120, 60),
    "environment": (160, 160, 110),
    "memory": (120, 160, 120),
    "skills": (100, 150, 170),
    "messages": (60, 130, 220),
    "replies": (40, 170, 120),
    "thinking": (150, 210, 170),
    "tool_results": (230, 150, 40),
    "summaries": (170, 90, 200),
    "images": (220, 80, 120),
    "notices": (200, 200, 60),
}


@dataclass(frozen=True)
class Layout:
    """Where things go on the canvas."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = 80
    right: int = 230  # room for the parts bar and its legend
    top: int = 40
    bottom: int = 50
    points: int = 1  # responses on the x axis
    y_max: int = 1  # tokens at the top of the plot area

    @property
    def plot_right(self) -> int:
        return self.width - self.right

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom

    def x_of(self, n: int) -> int:
        """x of the n-th response (0-based)."""
        span = self.plot_right - self.left
        if self.points <= 1:
            return self.left + span // 2
        return self.left + round(span * n / (self.points - 1))

    def y_of(self, tokens: float) -> int:
        span = self.plot_bottom - self.top
        return self.plot_bottom - round(span * min(tokens, self.y_max) / self.y_max)

    @property
    def bar_left(self) -> int:
        return self.plot_right + 30

    @property
    def bar_right(self) -> int:
        return self.plot_right + 70


def layout_for(meter: Meter, width: int = WIDTH, height: int = HEIGHT) -> Layout:
    contexts = [p["context"] for p in meter.series]
    y_max = max([meter.budget.window, meter.budget.budget, meter.used.tokens, meter.total, *contexts, 1])
    return Layout(width=width, height=height, points=max(1, len(meter.series)), y_max=y_max)


def part_stack(meter: Meter) -> list[tuple[str, str, int]]:
    """(key, label, tokens) of the parts from the bottom of the bar up, largest groups first."""
    return [(p.key, p.label, p.tokens) for p in meter.parts if p.tokens > 0]


def _dashed(draw, y: int, x0: int, x1: int, colour, dash: int = 8, width: int = 2) -> None:
    for x in range(x0, x1, dash * 2):
        draw.line([(x, y), (min(x + dash, x1), y)], fill=colour, width=width)


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return str(n)


def draw(meter: Meter, path: str, width: int = WIDTH, height: int = HEIGHT, title: str | None = None) -> Layout:
    """Draw the chart into ``path`` (PNG) and return the layout it used."""
    from PIL import Image, ImageDraw, ImageFont

    lay = layout_for(meter, width, height)
    image = Image.new("RGB", (width, height), BACKGROUND)
    pen = ImageDraw.Draw(image)
    font = ImageFont.load_default()

    # grid and axes
    for frac in (0.25, 0.5, 0.75, 1.0):
        y = lay.y_of(lay.y_max * frac)
        pen.line([(lay.left, y), (lay.plot_right, y)], fill=GRID)
        pen.text((4, y - 6), _short(round(lay.y_max * frac)), fill=AXIS, font=font)
    pen.text((4, lay.plot_bottom - 6), "0", fill=AXIS, font=font)
    pen.line([(lay.left, lay.top), (lay.left, lay.plot_bottom)], fill=AXIS)
    pen.line([(lay.left, lay.plot_bottom), (lay.plot_right, lay.plot_bottom)], fill=AXIS)
    pen.text((lay.left, lay.plot_bottom + 8), "responses (one point each, prompt + output as recorded)", fill=AXIS, font=font)

    # the window, the summary point, where compaction is due
    b = meter.budget
    y_window = lay.y_of(b.window)
    pen.line([(lay.left, y_window), (lay.plot_right, y_window)], fill=WINDOW, width=2)
    pen.text((lay.left + 4, y_window - 14), f"window {_short(b.window)}", fill=WINDOW, font=font)
    y_summary = lay.y_of(b.summary_point)
    _dashed(pen, y_summary, lay.left, lay.plot_right, SUMMARY)
    pen.text((lay.plot_right - 150, y_summary - 14), f"summary point {_short(b.summary_point)}", fill=SUMMARY, font=font)
    if b.due_at != b.summary_point:
        y_due = lay.y_of(b.due_at)
        _dashed(pen, y_due, lay.left, lay.plot_right, DUE, dash=4, width=1)
        pen.text((lay.plot_right - 150, y_due + 2), f"compaction due {_short(b.due_at)}", fill=DUE, font=font)

    # usage per response: filled area under the line
    points = [(lay.x_of(p["n"]), lay.y_of(p["context"])) for p in meter.series]
    if len(points) >= 2:
        pen.polygon([(points[0][0], lay.plot_bottom), *points, (points[-1][0], lay.plot_bottom)], fill=USAGE_FILL)
        pen.line(points, fill=USAGE_LINE, width=2)
    for x, y in points:
        pen.ellipse([x - 2, y - 2, x + 2, y + 2], fill=USAGE_LINE)

    # compactions: a line between the last response before and the first after each one
    spacing = (lay.x_of(1) - lay.x_of(0)) if lay.points > 1 else 0
    for row in meter.compactions:
        after = next((p["n"] for p in meter.series if p["line"] > row.line), None)
        if after is None:
            x = lay.plot_right - 2 if meter.series else lay.x_of(0)
        else:
            x = lay.x_of(after) - spacing // 2 if after > 0 else lay.x_of(0)
        pen.line([(x, lay.top), (x, lay.plot_bottom)], fill=COMPACTION, width=2)
        label = "compacted"
        if row.before is not None:
            label += f" {_short(row.before)}"
            if row.after is not None:
                label += f" -> {_short(row.after)}"
        pen.text((x + 3, lay.top + 2), label, fill=COMPACTION, font=font)

    # the parts now, as a stacked bar on the same scale
    below = 0
    legend_y = lay.top
    for key, label, tokens in part_stack(meter):
        bottom, top = lay.y_of(below), lay.y_of(below + tokens)
        below += tokens
        colour = PART_COLOURS.get(key, (180, 180, 180))
        if top < bottom:
            pen.rectangle([lay.bar_left, top, lay.bar_right, bottom - 1], fill=colour)
        pen.rectangle([lay.bar_right + 10, legend_y, lay.bar_right + 20, legend_y + 10], fill=colour)
        pen.text((lay.bar_right + 24, legend_y - 1), f"{_short(tokens):>5} {label[:17]}", fill=AXIS, font=font)
        legend_y += 14
    pen.text((lay.bar_left - 6, lay.plot_bottom + 8), "parts now", fill=AXIS, font=font)

    heading = title or f"{meter.model or 'unknown model'}: {meter.used.tokens:,} of {b.budget:,} tokens ({meter.percent:.1f}%)"
    pen.text((lay.left, 12), heading, fill=(0, 0, 0), font=font)
    image.save(path, format="PNG")
    return lay

