"""What a new user meets first, through the installed ``lookout``: a mistyped command, Ctrl-C
at any moment, the git hooks' messages, the report's words."""

from __future__ import annotations

import os
import pty
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from conftest import REPO, lookout_exe, run_lookout
from test_integrations import _git, nearly_full_transcript

EXAMPLE = REPO / "examples" / "claude-code-session.jsonl"
CODEX = REPO / "examples" / "codex-rollout.jsonl"


def test_a_mistyped_command_gets_the_nearest_one():
    done = run_lookout("mesure", "x.jsonl")
    assert done.returncode == 2
    assert b"No such command 'mesure'. Did you mean 'measure'?" in done.stderr
    far = run_lookout("zzz")
    assert far.returncode == 2 and b"No such command 'zzz'." in far.stderr and b"Did you mean" not in far.stderr


def _interrupted(delay: float, tmp_path: Path) -> tuple[int, str]:
    env = {**os.environ, "LOOKOUT_NO_CONFIG": "1", "LOOKOUT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([*lookout_exe(), "measure", "--no-cache", "-q", str(EXAMPLE)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err.decode()


def test_ctrl_c_while_lookout_loads_is_one_line_and_130(tmp_path):
    """Ctrl-C while click and the command were still being imported printed a traceback and
    exited with the signal. Before the interpreter runs lookout's code the signal ends the process
    as it would any program (-2: a shell shows 130), and an editable install's site hook can be
    interrupted too (Python's own fatal error), or an import of the interpreter's or of the entry
    script's, before it reaches lookout's (a traceback with no frame of lookout's files): none is
    lookout's to answer."""
    answered = 0
    for delay in (0.03, 0.05, 0.07, 0.09, 0.12, 0.15, 0.2, 0.3, 0.5, 0.8):
        status, err = _interrupted(delay, tmp_path)
        if status == -signal.SIGINT and not _frames_of_lookout(err) or "init_import_site" in err:
            continue
        if status == 0:
            continue  # finished before the signal came
        assert status == 130 and err.strip() == "lookout: interrupted" and "Traceback" not in err, (delay, status, err)
        answered += 1
    assert answered >= 3


def test_lookout_leaves_once_its_exit_handlers_ran_and_its_output_is_out(tmp_path):
    """lookout ends the process without the interpreter's teardown (``__main__.leave``): the exit
    handlers still run (an extension's, here), every byte of the transcript reaches the pipe,
    the status is the command's, and a reader gone away still gets 141."""
    import sys

    mark = tmp_path / "handled"
    code = ("import atexit, pathlib, runpy, sys\n"
            f"atexit.register(lambda: pathlib.Path({str(mark)!r}).write_text('ran'))\n"
            "sys.argv = ['lookout', *sys.argv[1:]]\nrunpy.run_module('lookout_cli', run_name='__main__')")
    env = dict(os.environ, LOOKOUT_CACHE_DIR=str(tmp_path / "cache"), NO_COLOR="1")
    done = subprocess.run([sys.executable, "-c", code, "measure", "-q", "--no-discover", str(EXAMPLE)],
                          capture_output=True, env=env, cwd=REPO, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == EXAMPLE.read_bytes() and mark.read_text() == "ran"
    failed = subprocess.run([sys.executable, "-c", code, "measure", "-q", "--no-discover", "--fail-at", "0.001",
                             str(EXAMPLE)], capture_output=True, env=env, cwd=REPO, timeout=60, check=False)
    assert failed.returncode == 1 and failed.stdout == EXAMPLE.read_bytes()
    assert failed.stderr.decode().startswith("lookout: measure: context at")
    pipeline = f'{shlex.join(lookout_exe())} measure --no-discover "$1" | head -c 10; echo "status ${{PIPESTATUS[0]}}" >&2'
    shell = subprocess.run(["bash", "-c", pipeline, "_", str(EXAMPLE)], capture_output=True, env=env, timeout=60,
                           check=False)
    assert shell.stdout == EXAMPLE.read_bytes()[:10]
    assert shell.stderr.decode().splitlines()[-1] == "status 141" and b"Traceback" not in shell.stderr


def _frames_of_lookout(traceback: str) -> list[str]:
    """The frames of a traceback in lookout's own files (the entry script's line that imports
    lookout names it too, and is not one)."""
    return [line for line in traceback.splitlines()
            if line.lstrip().startswith('File "') and f"{os.sep}lookout_cli{os.sep}" in line]


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shutil.copy(REPO / "integrations" / "pre-commit", repo / ".git" / "hooks" / "pre-commit")
    return repo


def _env(path: str, **extra) -> dict:
    env = dict(os.environ, PATH=path, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", LOOKOUT_NO_CONFIG="1")
    env.update(extra)
    return env


def _with_lookout() -> str:
    return f"{Path(lookout_exe()[0]).parent}{os.pathsep}{os.environ['PATH']}"


def _without_lookout(tmp_path: Path) -> str:
    """PATH with git and bash but no lookout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "bash", "env"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    return str(bin_dir)


def test_git_hook_says_lookout_is_missing_not_over_budget(repo, tmp_path):
    (repo / "s.jsonl").write_bytes(nearly_full_transcript(20_000))
    _git(repo, "add", "s.jsonl")
    path = _without_lookout(tmp_path)
    done = _git(repo, "commit", "-qm", "s", env=_env(path))
    assert done.returncode != 0
    assert "lookout is not installed or not on PATH" in done.stderr and "budget" not in done.stderr
    hook = subprocess.run([str(repo / ".git" / "hooks" / "pre-commit")], cwd=repo, capture_output=True, text=True,
                          env=_env(path))
    assert hook.returncode == 127


def test_git_hook_passes_on_lookouts_error_for_a_bad_setting(repo):
    (repo / "s.jsonl").write_bytes(nearly_full_transcript(20_000))
    _git(repo, "add", "s.jsonl")
    hook = subprocess.run([str(repo / ".git" / "hooks" / "pre-commit")], cwd=repo, capture_output=True, text=True,
                          env=_env(_with_lookout(), LOOKOUT_FAIL_AT="ninety"))
    assert hook.returncode == 2, hook.stderr
    assert "s.jsonl was not checked: " in hook.stderr and "--fail-at" in hook.stderr
    assert "budget (lookout" not in hook.stderr


def _framework_entry(hook_id: str) -> list[str]:
    """The ``entry`` of a hook in .pre-commit-hooks.yaml (a folded scalar), split as the
    pre-commit framework splits it."""
    lines = (REPO / ".pre-commit-hooks.yaml").read_text().splitlines()
    start = lines.index(f"- id: {hook_id}")
    at = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("entry:"))
    entry = lines[at].split("entry:", 1)[1].strip()
    if entry == ">-":
        folded = []
        for line in lines[at + 1:]:
            if not line.startswith("    "):
                break
            folded.append(line.strip())
        entry = " ".join(folded)
    return shlex.split(entry)


def test_pre_commit_framework_hook_checks_every_file_and_names_each(tmp_path):
    full_a, small, full_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    full_a.write_bytes(nearly_full_transcript(190_000))
    small.write_bytes(nearly_full_transcript(20_000))
    full_b.write_bytes(nearly_full_transcript(195_000))
    broken = tmp_path / "d.jsonl"
    broken.write_bytes(b'{"not": "a transcript"\n')
    entry = _framework_entry("lookout-budget")
    done = subprocess.run([*entry, str(full_a), str(small), str(full_b)], capture_output=True, text=True,
                          env=_env(_with_lookout()))
    assert done.returncode == 1, done.stderr
    assert f"{full_a}: at or over 90%" in done.stderr and f"{full_b}: at or over 90%" in done.stderr
    assert str(small) not in done.stderr
    bad = subprocess.run([*entry, str(small), str(broken)], capture_output=True, text=True, env=_env(_with_lookout()))
    assert bad.returncode == 2 and f"{broken}: not checked: lookout: error:" in bad.stderr, bad.stderr


def _report(*args: str) -> str:
    done = run_lookout("measure", "--report-only", "--no-cache", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()  # --report-only: the report is the output


def test_report_says_what_is_approximate_and_why_two_totals_differ():
    claude = _report(str(EXAMPLE))
    assert "o200k_base tokenizer (an approximation: Claude's own tokenizer is not public)" in claude
    assert "(Used, 21,562, is the provider's own count; the parts are lookout's count of the prompt)" in claude
    assert "counted with the o200k_base tokenizer\n" in _report(str(CODEX))  # OpenAI's own: nothing to say


def test_a_meter_under_the_hidden_level_reads_low_beside_its_bar(tmp_path):
    small = tmp_path / "s.jsonl"
    small.write_bytes(nearly_full_transcript(5_000))
    text = _report(str(small))
    context = next(line for line in text.splitlines() if line.startswith("Context ["))
    assert context.endswith("low") and "hidden" not in context
    assert "Meter: low under 10% (a status line hides it)" in text
    report = tmp_path / "report.json"
    run_lookout("measure", "--report-only", "--report", str(report), str(small))
    assert orjson.loads(report.read_bytes())["meter"]["state"] == "hidden"  # the JSON schema keeps its word


@pytest.mark.parametrize("data, says", [
    (b'{"id": 1, "title": "groceries"}\n{"id": 2, "title": "bills"}\n',
     "is not a transcript lookout reads: its records are objects with the keys 'id', 'title'"),
    (b"just some notes\nnot JSON at all\n", "none of its first 2 lines is a JSON object"),
])
@pytest.mark.parametrize("command", [["measure", "--fail-at", "50"], ["compact", "--force"], ["clear-images"]])
def test_a_file_in_no_known_format_is_an_error_not_a_pass(tmp_path, data, says, command):
    """It measured 0% with exit 0, so --fail-at passed in CI."""
    notes = tmp_path / "notes.jsonl"
    notes.write_bytes(data)
    done = run_lookout(*command, str(notes))
    err = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b"", err
    assert says in err and "it reads claude-code, codex, openai, anthropic, gemini-cli" in err
    assert err.count("lookout: error:") == 1


def test_the_wrong_format_forced_is_an_error_that_names_the_right_one():
    done = run_lookout("measure", "--no-cache", "--format", "codex", "--fail-at", "50", str(EXAMPLE))
    assert done.returncode == 2 and done.stdout == b""
    assert (f"{EXAMPLE} is not in the codex format: it looks like claude-code (drop --format, or use --format "
            "claude-code)") in done.stderr.decode()
    assert run_lookout("measure", "--no-cache", "--format", "claude-code", "-q", str(EXAMPLE)).returncode == 0
    assert run_lookout("measure", "-q", input=b"").returncode == 0  # empty input: empty output, as ever


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, bytes, bytes]:
    """Run lookout with standard output on a pseudo-terminal: (status, what the terminal
    showed, standard error)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*lookout_exe(), *args], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=subprocess.PIPE, cwd=cwd, env={**os.environ, "LOOKOUT_NO_CONFIG": "1"})
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed: the process is done with it
            break
        if not chunk:
            break
        shown += chunk
    err = proc.stderr.read()
    proc.wait(timeout=60)
    os.close(leader)
    return proc.returncode, shown, err


def test_measure_on_a_terminal_shows_the_report_not_json(tmp_path):
    """The README's first command, as people type it: a readable report, no JSON lines."""
    status, shown, err = _on_a_terminal(["measure", str(EXAMPLE)], tmp_path)
    assert status == 0, err
    assert b"lookout measure:" in shown and b"Context [" in shown
    assert b'{"' not in shown and b'{"' not in err
    quiet, shown, err = _on_a_terminal(["measure", "-q", "--fail-at", "5", str(EXAMPLE)], tmp_path)
    assert quiet == 1 and shown == b"" and b"at or over --fail-at 5%" in err


@pytest.mark.parametrize("command", [["compact", "--force"], ["clear-images"], ["restore"], ["mentions"]])
def test_an_editing_command_on_a_terminal_asks_for_a_file_or_a_pipe(tmp_path, command):
    session = tmp_path / "s.jsonl"
    session.write_bytes(EXAMPLE.read_bytes())
    status, shown, err = _on_a_terminal([*command, str(session)], tmp_path)
    assert status == 2 and shown == b"", err
    assert err == (f"lookout: error: {command[0]}: standard output is a terminal: send the transcript to a file "
                   "(-o FILE), back into FILE (-i) or a pipe\n").encode()
    assert session.read_bytes() == EXAMPLE.read_bytes()
    dry, shown, err = _on_a_terminal([*command, "--dry-run", str(session)], tmp_path)
    assert dry == 0 and b'{"' not in shown, err
    written, shown, err = _on_a_terminal([*command, "-o", str(tmp_path / "out.jsonl"), str(session)], tmp_path)
    assert written == 0 and (tmp_path / "out.jsonl").exists(), err
