"""``measure --plot FILE.png``: the context over the session, drawn with pillow.

The chart shows one point per recorded response (the context the provider counted: prompt +
output) against the model's window, a dashed line at the summary point and one where
compaction is due, a vertical line at each compaction, and at the right a stacked bar of
what fills the context now (the parts, estimated) with its legend. The y axis has round
ticks, the x axis numbers the responses. Labels are placed so that none covers another
(:func:`place`, :func:`legend`); the layout is a small object so tests can read pixels at the
places it drew.

pillow is imported inside the functions that draw or measure text only.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.times import parse_time
from lookout_cli.meter.analysis import Meter

WIDTH, HEIGHT = 960, 540
BACKGROUND = (255, 255, 255)
TEXT = (20, 20, 20)
AXIS = (90, 90, 90)
GRID = (232, 232, 232)
WINDOW = (40, 40, 40)
USAGE_LINE = (31, 94, 196)
USAGE_FILL = (190, 212, 245)
SUMMARY = (230, 140, 0)
DUE = (200, 30, 30)
COMPACTION = (128, 40, 160)
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
FONT_SIZE, TITLE_SIZE = 12, 15
PAD = 2  # white space around a label, inside its box
SAMPLE = 22  # the sample of its line before a threshold's label

Box = tuple[int, int, int, int]  # left, top, right, bottom (exclusive)


def image_format(path: str) -> str:
    """The pillow format ``path``'s extension asks for (.png, or .webp where pillow can write
    it); any other is an error, raised before anything is measured or written."""
    from PIL import features

    formats = {".png": "PNG", **({".webp": "WEBP"} if features.check("webp") else {})}
    ext = os.path.splitext(path)[1].lower()
    if ext not in formats:
        raise LookoutError(f"--plot: {path}: can only write {' or '.join(formats)} "
                           f"files, not {ext or 'a file without an extension'}")
    return formats[ext]


@dataclass(frozen=True)
class Layout:
    """Where things go on the canvas."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = 64
    right: int = 250  # room for the parts bar and its legend
    top: int = 58  # the title, and room for the window's label above the plot
    bottom: int = 52  # the x ticks and the axis caption
    pad: int = 12  # between the axes and the first and last response
    points: int = 1  # responses on the x axis
    y_max: int = 1  # tokens at the top of the plot area (the last y tick)

    @property
    def plot_right(self) -> int:
        return self.width - self.right

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom

    def x_of(self, n: int) -> int:
        """x of the n-th response (0-based)."""
        span = self.plot_right - self.left - 2 * self.pad
        if self.points <= 1:
            return self.left + self.pad + span // 2
        return self.left + self.pad + round(span * n / (self.points - 1))

    def y_of(self, tokens: float) -> int:
        span = self.plot_bottom - self.top
        return self.plot_bottom - round(span * min(tokens, self.y_max) / self.y_max)

    @property
    def bar_left(self) -> int:
        return self.plot_right + 24

    @property
    def bar_right(self) -> int:
        return self.plot_right + 60


def nice_step(span: float, most: int) -> int:
    """The smallest of 1, 2, 2.5, 5 times a power of ten (a whole number) that cuts ``span``
    into at most ``most`` steps."""
    magnitude = 1
    while True:
        for mult in (1, 2, 2.5, 5):
            step = mult * magnitude
            if step == int(step) and span / step <= most:
                return int(step)
        magnitude *= 10


def y_ticks(highest: int, most: int = 6) -> list[int]:
    """Round token values from 0 up to the first at or over ``highest``: 0, 50k ... 200k."""
    step = nice_step(max(highest, 1), most)
    return list(range(0, -(-max(highest, 1) // step) * step + 1, step))


def x_ticks(points: int, pixels: int, least: int = 36) -> list[int]:
    """Response numbers (1-based) to mark on an axis ``pixels`` wide: the first, then every
    multiple of a round step, at least ``least`` pixels apart."""
    if points <= 1:
        return [1] * points
    step = nice_step(points - 1, max(1, pixels // least))
    return [1] + [k for k in range(step, points + 1, step) if k - 1 >= step / 2]


def layout_for(meter: Meter, width: int = WIDTH, height: int = HEIGHT) -> Layout:
    contexts = [p["context"] for p in meter.series]
    highest = max([meter.budget.window, meter.budget.budget, meter.used.tokens, meter.total, *contexts, 1])
    return Layout(width=width, height=height, points=max(1, len(meter.series)), y_max=y_ticks(highest)[-1])


def part_stack(meter: Meter) -> list[tuple[str, str, int]]:
    """(key, label, tokens) of the parts from the bottom of the bar up, largest groups first."""
    return [(p.key, p.label, p.tokens) for p in meter.parts if p.tokens > 0]


def fonts():
    """The labels' font and the title's: pillow's own scalable font (no font file to find),
    its bitmap font where pillow has no FreeType or is older than 10.1."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=FONT_SIZE), ImageFont.load_default(size=TITLE_SIZE)
    except TypeError:
        return ImageFont.load_default(), ImageFont.load_default()


def text_box(font, text: str, x: int, y: int, lead: int = 0) -> Box:
    """The box of ``text`` drawn at (x + lead, y), with PAD around it, one line high."""
    line = font.getbbox("Ag")[3]
    return x - PAD, y - PAD, x + lead + round(font.getlength(text)) + PAD, y + line + PAD


def overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def inside(box: Box, bounds: Box) -> bool:
    return bounds[0] <= box[0] and bounds[1] <= box[1] and box[2] <= bounds[2] and box[3] <= bounds[3]


def place(wanted: list[list[Box]], bounds: Box, taken: list[Box] = ()) -> list[Box]:
    """For each label, the first of its candidate boxes inside ``bounds`` that covers neither
    a box in ``taken`` (the lines) nor a label placed before it; failing that the first that
    covers no label (a label may cross a line, never hide another), failing that its first."""
    placed: list[Box] = []
    for candidates in wanted:
        fits = [b for b in candidates if inside(b, bounds) and not any(overlaps(b, p) for p in placed)]
        placed.append(next((b for b in fits if not any(overlaps(b, t) for t in taken)), fits[0] if fits else candidates[0]))
    return placed


def _shifted(box: Box, dy: int) -> Box:
    return box[0], box[1] + dy, box[2], box[3] + dy


def thresholds(window: int, summary_point: int, due_at: int) -> list[tuple]:
    """(tokens, label, colour, (dash, width)) of each horizontal line: the window, the summary
    point and, when it differs, where compaction is due; the highest first, so that of two close
    lines the upper gets the label place above them."""
    levels = [(window, f"window {_short(window)}", WINDOW, (0, 2)),
              (summary_point, f"summary point {_short(summary_point)}", SUMMARY, (8, 2))]
    if due_at != summary_point:
        levels.append((due_at, f"compaction due {_short(due_at)}", DUE, (4, 1)))
    return sorted(levels, key=lambda level: -level[0])


def label_boxes(lay: Layout, font, levels: list[tuple], marks: list[tuple[int, str]], title_bottom: int) -> list[Box]:
    """Where the labels of the ``thresholds`` lines and of the compactions' lines (x, label) go:
    the nearest places above or below each threshold and down each compaction's line that
    cover no other label and no line, between the title and the x axis."""
    line_h = font.getbbox("Ag")[3]
    rules = [(lay.left, lay.y_of(t) - 1, lay.plot_right, lay.y_of(t) + 2) for t, *_ in levels]
    rules += [(x - 1, lay.top, x + 2, lay.plot_bottom) for x, _ in marks]
    nearest = [d for n in range(0, lay.height, 2) for d in (-n, n)]
    wanted = []
    starts = [lay.left + lay.pad] + [x + 6 for x, _ in marks]  # at the left, or right of a compaction
    for tokens, text, *_ in levels:
        y = lay.y_of(tokens) - 4 - line_h
        wanted.append([text_box(font, text, x, y + d + (line_h + 8 if d > 0 else 0), SAMPLE)
                       for d in nearest for x in starts])
    for x, text in marks:  # from the top down, at the right of the line or else at its left
        width = round(font.getlength(text))
        wanted.append([text_box(font, text, start, lay.top + 6 + d)
                       for d in nearest if d >= 0 for start in (x + 6, x - 6 - width)])
    return place(wanted, (lay.left + 1, title_bottom, lay.plot_right, lay.plot_bottom - 1), rules)


def _wrap(font, text: str, room: int) -> list[str]:
    lines = [""]
    for word in text.split():
        joined = f"{lines[-1]} {word}".strip()
        if font.getlength(joined) <= room or not lines[-1]:
            lines[-1] = joined
        else:
            lines.append(word)
    return lines


@dataclass(frozen=True)
class LegendEntry:
    colour: tuple[int, int, int]
    swatch: Box
    lines: list[tuple[int, int, str]]  # x, y, text of each line
    box: Box  # the swatch and all its lines


def legend(entries: list[tuple[tuple[int, int, int], str]], font, lay: Layout) -> list[LegendEntry]:
    """The legend at the right of the parts bar, top down (the top part first, as in the bar):
    each (colour, text) a swatch and its text, wrapped to the room left on the canvas."""
    x = lay.bar_right + 12
    text_x = x + 16
    room = lay.width - 8 - text_x
    line = font.getbbox("Ag")[3] + 1
    y = lay.top
    placed = []
    for colour, text in entries:
        lines = [(text_x, y + i * line, t) for i, t in enumerate(_wrap(font, text, room))]
        right = max(text_x + round(font.getlength(t)) for _, _, t in lines)
        bottom = y + len(lines) * line
        placed.append(LegendEntry(colour, (x, y + 3, x + 10, y + 13), lines, (x, y, right, bottom)))
        y = bottom + 4
    return placed


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}".removesuffix(".0") + "M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}".removesuffix(".0") + "k"
    return str(n)


def tick_label(n: int) -> str:
    """A round token count as the y axis shows it: 0, 2.5k, 50k, 1.5M."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    return f"{n / 1000:g}k" if n >= 1000 else str(n)


def _rule(draw, y: int, x0: int, x1: int, colour, dash: int, width: int) -> None:
    """A horizontal line, dashed when ``dash`` (its dashes' length) is not 0."""
    if not dash:
        draw.line([(x0, y), (x1, y)], fill=colour, width=width)
    for x in range(x0, x1, dash * 2) if dash else ():
        draw.line([(x, y), (min(x + dash, x1), y)], fill=colour, width=width)


def x_caption(series: Collection[dict]) -> str:
    """What the x axis counts, and when the responses were (from their timestamps)."""
    caption = "response (prompt + output, as the provider counted them)"
    times = [t for t in (parse_time(p.get("timestamp")) for p in series) if t is not None]
    if not series:
        return "response (none in the transcript records the provider's count)"
    if not times:
        return caption
    seconds = round((max(times) - min(times)).total_seconds())
    took = next(f"{seconds // unit} {name}" for unit, name in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))
                if seconds >= unit or unit == 1)
    when = f"{min(times):%Y-%m-%d %H:%M} UTC"
    return f"{caption}: {len(series)} from {when} over {took}" if seconds else f"{caption}: {len(series)} at {when}"


def draw(meter: Meter, path: str, width: int = WIDTH, height: int = HEIGHT, title: str | None = None) -> Layout:
    """Draw the chart into ``path`` (the format its extension names) and return the layout it used."""
    from PIL import Image, ImageDraw

    image_type = image_format(path)
    lay = layout_for(meter, width, height)
    image = Image.new("RGB", (width, height), BACKGROUND)
    pen = ImageDraw.Draw(image)
    font, title_font = fonts()
    line_h = font.getbbox("Ag")[3]

    heading = title or f"{meter.model or 'unknown model'}: {meter.used.tokens:,} of {meter.budget.budget:,} tokens ({meter.percent:.1f}%)"
    pen.text((lay.left, 10), heading, fill=TEXT, font=title_font)
    title_bottom = 10 + title_font.getbbox("Ag")[3] + 4

    # y: grid lines at round values; x: responses numbered from 1
    for tokens in y_ticks(lay.y_max):
        y = lay.y_of(tokens)
        if tokens:
            pen.line([(lay.left, y), (lay.plot_right, y)], fill=GRID)
        label = tick_label(tokens)
        pen.text((lay.left - 6 - font.getlength(label), y - line_h // 2 - 1), label, fill=AXIS, font=font)
    pen.text((lay.left - 6 - font.getlength("tokens"), lay.top - 2 * line_h - 2), "tokens", fill=AXIS, font=font)
    pen.line([(lay.left, lay.top), (lay.left, lay.plot_bottom)], fill=AXIS)
    pen.line([(lay.left, lay.plot_bottom), (lay.plot_right, lay.plot_bottom)], fill=AXIS)
    for k in x_ticks(len(meter.series), lay.plot_right - lay.left - 2 * lay.pad):
        x = lay.x_of(k - 1)
        pen.line([(x, lay.plot_bottom), (x, lay.plot_bottom + 4)], fill=AXIS)
        pen.text((x - font.getlength(str(k)) / 2, lay.plot_bottom + 6), str(k), fill=AXIS, font=font)
    caption = x_caption(meter.series)
    pen.text(((lay.left + lay.plot_right - font.getlength(caption)) / 2, lay.plot_bottom + 8 + line_h + 6),
             caption, fill=AXIS, font=font)

    # the window, the summary point, where compaction is due: lines first, labels placed later
    levels = thresholds(meter.budget.window, meter.budget.summary_point, meter.budget.due_at)
    for tokens, _, colour, style in levels:
        _rule(pen, lay.y_of(tokens), lay.left, lay.plot_right, colour, *style)

    # usage per response: filled area under the line
    points = [(lay.x_of(p["n"]), lay.y_of(p["context"])) for p in meter.series]
    if len(points) >= 2:
        pen.polygon([(points[0][0], lay.plot_bottom), *points, (points[-1][0], lay.plot_bottom)], fill=USAGE_FILL)
        pen.line(points, fill=USAGE_LINE, width=2)
    for x, y in points:
        pen.ellipse([x - 2, y - 2, x + 2, y + 2], fill=USAGE_LINE)

    # compactions: a line between the last response before and the first after each one
    spacing = (lay.x_of(1) - lay.x_of(0)) if lay.points > 1 else 0
    at: dict[int, list] = {}  # x of the line: the compactions there
    for row in meter.compactions:
        after = next((p["n"] for p in meter.series if p["line"] > row.line), None)
        if after is None:
            x = lay.plot_right - 2 if meter.series else lay.x_of(0)
        else:
            x = lay.x_of(after) - spacing // 2 if after > 0 else lay.left + lay.pad // 2
        at.setdefault(x, []).append(row)
    marks = []  # (x, label) of each line
    for x, rows in at.items():
        pen.line([(x, lay.top), (x, lay.plot_bottom)], fill=COMPACTION, width=2)
        row, label = rows[0], "compacted" if len(rows) == 1 else f"compacted {len(rows)}x"
        if len(rows) == 1 and row.before is not None:
            label += f" {_short(row.before)}"
            if row.after is not None:
                label += f" -> {_short(row.after)}"
        marks.append((x, label))

    # the labels: each as near its line as it can be without covering another label or line;
    # a threshold's label starts with a sample of its line, so it reads even when moved
    labels = [(text, colour, style) for _, text, colour, style in levels] + [(t, COMPACTION, None) for _, t in marks]
    for box, (text, colour, style) in zip(label_boxes(lay, font, levels, marks, title_bottom), labels):
        pen.rectangle(box, fill=BACKGROUND)
        x, y = box[0] + PAD, box[1] + PAD
        if style is not None:
            _rule(pen, y + line_h // 2 + 1, x, x + SAMPLE - 5, colour, style[0] // 2, style[1])
            x += SAMPLE
        pen.text((x, y), text, fill=colour, font=font)

    # the parts now, as a stacked bar on the same scale, and its legend top down
    below = 0
    stack = part_stack(meter)
    for key, _, tokens in stack:
        bottom, top = lay.y_of(below), lay.y_of(below + tokens)
        below += tokens
        if top < bottom:
            pen.rectangle([lay.bar_left, top, lay.bar_right, bottom - 1], fill=PART_COLOURS.get(key, (180, 180, 180)))
    entries = [(PART_COLOURS.get(key, (180, 180, 180)), f"{_short(tokens)} {label}") for key, label, tokens in reversed(stack)]
    for entry in legend(entries, font, lay):
        pen.rectangle([entry.swatch[0], entry.swatch[1], entry.swatch[2] - 1, entry.swatch[3] - 1], fill=entry.colour)
        for x, y, text in entry.lines:
            pen.text((x, y), text, fill=TEXT, font=font)
    now = "now (est.)"
    pen.text(((lay.bar_left + lay.bar_right - font.getlength(now)) / 2, lay.plot_bottom + 6), now, fill=AXIS, font=font)

    save = {"lossless": True} if image_type == "WEBP" else {}
    image.save(path, format=image_type, **save)
    return lay
