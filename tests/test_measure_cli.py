"""``lookout measure`` as a program: --fail-at exit codes (also from a real git pre-commit hook),
colour only on a terminal and never with NO_COLOR, and the --plot PNG read back with pillow."""

from __future__ import annotations

import os
import pty
import select
import shutil
import stat
import subprocess

import orjson
import pytest
from conftest import DATA, SHARED_TRANSCRIPTS, lookout_exe, run_lookout

CLAUDE_SMALL = DATA / "measure" / "claude-small.jsonl"
CODEX_COMPACTED = DATA / "codex" / "compacted.jsonl"
CCVIEWER = SHARED_TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"


def used_tokens(path) -> int:
    return orjson.loads(run_lookout("measure", "--json", str(path)).stdout)["used"]["tokens"]


# --- --fail-at ----------------------------------------------------------------------------------

def test_fail_at_exit_codes_and_the_transcript_still_written():
    data = CLAUDE_SMALL.read_bytes()
    budget = str(2 * used_tokens(CLAUDE_SMALL))  # the context is then exactly 50% of it
    at = run_lookout("measure", "--budget", budget, "--fail-at", "50", input=data)
    assert at.returncode == 1
    assert at.stdout == data  # the transcript went out first
    assert b"at or over --fail-at 50%" in at.stderr
    over = run_lookout("measure", "--budget", budget, "--fail-at", "49.9%", input=data)
    assert over.returncode == 1 and over.stdout == data
    under = run_lookout("measure", "--budget", budget, "--fail-at", "50.1", input=data)
    assert under.returncode == 0 and under.stdout == data
    # quiet keeps standard error empty; the exit status still says it
    quiet = run_lookout("measure", "-q", "--budget", budget, "--fail-at", "50", input=data)
    assert quiet.returncode == 1 and quiet.stdout == data
    # the report modes fail the same way, after printing their report
    as_json = run_lookout("measure", "--json", "--budget", budget, "--fail-at", "50", input=data)
    assert as_json.returncode == 1
    assert orjson.loads(as_json.stdout)["fail_at"] == {"percent": 50.0, "failed": True}


def _git(repo, *args, env=None):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, timeout=60)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_fail_at_in_a_git_pre_commit_hook(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", GIT_CONFIG_NOSYSTEM="1",
               HOME=str(tmp_path))
    assert _git(repo, "init", "-q", env=env).returncode == 0
    shutil.copy(CLAUDE_SMALL, repo / "session.jsonl")
    budget = 2 * used_tokens(CLAUDE_SMALL)
    hook = repo / ".git" / "hooks" / "pre-commit"
    exe = " ".join(f'"{part}"' for part in lookout_exe())
    hook.write_text(
        "#!/bin/sh\n"
        "# refuse to commit a session whose context is over the limit\n"
        f'exec {exe} measure -q --budget {budget} --fail-at "$LIMIT" session.jsonl > /dev/null\n'
    )
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    assert _git(repo, "add", "session.jsonl", env=env).returncode == 0

    blocked = _git(repo, "commit", "-q", "-m", "add session", env={**env, "LIMIT": "50"})
    assert blocked.returncode != 0
    assert _git(repo, "rev-parse", "--verify", "-q", "HEAD", env=env).returncode != 0  # no commit made

    allowed = _git(repo, "commit", "-q", "-m", "add session", env={**env, "LIMIT": "60"})
    assert allowed.returncode == 0, allowed.stderr.decode()
    assert _git(repo, "rev-parse", "--verify", "-q", "HEAD", env=env).returncode == 0


# --- colour only on a terminal ------------------------------------------------------------------

def _run_on_pty(args, env, stdout_tty=False) -> tuple[int, bytes, bytes]:
    """Run lookout with standard error (and optionally standard output) on a pseudo-terminal."""
    master, slave = pty.openpty()
    with open(CLAUDE_SMALL, "rb") as stdin:
        proc = subprocess.Popen([*lookout_exe(), *args], stdin=stdin, stderr=slave,
                                stdout=slave if stdout_tty else subprocess.PIPE, env=env)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = b"" if stdout_tty else proc.stdout.read()
    return proc.wait(timeout=60), out, seen


@pytest.fixture
def tty_env():
    env = dict(os.environ, TERM="xterm")
    env.pop("NO_COLOR", None)
    return env


def test_bar_is_amber_on_a_terminal(tty_env):
    used = used_tokens(CLAUDE_SMALL)
    code, out, err = _run_on_pty(["measure", "--budget", str(round(used / 0.8))], tty_env)
    assert code == 0 and out == CLAUDE_SMALL.read_bytes()
    assert b"\x1b[33m" in err and b"amber" in err  # yellow: amber


def test_bar_is_red_at_the_summary_point_on_a_terminal(tty_env):
    used = used_tokens(CLAUDE_SMALL)
    code, _, err = _run_on_pty(["measure", "--budget", str(round(used / 0.9))], tty_env)
    assert code == 0 and b"\x1b[31m" in err and b"red" in err


def test_no_colour_with_no_color_set(tty_env):
    used = used_tokens(CLAUDE_SMALL)
    code, _, err = _run_on_pty(["measure", "--budget", str(round(used / 0.8))], {**tty_env, "NO_COLOR": "1"})
    assert code == 0 and b"amber" in err and b"\x1b[" not in err


def test_no_colour_when_not_a_terminal():
    used = used_tokens(CLAUDE_SMALL)
    result = run_lookout("measure", "--budget", str(round(used / 0.8)), str(CLAUDE_SMALL),
                         env=dict(os.environ, TERM="xterm"))
    assert b"amber" in result.stderr and b"\x1b[" not in result.stderr


def test_report_only_colours_standard_output_only_on_a_terminal(tty_env):
    used = used_tokens(CLAUDE_SMALL)
    args = ["measure", "--report-only", "--budget", str(round(used / 0.8))]
    code, _, seen = _run_on_pty(args, tty_env, stdout_tty=True)
    assert code == 0 and b"\x1b[33m" in seen and b"What fills it" in seen
    piped = run_lookout(*args, str(CLAUDE_SMALL), env=tty_env)
    assert b"What fills it" in piped.stdout and b"\x1b[" not in piped.stdout


# --- the plot -----------------------------------------------------------------------------------

def _layout(report: dict):
    """The plot's layout, rebuilt from the JSON report's numbers."""
    from lookout_cli.meter.plot import Layout, y_ticks

    contexts = [p["context"] for p in report["series"]]
    highest = max([report["budget"]["window"], report["budget"]["budget"], report["used"]["tokens"],
                   report["total"]["tokens"], *contexts, 1])
    return Layout(points=max(1, len(report["series"])), y_max=y_ticks(highest)[-1])  # the top tick


def _plot(path, tmp_path):
    from PIL import Image

    png = tmp_path / "context.png"
    result = run_lookout("measure", "--json", "--plot", str(png), str(path))
    assert result.returncode == 0, result.stderr.decode()
    report = orjson.loads(result.stdout)
    image = Image.open(png)
    assert image.format == "PNG"
    return image.convert("RGB"), report


def test_plot_is_a_png_with_the_window_summary_point_usage_and_parts(tmp_path):
    from lookout_cli.meter import plot

    if not CCVIEWER.exists():
        pytest.skip("shared transcripts are not here")
    image, report = _plot(CCVIEWER, tmp_path)
    assert image.size == (plot.WIDTH, plot.HEIGHT)
    lay = _layout(report)
    px = image.getpixel
    b = report["budget"]
    assert px((lay.left + 3, lay.y_of(b["window"]))) == plot.WINDOW
    assert px((lay.left + 3, lay.y_of(b["summary_point"]))) == plot.SUMMARY  # first dash
    assert px((lay.left + 12, lay.y_of(b["summary_point"]))) != plot.SUMMARY  # the gap after it
    # usage: filled under the line between the last two responses, empty above it
    series = report["series"]
    assert len(series) == report["cache"]["requests"] == 9
    x = (lay.x_of(len(series) - 2) + lay.x_of(len(series) - 1)) // 2
    top = max(lay.y_of(series[-1]["context"]), lay.y_of(series[-2]["context"]))
    assert px((x, (top + lay.plot_bottom) // 2)) == plot.USAGE_FILL
    assert px((x, lay.y_of(series[-1]["context"]) - 25)) in (plot.BACKGROUND, plot.GRID)
    # the parts now: a stacked bar on the same scale, first part at the bottom
    parts = [p for p in report["parts"] if p["tokens"] > 0]
    mid = (lay.bar_left + lay.bar_right) // 2
    assert px((mid, lay.plot_bottom - 2)) == plot.PART_COLOURS[parts[0]["key"]]
    below = sum(p["tokens"] for p in parts[:-1])
    assert px((mid, (lay.y_of(below) + lay.y_of(below + parts[-1]["tokens"])) // 2)) == plot.PART_COLOURS[parts[-1]["key"]]
    assert px((mid, lay.y_of(report["total"]["tokens"]) - 3)) == plot.BACKGROUND  # nothing above the total


def test_plot_marks_compactions(tmp_path):
    from lookout_cli.meter import plot

    image, report = _plot(CODEX_COMPACTED, tmp_path)
    lay = _layout(report)
    marked = [p["n"] for p in report["series"] if p["compaction_before"]]
    assert marked == [2, 3] and len(report["compactions"]) == 2
    half = (lay.x_of(1) - lay.x_of(0)) // 2
    for n in marked:
        assert image.getpixel((lay.x_of(n) - half, lay.plot_bottom - 5)) == plot.COMPACTION
    # between compactions there is none
    assert image.getpixel((lay.x_of(1) - half, lay.plot_bottom - 5)) != plot.COMPACTION


def test_plot_to_an_unwritable_place_is_an_error(tmp_path):
    result = run_lookout("measure", "--plot", str(tmp_path / "missing" / "x.png"), str(CLAUDE_SMALL))
    assert result.returncode == 2 and b"--plot" in result.stderr
