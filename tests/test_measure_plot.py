"""``lookout measure --plot``: a picture people would show. Real runs of the installed program
on real transcripts, the image read back with pillow: the type the extension names, refused
extensions, round y ticks, a numbered x axis, labels and legend that fit and never overlap."""

from __future__ import annotations

import itertools

import orjson
import pytest
from conftest import DATA, REPO, SHARED_TRANSCRIPTS, run_lookout
from PIL import Image, features

from lookout_cli.meter import plot

CLAUDE_EXAMPLE = REPO / "examples" / "claude-code-session.jsonl"
CODEX_EXAMPLE = REPO / "examples" / "codex-rollout.jsonl"  # window 258,400: not a round number
CCVIEWER = SHARED_TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
CODEX_COMPACTED = DATA / "codex" / "compacted.jsonl"
REAL = [CLAUDE_EXAMPLE, CODEX_EXAMPLE, CODEX_COMPACTED] + ([CCVIEWER] if CCVIEWER.exists() else [])


def _plot(source, tmp_path, name="context.png"):
    """Run ``measure --json --plot``: the image and the JSON report."""
    out = tmp_path / name
    result = run_lookout("measure", "--json", "--plot", str(out), str(source))
    assert result.returncode == 0, result.stderr.decode()
    return Image.open(out), orjson.loads(result.stdout)


def _layout(report: dict) -> plot.Layout:
    """The layout draw() used, from the report's numbers."""
    contexts = [p["context"] for p in report["series"]]
    highest = max([report["budget"]["window"], report["budget"]["budget"], report["used"]["tokens"],
                   report["total"]["tokens"], *contexts, 1])
    return plot.Layout(points=max(1, len(report["series"])), y_max=plot.y_ticks(highest)[-1])


def _disjoint(boxes) -> bool:
    return not any(plot.overlaps(a, b) for a, b in itertools.combinations(boxes, 2))


CANVAS = (0, 0, plot.WIDTH, plot.HEIGHT)


# --- the file -----------------------------------------------------------------------------------

@pytest.mark.parametrize("source", REAL, ids=lambda p: p.stem[:24])
def test_plot_is_a_png_of_the_canvas_size_and_stdout_is_only_the_transcript(source, tmp_path):
    out = tmp_path / "context.png"
    result = run_lookout("measure", "-q", "--plot", str(out), str(source))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == source.read_bytes()
    image = Image.open(out)
    assert image.format == "PNG" and image.size == (plot.WIDTH, plot.HEIGHT)


def test_webp_is_written_as_webp(tmp_path):
    if not features.check("webp"):
        pytest.skip("this pillow cannot write WebP")
    image, _ = _plot(CODEX_EXAMPLE, tmp_path, "context.WEBP")
    assert image.format == "WEBP" and image.size == (plot.WIDTH, plot.HEIGHT)


@pytest.mark.parametrize("name", ["context.svg", "context.jpg", "context", "-"])
def test_another_extension_is_refused_in_one_line_and_nothing_is_written(name, tmp_path):
    result = run_lookout("measure", "--plot", str(tmp_path / name), str(CODEX_EXAMPLE), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "--plot" in lines[0] and ".png" in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_the_extension_is_checked_before_the_transcript_is_read(tmp_path):
    result = run_lookout("measure", "--plot", str(tmp_path / "x.svg"), str(tmp_path / "missing.jsonl"))
    assert result.returncode == 2 and b"--plot" in result.stderr and b"missing.jsonl" not in result.stderr


# --- the axes -----------------------------------------------------------------------------------

def test_y_ticks_are_round_values_from_zero_to_at_least_the_highest():
    assert plot.y_ticks(200_000) == [0, 50_000, 100_000, 150_000, 200_000]
    assert plot.y_ticks(258_400) == [0, 50_000, 100_000, 150_000, 200_000, 250_000, 300_000]
    assert plot.y_ticks(1_048_576) == [0, 200_000, 400_000, 600_000, 800_000, 1_000_000, 1_200_000]
    assert plot.y_ticks(128_000)[-1] == 150_000 and plot.y_ticks(1) == [0, 1]
    for highest in (1, 7, 93, 999, 4061, 12_345, 200_000, 258_400, 1_000_000, 1_048_576, 2_000_000):
        ticks = plot.y_ticks(highest)
        step = ticks[1]
        assert ticks[-1] >= highest > ticks[-2] and 3 <= len(ticks) - 1 <= 6 or highest == 1
        assert step / 10 ** (len(str(step)) - 1) in (1, 2, 2.5, 5), step
        assert ticks == list(range(0, ticks[-1] + 1, step))
    assert [plot.tick_label(t) for t in (0, 2500, 50_000, 250_000, 1_000_000, 1_500_000)] == \
        ["0", "2.5k", "50k", "250k", "1M", "1.5M"]


def test_the_plot_tops_at_a_round_tick_not_at_the_window(tmp_path):
    image, report = _plot(CODEX_EXAMPLE, tmp_path)
    lay = _layout(report)
    assert report["budget"]["window"] == 258_400 and lay.y_max == 300_000
    px = image.convert("RGB").getpixel
    # the window's line at its own height, below the top grid line at 300k
    assert px((lay.left + lay.pad + 200, lay.y_of(258_400))) == plot.WINDOW
    assert px((lay.left + 300, lay.y_of(300_000))) == plot.GRID
    assert px((lay.left + 300, lay.y_of(250_000))) == plot.GRID


def test_x_ticks_number_the_responses_on_a_round_step():
    assert plot.x_ticks(9, 600) == list(range(1, 10))
    assert plot.x_ticks(39, 600) == [1, 5, 10, 15, 20, 25, 30, 35]
    assert plot.x_ticks(1000, 600) == [1, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    assert plot.x_ticks(1, 600) == [1] and plot.x_ticks(0, 600) == []


def test_the_x_axis_has_a_tick_under_each_numbered_response(tmp_path):
    image, report = _plot(CODEX_EXAMPLE, tmp_path)
    lay = _layout(report)
    px = image.convert("RGB").getpixel
    assert len(report["series"]) == 39
    for k in (1, 5, 35):
        assert px((lay.x_of(k - 1), lay.plot_bottom + 3)) == plot.AXIS
    assert px((lay.x_of(1), lay.plot_bottom + 3)) == plot.BACKGROUND  # response 2: no tick
    assert "39 from 2025-11-17 21:32 UTC over 5 min" in plot.x_caption(report["series"])


# --- labels and legend --------------------------------------------------------------------------

def _entries(report: dict) -> list:
    stack = [(p["key"], p["label"], p["tokens"]) for p in report["parts"] if p["tokens"] > 0]
    return [(plot.PART_COLOURS.get(k, (0, 0, 0)), f"{plot._short(t)} {label}") for k, label, t in reversed(stack)]


@pytest.mark.parametrize("source", REAL, ids=lambda p: p.stem[:24])
def test_the_legend_of_a_real_transcript_fits_the_canvas_without_overlaps(source, tmp_path):
    report = orjson.loads(run_lookout("measure", "--json", str(source)).stdout)
    font, _ = plot.fonts()
    lay = _layout(report)
    entries = plot.legend(_entries(report), font, lay)
    assert len(entries) == len(_entries(report))
    height = font.getbbox("Ag")[3]
    lines = [(x, y, x + font.getlength(text), y + height) for e in entries for x, y, text in e.lines]
    assert all(plot.inside(box, CANVAS) for box in lines + [e.box for e in entries])
    assert _disjoint([e.box for e in entries]) and _disjoint(lines)
    # every word of every label is drawn: nothing cut off (the old legend cut at 17 characters)
    assert [" ".join(t for _, _, t in e.lines) for e in entries] == [text for _, text in _entries(report)]
    assert all(e.box[0] > lay.bar_right for e in entries)  # right of the bar


def test_the_longest_legend_there_can_be_fits():
    from lookout_cli.meter.analysis import CONVERSATION_LABELS, SETUP_LABELS

    font, _ = plot.fonts()
    labels = [*SETUP_LABELS.values(), "System prompt and tool definitions", *CONVERSATION_LABELS.values()]
    entries = plot.legend([((0, 0, 0), f"999k {label}") for label in labels], font, plot.Layout())
    assert all(plot.inside(e.box, CANVAS) for e in entries) and _disjoint([e.box for e in entries])


@pytest.mark.parametrize("lines", [(200_000, 167_480, 168_000), (258_400, 244_800, 238_400),
                                   (200_000, 170_000, 180_000), (1_000_000, 967_000, 968_000)])
def test_threshold_and_compaction_labels_cover_no_label_and_no_line(lines):
    font, _ = plot.fonts()
    lay = plot.Layout(points=9, y_max=plot.y_ticks(lines[0])[-1])
    levels = plot.thresholds(*lines)
    marks = [(lay.x_of(n) - 20, f"compacted {n}0k -> 3k") for n in (1, 4, 7)] + [(lay.plot_right - 2, "compacted 6x")]
    boxes = plot.label_boxes(lay, font, levels, marks, title_bottom=34)
    assert len(boxes) == len(levels) + len(marks) and _disjoint(boxes)
    assert all(plot.inside(b, (lay.left, 34, lay.plot_right, lay.plot_bottom)) for b in boxes)
    rules = [(lay.left, lay.y_of(t) - 1, lay.plot_right, lay.y_of(t) + 2) for t, *_ in levels]
    rules += [(x - 1, lay.top, x + 2, lay.plot_bottom) for x, _ in marks]
    assert not any(plot.overlaps(b, r) for b in boxes for r in rules)
    # each threshold's label stays next to its line: at most two label rows away
    for (tokens, *_), box in zip(levels, boxes):
        assert abs((box[1] + box[3]) / 2 - lay.y_of(tokens)) < 3 * (box[3] - box[1])


def test_of_two_close_lines_the_upper_is_labelled_above_them(tmp_path):
    if not CCVIEWER.exists():
        pytest.skip("shared transcripts are not here")
    report = orjson.loads(run_lookout("measure", "--json", str(CCVIEWER)).stdout)
    b = report["budget"]
    due = b["compaction_due_at"]
    assert due > b["summary_point"] and due - b["summary_point"] <= 1000  # 2 px apart
    font, _ = plot.fonts()
    lay = _layout(report)
    levels = plot.thresholds(b["window"], b["summary_point"], due)
    boxes = dict(zip([text.split()[0] for _, text, *_ in levels], plot.label_boxes(lay, font, levels, [], 34)))
    assert boxes["compaction"][3] <= lay.y_of(due) < lay.y_of(b["summary_point"]) <= boxes["summary"][1]
